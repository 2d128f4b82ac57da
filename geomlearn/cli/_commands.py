"""The commands `train` and `evaluate`; each returns an exit status (`check` and `list`:
`geomlearn.cli._inspect`)."""

from __future__ import annotations

import dataclasses
import pathlib
import sys
import time
import warnings

import jax

from .._files import write_json
from .._format import fmt
from ..evaluation import escape_warning
from ..io import encode_config, save
from ..second_order import AbstractDampedLeastSquares
from ._system_names import SYSTEMS, resolve_system
from ..training import TrainingInterrupted
from ._errors import CLIError, user
from ._options import DEFAULT_HORIZON, DEFAULT_SEQ_LENGTH, TrainOptions
from ._hamiltonian import check_model_holds_no_system, load_hamiltonian, own_system
from ._long_options import check_long_options, horizon_options
from ._own_data import check_model_fits, from_file, held_out_of_run, nominal_step, split_file
from ._recipes import for_system, phase_space, stride_report
from ._registry import resolve_model, spec_of
from ._runs import NOT_TRAINED, MODEL_FILE, how_it_ended, learned, load_run, read_run_json, run_folder

__all__ = ["DEFAULT_SEQ_LENGTH", "DEFAULT_HORIZON", "train", "evaluate", "NOT_TRAINED",
           "model_by_name", "system_by_name"]

#: What `evaluate` keeps of a run's `metrics.json`: what only its training knew.
_TRAINING_METRICS = ("training_seconds", "epochs", "stop_reason", "final_loss", "final_val_loss",
                     "start_loss", "identity_loss", "identity_loss_note", "trained",
                     "not_trained_reason",
                     "budget_ended_run", "loss_still_falling", "loss_recent_decrease",
                     "stride", "fastest_frequency", "verlet_stability_limit")


def _warn_if_escaped(result) -> None:
    """Print a warning line when a long-horizon rollout escaped."""
    line = escape_warning(result.get("long_horizon"))
    if line:
        print(f"  {line}")


def model_by_name(name: str):
    """The registry entry of the model `name` (a CLI name or a class name, any case);
    `CLIError` naming the valid models otherwise."""
    return user(resolve_model, name)


def system_by_name(name: str) -> str:
    """The canonical CLI name of the system `name` (`-` or `_`, any case); `CLIError`
    naming the valid systems otherwise."""
    return user(resolve_system, name)


# -------------------------------------------------------------------------- train


def _system_and_spec(options: TrainOptions):
    """`(system name, system, shape, spec)`, once the model fits the system — or, for a
    system whose data drop its clock, the `shape` of its data (`phase_space`)."""
    system_name = options.system
    spec = model_by_name(options.model)
    system = SYSTEMS[system_name]()
    shape = user(phase_space, system_name, system)
    if shape is not system:
        check_model_fits(spec, shape, f"{system_name} (its {', '.join(shape.labels)} rows)")
        return system_name, system, shape, spec
    why = spec.incompatibility(system)
    if why:
        raise CLIError(f"cannot train {spec.name} on {system_name}: {why}")
    return system_name, system, system, spec


def _evaluated_against(system_name, system):
    """The system `evaluate` compares with: `None` for data without their system's clock
    (`phase_space`: no system of their dimension; the data are the reference)."""
    return system if phase_space(system_name, system) is system else None


def _build(spec, system, options: TrainOptions, key):
    """`(model, fit_options)` with the command line's options; window flags only for
    window models."""
    if not spec.windows:
        for flag, value in (("--seq-length", options.seq_length), ("--prediction-window",
                            options.prediction_window), ("--positional-encoding",
                                                         options.positional_encoding or None)):
            if value is not None:
                raise CLIError(f"{flag} applies to transformer models only, not {spec.name}")
    return user(
        spec.build_for, system, key=key, seq_length=options.seq_length or DEFAULT_SEQ_LENGTH,
        prediction_window=options.prediction_window, reduced_dim=options.reduced_dim,
        positional_encoding=options.positional_encoding, model_options=options.model_options,
        symmetry=options.symmetry)


