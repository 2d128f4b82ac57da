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
from ._own_data import check_model_fits, from_file, held_out_of_run, split_file
from ._recipes import for_system, phase_space
from ._registry import MODELS, resolve_model, spec_of
from ._runs import MODEL_FILE, load_run, read_run_json, run_folder
from ._specs import parse_model_options

__all__ = ["DEFAULT_SEQ_LENGTH", "DEFAULT_HORIZON", "train", "evaluate", "check", "NOTHING_TO_CHECK", "list_all", "model_by_name", "system_by_name"]

DEFAULT_SEQ_LENGTH = 3
DEFAULT_HORIZON = 10_000  # steps of the long-horizon evaluation of `train` and `evaluate`


def _horizon(args) -> dict:
    """The long-horizon option of `geomlearn.evaluate` (`--horizon 0`: none)."""
    horizon = getattr(args, "horizon", DEFAULT_HORIZON)
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


def _check_numbers(args) -> None:
    for flag, value in (("--epochs", args.epochs), ("--batch-size", args.batch_size),
                        ("--seq-length", args.seq_length), ("--n-trajectories", args.n_trajectories),
                        ("--reduced-dim", args.reduced_dim)):
        if value is not None and value < 1:
            raise CLIError(f"{flag} must be at least 1, got {value}")
    if args.time_budget is not None and not args.time_budget > 0:
        raise CLIError(f"--time-budget must be positive, got {args.time_budget}")


def _system_and_spec(args):
    """`(system name, system, shape, spec)`, once the model fits the system (default
    pendulum) — or, for a system whose data drop its clock, the `shape` of its data
    (`phase_space`)."""
    system_name = system_by_name(args.system or "pendulum")
    spec = model_by_name(args.model)
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


def _build(spec, system, args, key):
    """`(model, fit_options)` with the command line's options; window flags only for
    window models."""
    if not spec.windows:
        for flag, value in (("--seq-length", args.seq_length), ("--prediction-window",
                            args.prediction_window), ("--positional-encoding", args.positional_encoding or None)):
            if value is not None:
                raise CLIError(f"{flag} applies to transformer models only, not {spec.name}")
    return user(
        spec.build_for, system, key=key, seq_length=args.seq_length or DEFAULT_SEQ_LENGTH,
        prediction_window=args.prediction_window, reduced_dim=args.reduced_dim,
        positional_encoding=args.positional_encoding,
        model_options=user(parse_model_options, args.model_option))


def _prepare(spec, model, train_data, fit_options, args):
    """`(model, n_samples, batch)`: the model the spec starts from, the number of
    training samples, and the minibatch size (all samples up to 512, else 256)."""
    x, _, task = user(model.training_samples, train_data, user(model.task, **fit_options))
    n_samples = int(x.shape[0])
    model = user(spec.prepare, model, task, x[0], train_data)  # e.g. a model that cannot be iterated
    if getattr(model, "dt", False) is None and task.dt is not None:  # stored in its file
        model = model.with_dt(task.dt)
    if n_samples < 1:
        raise CLIError(f"the data give no training samples for {spec.name} with {fit_options}")
    batch = args.batch_size if args.batch_size is not None else (n_samples if n_samples <= 512 else 256)
    if batch > n_samples:
        raise CLIError(f"--batch-size {batch} exceeds the {n_samples} training samples")
    return model, n_samples, batch


