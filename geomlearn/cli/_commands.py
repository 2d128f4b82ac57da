"""The commands `train`, `evaluate`, `check` and `list`; each returns an exit status."""

from __future__ import annotations

import pathlib
import sys
import time
import warnings

import jax
import jax.numpy as jnp

from .._files import write_json
from .._format import fmt
from ..evaluation import escape_warning
from ..io import encode_config, save
from ..systems import SYSTEMS, AbstractPortHamiltonianSystem, resolve_system
from ..training import TrainingInterrupted
from ._errors import CLIError, user
from ._options import DEFAULT_HORIZON, DEFAULT_SEQ_LENGTH, TrainOptions
from ._own_data import check_model_fits, from_file, held_out_of_run, split_file
from ._recipes import for_system, phase_space
from ._registry import MODELS, resolve_model, spec_of
from ._runs import MODEL_FILE, load_run, read_run_json, run_folder

__all__ = ["DEFAULT_SEQ_LENGTH", "DEFAULT_HORIZON", "train", "evaluate", "check", "NOTHING_TO_CHECK", "list_all", "model_by_name", "system_by_name"]


def _horizon(horizon) -> dict:
    """The long-horizon option of `geomlearn.evaluate` for `--horizon N` (0: none)."""
    if horizon is not None and horizon < 0:
        raise CLIError(f"--horizon must be at least 0 (0: no long-horizon evaluation), got {horizon}")
    return {"horizon": horizon} if horizon else {}


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
        positional_encoding=options.positional_encoding, model_options=options.model_options)


def _prepare(spec, model, train_data, fit_options, options: TrainOptions):
    """`(model, n_samples, batch)`: the model the spec starts from, the number of
    training samples, and the minibatch size (all samples up to 512, else 256)."""
    x, _, task = user(model.training_samples, train_data, user(model.task, **fit_options))
    n_samples = int(x.shape[0])
    model = user(spec.prepare, model, task, x[0], train_data)  # e.g. a model that cannot be iterated
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


def _finish(out, *, spec, model, system, held_out, fit_options, run, history, how, fit_seconds,
            started, on, horizon) -> None:
    """Evaluate the trained model (against `system`, or `None` for a user's file; `on`
    names the data), write `metrics.json` and the report, print a summary."""
    result = spec.evaluate(model, system, held_out, **fit_options, **horizon)
    metrics = dict(result, training_seconds=fit_seconds, epochs=len(history["epoch"]),
                   stop_reason=history.get("stop_reason"),
                   final_loss=history["loss"][-1] if history["loss"] else None,
                   final_val_loss=history["val_loss"][-1] if history["val_loss"] else None)
    if history.get("kept_epoch") is not None:  # a plan that keeps an earlier iterate (LiftPlan)
        metrics.update(kept_epoch=history["kept_epoch"], kept_score=history["kept_score"])
    write_json(out / "metrics.json", metrics)
    wrote = [MODEL_FILE, "run.json", "history.json", "metrics.json"]
    if spec.report(out / "report.png", run=run, history=history, evaluation=result):
        wrote.append("report.png")
    extra = [("trainer", how), ("epochs", f"{metrics['epochs']} in {fit_seconds:.3g} s"),
             ("final loss", f"training {fmt(metrics['final_loss'])}   validation "
                            f"{fmt(metrics['final_val_loss'])}")]
    if "kept_epoch" in metrics:
        extra.append(("kept", f"epoch {metrics['kept_epoch']}: latent rollout error "
                              f"{fmt(metrics['kept_score'])} on the {history['kept_score_on']}"))
    print(result.summary(title=f"{spec.cls.__name__} on {on}", extra=extra))
    _warn_if_escaped(result)
    if (metrics["final_loss"] or 0) > 0.1:
        print(f"  note: the training loss is still {fmt(metrics['final_loss'])}: the model has not "
              "converged (too few epochs, or a poor local minimum) — try more --epochs or another --seed")
    print(f"  wrote {out}/ ({', '.join(wrote)}) in {time.perf_counter() - started:.1f} s")