def _prepare(spec, model, train_data, fit_options, options: TrainOptions):
    """`(model, n_samples, batch)`: the model the spec starts from, the number of
    training samples, and the minibatch size (all samples up to 512, else 256)."""
    x, _, task = user(model.training_samples, train_data, user(model.task, **fit_options))
    n_samples = int(x.shape[0])
    model = user(spec.prepare, model, task, x[0], train_data,  # e.g. a model that cannot be iterated
                 options.model_options)
    if getattr(model, "dt", False) is None and task.dt is not None:  # stored in its file
        model = model.with_dt(task.dt)
    if n_samples < 1:
        raise CLIError(f"the data give no training samples for {spec.name} with {fit_options}")
    batch = (options.batch_size if options.batch_size is not None
             else n_samples if n_samples <= 512 else 256)
    if batch > n_samples:
        raise CLIError(f"--batch-size {batch} exceeds the {n_samples} training samples")
    return model, n_samples, batch


def _run_record(options: TrainOptions, *, system_name, system, spec, model, how, train_data,
                description) -> dict:
    """What `run.json` records: the run's options (resolved) under `"options"` and each
    under its own key too (the form `TrainOptions.from_run` reads without `"options"`),
    what the trainer was and what the data were."""
    return {
        "system": system_name, "model": spec.name, "model_class": spec.cls.__name__,
        "model_config": encode_config(model)["config"], "epochs": options.epochs,
        "batch_size": options.batch_size, "trainer": how, "time_budget": options.time_budget,
        "seq_length": options.seq_length, "prediction_window": options.prediction_window,
        "positional_encoding": (options.positional_encoding if isinstance(options.positional_encoding, str)
                                else bool(options.positional_encoding)),
        "model_options": options.model_options,
        "n_trajectories": options.n_trajectories, "seed": options.seed, "x64": options.x64,
        "dtype": str(train_data.dtype), "data": description, "loss": "relative",
        "canonical": bool(system.canonical), "labels": list(getattr(system, "labels", ()) or ()),
        "dt": train_data.dt, "options": options.to_run(),
    }


def _fit(spec, model, train_data, val, system, **options):
    """`(model, history, seconds, interrupted)` of the spec's training (`geomlearn.fit`
    by default); an interrupt (`TrainingInterrupted`) is reported, not raised."""
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TrainingInterrupted)
        model, history = spec.fit(model, train_data, system=system, val_data=val, **options)
    interrupted = any(issubclass(w.category, TrainingInterrupted) for w in caught)
    return model, history, time.perf_counter() - started, interrupted


def _baselines(spec, model, held_out, fit_options) -> tuple:
    """`(start, identity, why)`: the model's loss before training and the identity map's
    on the samples the run's loss is measured on (`AbstractPlan.start_loss`,
    `identity_loss`), `None` where there is none or it could not be computed, and why."""
    try:
        start = spec.plan.start_loss(model, held_out, fit_options=fit_options)
    except (ValueError, TypeError):
        start = None
    try:
        return (start, *spec.plan.identity_loss(model, held_out, fit_options=fit_options))
    except (ValueError, TypeError) as e:
        return start, None, f"not computed: {e}"


def _verdict(metrics, history, baselines, unit) -> list[tuple[str, str]]:
    """Whether the run learned (`learned`), into `metrics`; the summary's rows: the final
    losses beside the identity map's and the loss before training, and the verdict."""
    start, identity, note = baselines
    reason = learned(history, start=start, identity=identity, unit=unit)
    metrics.update(trained=reason is None, start_loss=start, identity_loss=identity)
    if identity is None:
        metrics["identity_loss_note"] = note
    if reason is not None:
        metrics["not_trained_reason"] = reason
    losses = (f"training {fmt(metrics['final_loss'])}   validation "
              f"{fmt(metrics['final_val_loss'])}   identity map {fmt(identity)}   before "
              f"training {fmt(start)}")
    rows = [("final loss", losses)]
    if identity is None:
        rows.append(("identity map", f"no comparison: {note}"))
    return rows + [("learned", "yes" if reason is None else f"NOT TRAINED: {reason}")]


def _classical_rows(metrics) -> list[tuple[str, str]]:
    """The summary's line on the classical integrators at equal cost (none without)."""
    verdict = metrics.get("against_classical")
    return [] if verdict is None else [("vs classical", verdict)]