def _run_record(args, *, system_name, system, spec, model, fit_options, epochs, batch, how,
                budget, train_data, description) -> dict:
    """What `run.json` records: the options of the run, and what its data were."""
    return {
        "system": system_name, "model": spec.name, "model_class": spec.cls.__name__,
        "model_config": encode_config(model)["config"], "epochs": epochs,
        "batch_size": batch, "trainer": how, "time_budget": budget,
        "seq_length": fit_options.get("seq_length"),
        "prediction_window": fit_options.get("prediction_window"),
        "positional_encoding": (args.positional_encoding if isinstance(args.positional_encoding, str)
                                else bool(args.positional_encoding)),
        "model_options": parse_model_options(args.model_option),
        "n_trajectories": args.n_trajectories, "seed": args.seed, "x64": bool(args.x64),
        "dtype": str(train_data.dtype), "data": description, "loss": "relative",
        "canonical": bool(system.canonical), "labels": list(getattr(system, "labels", ()) or ()),
        "dt": train_data.dt,
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
    if history.get("kept_epoch") is not None:  # a spec that keeps an earlier iterate (LiftSpec)
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


def _source(args, key):
    """`(name, system or None, shape, spec, model, fit_options, train, held_out, description,
    record)`: a built-in system's data (`--system`), or a user's file (`--data`: no system,
    `shape` is the file's `DataFile`, `record` what run.json keeps about the file)."""
    if getattr(args, "data", None) is None:
        system_name, system, shape, spec = _system_and_spec(args)
        model, fit_options = _build(spec, shape, args, key)
        train_data, held_out, description = user(for_system, system_name, system,
                                                 n_trajectories=args.n_trajectories, seed=args.seed)
        return (system_name, system, shape, spec, model, fit_options, train_data, held_out,
                description, {})
    spec = model_by_name(args.model)
    own = from_file(args, spec)
    model, fit_options = _build(spec, own.shape, args, key)
    own = split_file(args, own, fit_options)
    return (pathlib.Path(args.data).stem, None, own.shape, spec, model, fit_options, own.train,
            own.held_out, own.description, own.record)


def train(args) -> int:
    """`geomlearn train`: build, train, save, evaluate and report one run."""
    _check_numbers(args)
    _horizon(args)
    started = time.perf_counter()
    k_model, k_fit = jax.random.split(jax.random.PRNGKey(args.seed))
    (system_name, system, shape, spec, model, fit_options, train_data, held_out, description,
     record) = _source(args, k_model)
    on = type(system).__name__ if system is not None else pathlib.Path(args.data).name
    model, n_samples, batch = _prepare(spec, model, train_data, fit_options, args)
    optimizer, epochs, budget, how = user(spec.trainer, model, n_samples, batch_size=batch,
                                          trainer=args.trainer, epochs=args.epochs, time_budget=args.time_budget)
    out = user(run_folder, args.out, prefix=f"{system_name}-{spec.name}", force=args.force)
    run = _run_record(args, system_name=system_name if system is not None else None, system=shape,
                      spec=spec, model=model, fit_options=fit_options, epochs=epochs, batch=batch,
                      how=how, budget=budget, train_data=train_data, description=description)
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
            horizon=_horizon(args))
    return 0


# ------------------------------------------------------------ evaluate, check, list


def evaluate(args) -> int:
    """`geomlearn evaluate`: evaluate a run's model again, rewrite `metrics.json` and the report."""
    out, model, run = load_run(args.dir, need_run=True)
    if isinstance(run.get("data_file"), dict):  # trained with --data: the same file, split again
        system, held_out = None, held_out_of_run(run)
    elif run.get("system") not in SYSTEMS:
        raise CLIError(f"run.json names an unknown system {run.get('system')!r}")
    else:
        system = SYSTEMS[run["system"]]()
        _, held_out, _ = user(for_system, run["system"], system,
                              n_trajectories=run.get("n_trajectories"), seed=run.get("seed", 0))
        system = _evaluated_against(run["system"], system)
    options = {k: run[k] for k in ("seq_length", "prediction_window") if run.get(k) is not None}
    history = (read_run_json(out / "history.json", lists=("epoch", "loss", "val_loss"))
               if (out / "history.json").exists() else None)  # read before writing anything
    spec = spec_of(model)
    result = spec.evaluate(model, system, held_out, **options, **_horizon(args))
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


def _check_task(model, run: dict, dt):
    """The task of `geomlearn check`; `CLIError` when the model needs a time step that
    neither its file nor `--dt` gives."""
    T = getattr(model, "seq_length", None) or run.get("seq_length") or DEFAULT_SEQ_LENGTH
    shape_options = {"seq_length": T} if hasattr(model, "seq_length") else {}
    task = user(model.task, **shape_options, prediction_window=run.get("prediction_window"),
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
    task = _check_task(model, run or {}, dt if dt is not None else getattr(model, "dt", None))
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