def _source(options: TrainOptions, key):
    """`(name, system or None, shape, spec, model, fit_options, train, held_out, description,
    record)`: a built-in system's data (`--system`), or a user's file (`--data`: no system,
    `shape` is the file's `DataFile`, `record` what run.json keeps about the file)."""
    if options.data is None:
        system_name, system, shape, spec = _system_and_spec(options)
        model, fit_options = _build(spec, shape, options, key)
        train_data, held_out, description = user(for_system, system_name, system,
                                                 n_trajectories=options.n_trajectories,
                                                 seed=options.seed)
        return (system_name, system, shape, spec, model, fit_options, train_data, held_out,
                description, {})
    spec = model_by_name(options.model)
    own = from_file(options, spec)
    model, fit_options = _build(spec, own.shape, options, key)
    own = split_file(options, own, fit_options)
    return (pathlib.Path(options.data).stem, None, own.shape, spec, model, fit_options, own.train,
            own.held_out, own.description, own.record)


def train(args) -> int:
    """`geomlearn train`: build, train, save, evaluate and report one run."""
    options = TrainOptions.from_args(args)
    started = time.perf_counter()
    k_model, k_fit = jax.random.split(jax.random.PRNGKey(options.seed))
    (system_name, system, shape, spec, model, fit_options, train_data, held_out, description,
     record) = _source(options, k_model)
    on = type(system).__name__ if system is not None else pathlib.Path(options.data).name
    model, n_samples, batch = _prepare(spec, model, train_data, fit_options, options)
    optimizer, epochs, budget, how = user(
        spec.trainer, model, n_samples, batch_size=batch, trainer=options.trainer,
        epochs=options.epochs, time_budget=options.time_budget)
    out = user(run_folder, options.out, prefix=f"{system_name}-{spec.name}", force=options.force)
    options = options.resolved(fit_options, epochs=epochs, batch_size=batch, time_budget=budget)
    run = _run_record(options, system_name=system_name if system is not None else None,
                      system=shape, spec=spec, model=model, how=how, train_data=train_data,
                      description=description)
    run.update(record)
    write_json(out / "run.json", run)
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
    against = system if system is None else _evaluated_against(system_name, system)
    _finish(out, spec=spec, model=model, system=against, held_out=held_out, fit_options=fit_options,
            run=run, history=history, how=how, fit_seconds=fit_seconds, started=started, on=on,
            horizon=_horizon(options.horizon))
    return 0


# ------------------------------------------------------------ evaluate, check, list


def evaluate(args) -> int:
    """`geomlearn evaluate`: evaluate a run's model again, rewrite `metrics.json` and the report."""
    out, model, run = load_run(args.dir, need_run=True)
    options = user(TrainOptions.from_run, run)
    if isinstance(run.get("data_file"), dict):  # trained with --data: the same file, split again
        system, held_out = None, held_out_of_run(run, options)
    elif options.system not in SYSTEMS:
        raise CLIError(f"run.json names an unknown system {options.system!r}")
    else:
        system = SYSTEMS[options.system]()
        _, held_out, _ = user(for_system, options.system, system,
                              n_trajectories=options.n_trajectories, seed=options.seed)
        system = _evaluated_against(options.system, system)
    history = (read_run_json(out / "history.json", lists=("epoch", "loss", "val_loss"))
               if (out / "history.json").exists() else None)  # read before writing anything
    spec = spec_of(model)
    result = spec.evaluate(model, system, held_out, **options.task_options(),
                           **_horizon(args.horizon))
    metrics = dict(result)
    if (out / "metrics.json").exists():
        previous = read_run_json(out / "metrics.json")
        metrics.update({k: previous[k] for k in ("training_seconds", "epochs", "stop_reason",
                                                 "final_loss", "final_val_loss") if k in previous})
    write_json(out / "metrics.json", metrics)
    if history is not None:
        spec.report(out / "report.png", run=run, history=history, evaluation=result)
    on = metrics["system"] or run.get("system") or pathlib.Path(run["data_file"]["path"]).name
    print(result.summary(title=f"{metrics['model']} on {on} ({out})", metrics=metrics))
    _warn_if_escaped(result)
    return 0