def _finish(out, *, spec, model, system, held_out, fit_options, run, history, how, fit_seconds,
            started, on, horizon, limits, baselines, stride) -> int:
    """Evaluate the trained model (against `system`, or `None` for a user's file; `on`
    names the data), write `metrics.json` and the report, print a summary; the exit
    status (`NOT_TRAINED` when the model did not learn: `learned`). `horizon` is what the
    evaluation adds (the long horizon; irregular data's nominal step), `limits`
    `(epochs, time_budget, unit)` of the run's budget, `baselines` `_baselines`', `stride`
    `stride_report`'s."""
    result = spec.evaluate(model, system, held_out, **fit_options, **horizon)
    metrics = dict(result, training_seconds=fit_seconds, epochs=len(history["epoch"]),
                   stop_reason=history.get("stop_reason"),
                   final_loss=history["loss"][-1] if history["loss"] else None,
                   final_val_loss=history["val_loss"][-1] if history["val_loss"] else None)
    if history.get("kept_epoch") is not None:  # a plan that keeps an earlier iterate (LiftPlan)
        metrics.update(kept_epoch=history["kept_epoch"], kept_score=history["kept_score"])
    epochs, budget, unit = limits
    ended, entries = how_it_ended(history, epochs=epochs, time_budget=budget, unit=unit)
    metrics.update(entries)
    verdict = _verdict(metrics, history, baselines, unit)
    metrics.update(stride[0])
    write_json(out / "metrics.json", metrics)
    wrote = [MODEL_FILE, "run.json", "history.json", "metrics.json"]
    if spec.report(out / "report.png", run=run, history=history, evaluation=result):
        wrote.append("report.png")
    extra = [("trainer", how), (unit, f"{metrics['epochs']} in {fit_seconds:.3g} s; {ended}"),
             *verdict, *_classical_rows(metrics), *stride[1]]
    if "kept_epoch" in metrics:
        extra.append(("kept", f"epoch {metrics['kept_epoch']}: latent rollout error "
                              f"{fmt(metrics['kept_score'])} on the {history['kept_score_on']}"))
    print(result.summary(title=f"{spec.cls.__name__} on {on}", extra=extra))
    _warn_if_escaped(result)
    if entries["budget_ended_run"] and entries["loss_still_falling"]:
        print("  note: the budget ended training while the loss was still falling — more "
              "--epochs or a longer --time-budget may lower it")
    if not metrics["trained"]:
        print(f"  not trained: {metrics['not_trained_reason']}; the files are written, but "
              f"this model is not a result (exit status {NOT_TRAINED})")
    print(f"  wrote {out}/ ({', '.join(wrote)}) in {time.perf_counter() - started:.1f} s")
    return 0 if metrics["trained"] else NOT_TRAINED


def _source(options: TrainOptions, key):
    """`(name, system or None, shape, spec, model, fit_options, train, held_out, description,
    record)`: a built-in system's data (`--system`), or a user's file (`--data`: the system
    of `--hamiltonian` or none, `shape` is the file's `DataFile`, `record` what run.json
    keeps about the file)."""
    if options.data is None:
        system_name, system, shape, spec = _system_and_spec(options)
        model, fit_options = _build(spec, shape, options, key)
        train_data, held_out, description = user(for_system, system_name, system,
                                                 n_trajectories=options.n_trajectories,
                                                 seed=options.seed, stride=options.stride)
        return (system_name, system, shape, spec, model, fit_options, train_data, held_out,
                description, {})
    spec = model_by_name(options.model)
    check_model_holds_no_system(spec, options)
    H = None if options.hamiltonian is None else load_hamiltonian(options.hamiltonian)
    own = from_file(options, spec)
    model, fit_options = _build(spec, own.shape, options, key)
    own = split_file(options, own, fit_options)
    return (pathlib.Path(options.data).stem, own_system(options, own.held_out, H), own.shape,
            spec, model, fit_options, own.train, own.held_out, own.description, own.record)