#: The exit status of `geomlearn check` on a model whose iterated map claims no structure.
NOTHING_TO_CHECK = 3


def _check_task(model, options: TrainOptions, dt):
    """The task of `geomlearn check` (the run's window, if any); `CLIError` when the model
    needs a time step that neither its file nor `--dt` gives."""
    T = getattr(model, "seq_length", None) or options.seq_length or DEFAULT_SEQ_LENGTH
    shape_options = {"seq_length": T} if hasattr(model, "seq_length") else {}
    task = user(model.task, **shape_options, prediction_window=options.prediction_window,
                data_dt=dt)
    try:
        model.rollout_task(model.state_shape(task), prediction_window=task.prediction_window,
                           dt=task.dt)
    except ValueError as e:
        raise CLIError(f"{e}; its file does not store one (saved before models stored their "
                       "time step): pass it with --dt") from None
    return task


def check(args) -> int:
    """`geomlearn check`: the structure residuals of a saved model at random points (exit
    status 1 when a claimed structure fails, `NOTHING_TO_CHECK` = 3 when the model's
    iterated map claims no structure)."""
    if args.points < 1:
        raise CLIError(f"--points must be at least 1, got {args.points}")
    dt = getattr(args, "dt", None)
    if dt is not None and not dt > 0:
        raise CLIError(f"--dt must be a number > 0, got {dt}")
    out, model, run = load_run(args.dir, need_run=False)
    task = _check_task(model, user(TrainOptions.from_run, run),
                       dt if dt is not None else getattr(model, "dt", None))
    name = f"{type(model).__name__} ({out})"
    shape = model.state_shape(task)
    points = jax.random.normal(jax.random.PRNGKey(0), (args.points, *shape), dtype=jnp.float64)
    result = spec_of(model).check(model, points, prediction_window=task.prediction_window, dt=task.dt)
    claimed = getattr(result, "claimed", None)  # an integrator's check: which residuals it claims
    if claimed is not None and not any(claimed(r) for r in result.residuals):
        print(f"{name}: no structure claimed; nothing to verify (exit status {NOTHING_TO_CHECK})")
        return NOTHING_TO_CHECK
    print(f"points: {args.points} draws of shape {shape} from the standard normal "
          "distribution N(0, I) (float64, key PRNGKey(0))"
          + (f"; dt = {task.dt}" if task.dt is not None else ""))
    print(result.report(title=name))
    return 0 if result.passed else 1


def _fits(spec, name, system) -> bool:
    """Whether `geomlearn train --system name --model spec` would build (`_system_and_spec`)."""
    shape = phase_space(name, system)
    if shape is system:
        return spec.incompatibility(system) is None
    try:
        check_model_fits(spec, shape, name)
    except CLIError:
        return False
    return True


def list_all(args) -> int:
    """`geomlearn list`: the systems and models, and which structure each preserves."""
    systems = {name: cls() for name, cls in SYSTEMS.items()}
    lines = ["systems:"]
    for name, s in systems.items():
        kind = ("canonical" if s.canonical else "damped/driven, port-Hamiltonian"
                if isinstance(s, AbstractPortHamiltonianSystem) else "non-canonical, volume-preserving")
        shape = phase_space(name, s)
        rows = "" if shape is s else f" (trained on its {', '.join(shape.labels)} rows)"
        lines.append(f"  {name:<22} dim {s.dim}{rows}  {kind}; invariants: "
                     f"{', '.join(s.invariants) or 'none'}")
    lines.append("models:")
    for name, spec in MODELS.items():
        fits = [s for s, system in systems.items() if _fits(spec, s, system)]
        lines.append(f"  {name:<31} {spec.cls.__name__:<28} preserves: {spec.structure:<10}  "
                     f"systems: {', '.join(fits)}")
    print("\n".join(lines))
    return 0