def train(args) -> int:
    """`geomlearn train`: build, train, save, evaluate and report one run."""
    options = TrainOptions.from_args(args)
    started = time.perf_counter()
    k_model, k_fit = jax.random.split(jax.random.PRNGKey(options.seed))
    (system_name, system, shape, spec, model, fit_options, train_data, held_out, description,
     record) = _source(options, k_model)
    on = pathlib.Path(options.data).name if options.data is not None else type(system).__name__
    if options.data is not None and options.particles is None and shape.particle_dimension:
        options = dataclasses.replace(options, particles=shape.particle_dimension)  # ASE .traj
    model, n_samples, batch = _prepare(spec, model, train_data, fit_options, options)
    against = system if options.data is not None else _evaluated_against(system_name, system)
    added = check_long_options(options, model=model, system=against, held_out=held_out,
                               labels=list(getattr(shape, "labels", ()) or ()),
                               fit_options=fit_options,
                               evaluated=spec.evaluation.user_options)
    optimizer, epochs, budget, how = user(
        spec.trainer, model, n_samples, batch_size=batch, trainer=options.trainer,
        epochs=options.epochs, time_budget=options.time_budget)
    out = user(run_folder, options.out, prefix=f"{system_name}-{spec.name}", force=options.force)
    options = options.resolved(fit_options, epochs=epochs, batch_size=batch, time_budget=budget)
    run = _run_record(options, system_name=system_name if options.data is None else None,
                      system=shape, spec=spec, model=model, how=how, train_data=train_data,
                      description=description)
    run.update(record)
    write_json(out / "run.json", run)
    baselines = _baselines(spec, model, held_out, fit_options)  # before Ctrl-C is deferred
    print(f"geomlearn train: {spec.cls.__name__} ({model.structure}) on {on} — "
          f"{description}; trainer: {how}", file=sys.stderr)
    model, history, fit_seconds, interrupted = _fit(
        spec, model, train_data, held_out if held_out is not train_data else None, system, epochs=epochs,
        batch_size=batch, key=k_fit, optimizer=optimizer, time_budget=budget, **fit_options)
    save(out / MODEL_FILE, model)
    write_json(out / "history.json", history)
    if interrupted:
        write_json(out / "run.json", {**run, "interrupted": True})
        print(f"geomlearn: interrupted after {len(history['epoch'])} epochs; saved the model "
              f"trained so far to {out}/", file=sys.stderr)
        return 130
    unit = "iterations" if isinstance(optimizer, AbstractDampedLeastSquares) else "epochs"
    return _finish(out, spec=spec, model=model, system=against, held_out=held_out,
                   fit_options=fit_options, run=run, history=history, how=how,
                   fit_seconds=fit_seconds, started=started, on=on,
                   horizon={**horizon_options(options.horizon, options.particles, added),
                            **nominal_step(held_out, train_data.dt)},
                   limits=(epochs, budget, unit), baselines=baselines,
                   stride=stride_report(options.stride, against, train_data))


# ------------------------------------------------------------ evaluate, check, list


def evaluate(args) -> int:
    """`geomlearn evaluate`: evaluate a run's model again, rewrite `metrics.json` and the report."""
    out, model, run = load_run(args.dir, need_run=True)
    options = user(TrainOptions.from_run, run)
    own = isinstance(run.get("data_file"), dict)
    if own:  # trained with --data: the same file, split again (and its --hamiltonian)
        held_out = held_out_of_run(run, options)
        system = own_system(options, held_out)
    elif options.system not in SYSTEMS:
        raise CLIError(f"run.json names an unknown system {options.system!r}")
    else:
        system = SYSTEMS[options.system]()
        _, held_out, _ = user(for_system, options.system, system,
                              n_trajectories=options.n_trajectories, seed=options.seed,
                              stride=options.stride)
        system = _evaluated_against(options.system, system)
    history = (read_run_json(out / "history.json", lists=("epoch", "loss", "val_loss"))
               if (out / "history.json").exists() else None)  # read before writing anything
    spec = spec_of(model)
    added = check_long_options(options, model=model, system=system, held_out=held_out,
                               labels=run.get("labels") or [], fit_options=options.task_options(),
                               evaluated=spec.evaluation.user_options, horizon=args.horizon)
    result = spec.evaluate(model, system, held_out, **options.task_options(),
                           **horizon_options(args.horizon, options.particles, added),
                           **nominal_step(held_out, run.get("dt")))
    metrics = dict(result)
    if (out / "metrics.json").exists():
        previous = read_run_json(out / "metrics.json")
        metrics.update({k: previous[k] for k in _TRAINING_METRICS if k in previous})
    write_json(out / "metrics.json", metrics)
    if history is not None:
        spec.report(out / "report.png", run=run, history=history, evaluation=result)
    on = pathlib.Path(run["data_file"]["path"]).name if own else metrics["system"] or run.get("system")
    print(result.summary(title=f"{metrics['model']} on {on} ({out})", metrics=metrics,
                         extra=_classical_rows(metrics)))
    _warn_if_escaped(result)
    if metrics.get("trained") is False:
        print(f"  not trained: {metrics.get('not_trained_reason')}; this model is not a result "
              f"(exit status {NOT_TRAINED})")
        return NOT_TRAINED
    return 0
