r"""The `geomlearn` command: a thin shell over the library (`geomlearn --help`).

Models come from `geomlearn.models.MODELS`, data from `geomlearn.datasets.for_system`,
training from `geomlearn.fit`. The trainer, evaluation, report figure and structure check
come from the model's registry entry (`geomlearn.models.registry.ModelSpec`): for an
integrator `geomlearn.training.choose_trainer`, `geomlearn.evaluate`,
`geomlearn.plotting.report` and `geomlearn.check_structure`; for a reduction (the
symplectic autoencoder) Riemannian Adam from the PSD, `geomlearn.reduction.evaluate_reduction`,
`geomlearn.plotting.reduction_report` and `geomlearn.reduction.check_immersion`. `geomlearn train` writes a run folder (`geomlearn.io.run_folder`)
with `model.geomlearn`, `run.json` (the options), `history.json`, `metrics.json` and
`report.png`. Exit status: 0 success, 1 a failed `check` or training, 2 a usage error (one line
`geomlearn: error: …`, nothing written), 130 interrupted (what was trained is saved and
`run.json` says `"interrupted": true`). `--x64` turns on 64-bit mode for this process only;
`evaluate` uses the run's precision; `check` computes residuals in float64.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import sys
import time
import warnings

__all__ = ["main"]

MODEL_FILE = "model.geomlearn"
DEFAULT_SEQ_LENGTH = 3
EXAMPLES = {
    "train": "geomlearn train\n  geomlearn train --system rigid_body --model vp-transformer --positional-encoding",
    "evaluate": "geomlearn evaluate runs/pendulum-gsympnet-20261201-101500-3fa2/",
    "check": "geomlearn check runs/pendulum-gsympnet-*/ --points 32",
    "list": "geomlearn list | head",
}


class CLIError(Exception):
    """A user error: printed as `geomlearn: error: …`, exit status 2."""


def _resolve_model(name: str):
    from .models.registry import resolve_model
    return _user(resolve_model, name)


def _resolve_system(name: str) -> str:
    from .systems import resolve_system
    return _user(resolve_system, name)


def _user(fn, *args, **kwargs):
    """`fn(*args, **kwargs)`, with its `ValueError`/`TypeError`/`OSError` (a user's
    mistake: bad options, data or paths) as a `CLIError`."""
    try:
        return fn(*args, **kwargs)
    except (ValueError, TypeError, OSError) as e:
        raise CLIError(str(e)) from None


def _read_json(path: pathlib.Path, **checks):  # a JSON object, or one line naming the file
    from .io import read_json
    return _user(read_json, path, **checks)



def _train(args) -> int:
    import jax

    from . import datasets, io as gio
    from .evaluation import fmt
    from .io import write_json
    from .systems import SYSTEMS
    from .training import TrainingInterrupted, fit

    for flag, value in (("--epochs", args.epochs), ("--batch-size", args.batch_size),
                        ("--seq-length", args.seq_length), ("--n-trajectories", args.n_trajectories),
                        ("--reduced-dim", args.reduced_dim)):
        if value is not None and value < 1:
            raise CLIError(f"{flag} must be at least 1, got {value}")
    if args.time_budget is not None and not args.time_budget > 0:
        raise CLIError(f"--time-budget must be positive, got {args.time_budget}")
    system_name = _resolve_system(args.system)
    spec = _resolve_model(args.model)
    system = SYSTEMS[system_name]()
    why = spec.incompatibility(system)
    if why:
        raise CLIError(f"cannot train {spec.name} on {system_name}: {why}")
    started = time.perf_counter()
    k_model, k_fit = jax.random.split(jax.random.PRNGKey(args.seed))
    if not spec.windows:
        for flag, value in (("--seq-length", args.seq_length), ("--prediction-window",
                            args.prediction_window), ("--positional-encoding", args.positional_encoding or None)):
            if value is not None:
                raise CLIError(f"{flag} applies to transformer models only, not {spec.name}")
    model, fit_options = _user(
        spec.build_for, system, key=k_model, seq_length=args.seq_length or DEFAULT_SEQ_LENGTH,
        prediction_window=args.prediction_window, reduced_dim=args.reduced_dim,
        positional_encoding=args.positional_encoding)
    train, held_out, description = _user(datasets.for_system, system_name, system,
                                         n_trajectories=args.n_trajectories, seed=args.seed)
    x, _, task = _user(model.training_samples, train, _user(model.task, **fit_options))
    n_samples = int(x.shape[0])
    model = _user(spec.prepare, model, task, x[0], train)  # e.g. a model that cannot be iterated
    if n_samples < 1:
        raise CLIError(f"the data give no training samples for {spec.name} with {fit_options}")
    batch = args.batch_size if args.batch_size is not None else (n_samples if n_samples <= 512 else 256)
    if batch > n_samples:
        raise CLIError(f"--batch-size {batch} exceeds the {n_samples} training samples")
    optimizer, epochs, budget, how = _user(spec.trainer, model, n_samples, batch_size=batch,
                                           trainer=args.trainer, epochs=args.epochs, time_budget=args.time_budget)
    out = _user(gio.run_folder, args.out, prefix=f"{system_name}-{spec.name}", force=args.force)
    run = {
        "system": system_name, "model": spec.name, "model_class": spec.cls.__name__,
        "model_config": gio.encode_config(model)["config"], "epochs": epochs,
        "batch_size": batch, "trainer": how, "time_budget": budget,
        "seq_length": fit_options.get("seq_length"),
        "prediction_window": fit_options.get("prediction_window"),
        "positional_encoding": bool(args.positional_encoding),
        "n_trajectories": args.n_trajectories, "seed": args.seed, "x64": bool(args.x64),
        "dtype": str(train.states.dtype), "data": description, "loss": "relative",
        "canonical": bool(system.canonical), "labels": list(getattr(system, "labels", ()) or ()),
    }
    write_json(out / "run.json", run)
    print(f"geomlearn train: {spec.cls.__name__} ({model.structure}) on {type(system).__name__} — "
          f"{description}; trainer: {how}", file=sys.stderr)
    val = held_out if held_out is not train else None
    t_fit = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TrainingInterrupted)
        model, history = fit(model, train, epochs=epochs, batch_size=batch, val_data=val,
                             key=k_fit, optimizer=optimizer, time_budget=budget, **fit_options)
    interrupted = any(issubclass(w.category, TrainingInterrupted) for w in caught)
    fit_seconds = time.perf_counter() - t_fit
    gio.save(out / MODEL_FILE, model)
    write_json(out / "history.json", history)
    if interrupted:
        write_json(out / "run.json", {**run, "interrupted": True})
        print(f"geomlearn: interrupted after {len(history['epoch'])} epochs; saved the model "
              f"trained so far to {out}/", file=sys.stderr)
        return 130
    result = spec.evaluate(model, system, held_out, **fit_options)
    metrics = dict(result, training_seconds=fit_seconds, epochs=len(history["epoch"]),
                   final_loss=history["loss"][-1] if history["loss"] else None,
                   final_val_loss=history["val_loss"][-1] if history["val_loss"] else None)
    write_json(out / "metrics.json", metrics)
    wrote = [MODEL_FILE, "run.json", "history.json", "metrics.json"]
    if spec.report(out / "report.png", run=run, history=history, evaluation=result):
        wrote.append("report.png")
    extra = [("trainer", how), ("epochs", f"{metrics['epochs']} in {fit_seconds:.3g} s"),
             ("final loss", f"training {fmt(metrics['final_loss'])}   validation "
                            f"{fmt(metrics['final_val_loss'])}")]
    print(result.summary(title=f"{spec.cls.__name__} on {type(system).__name__}", extra=extra))
    if (metrics["final_loss"] or 0) > 0.1:
        print(f"  note: the training loss is still {fmt(metrics['final_loss'])}: the model has not "
              "converged (too few epochs, or a poor local minimum) — try more --epochs or another --seed")
    print(f"  wrote {out}/ ({', '.join(wrote)}) in {time.perf_counter() - started:.1f} s")
    return 0


def _load_run(directory: str, *, need_run: bool):
    from . import io as gio

    path = pathlib.Path(directory)
    model_file = path / MODEL_FILE if path.is_dir() else path
    if not model_file.is_file():
        raise CLIError(f"no {MODEL_FILE} in {directory!r} (expected a folder written by geomlearn train)")
    run_file = model_file.parent / "run.json"
    run = _read_json(run_file) if run_file.exists() else None
    if need_run and run is None:
        raise CLIError(f"no run.json in {str(model_file.parent)!r}: cannot tell which data to evaluate on")
    try:
        model = gio.load(model_file)
    except gio.PersistenceError as e:
        raise CLIError(str(e)) from None
    if run is not None and "model_class" in run:
        encoded, recorded = gio.encode_config(model), run.get("model_config") or {}
        if encoded["class"] != run["model_class"] or any(  # keys run.json records must agree
                encoded["config"].get(k) != v for k, v in recorded.items()):
            raise CLIError(f"{model_file} holds a {encoded['class']} that does not match run.json "
                           f"({run['model_class']} with {run.get('model_config')})")
    return model_file.parent, model, run


def _evaluate_cmd(args) -> int:
    from . import datasets
    from .io import write_json
    from .models.registry import spec_of
    from .systems import SYSTEMS

    out, model, run = _load_run(args.dir, need_run=True)
    if run.get("system") not in SYSTEMS:
        raise CLIError(f"run.json names an unknown system {run.get('system')!r}")
    system = SYSTEMS[run["system"]]()
    _, held_out, _ = _user(datasets.for_system, run["system"], system,
                           n_trajectories=run.get("n_trajectories"), seed=run.get("seed", 0))
    options = {k: run[k] for k in ("seq_length", "prediction_window") if run.get(k) is not None}
    history = (_read_json(out / "history.json", lists=("epoch", "loss", "val_loss"))
               if (out / "history.json").exists() else None)  # read before writing anything
    spec = spec_of(model)
    result = spec.evaluate(model, system, held_out, **options)
    metrics = dict(result)
    if (out / "metrics.json").exists():
        previous = _read_json(out / "metrics.json")
        metrics.update({k: previous[k] for k in ("training_seconds", "epochs", "final_loss",
                                                 "final_val_loss") if k in previous})
    write_json(out / "metrics.json", metrics)
    if history is not None:
        spec.report(out / "report.png", run=run, history=history, evaluation=result)
    print(result.summary(title=f"{metrics['model']} on {metrics['system']} ({out})", metrics=metrics))
    return 0


def _check_cmd(args) -> int:
    import jax
    import jax.numpy as jnp

    from .models.registry import spec_of

    if args.points < 1:
        raise CLIError(f"--points must be at least 1, got {args.points}")
    out, model, run = _load_run(args.dir, need_run=False)
    run = run or {}
    T = getattr(model, "seq_length", None) or run.get("seq_length") or DEFAULT_SEQ_LENGTH
    shape_options = {"seq_length": T} if hasattr(model, "seq_length") else {}
    task = _user(model.task, **shape_options, prediction_window=run.get("prediction_window"),
                 data_dt=0.1)
    shape = model.state_shape(task)
    points = jax.random.normal(jax.random.PRNGKey(0), (args.points, *shape), dtype=jnp.float64)
    result = spec_of(model).check(model, points, prediction_window=task.prediction_window, dt=task.dt)
    print(result.report(title=f"{type(model).__name__} ({out})"))
    return 0 if result.passed else 1


def _list_cmd(args) -> int:
    from .models.registry import MODELS
    from .systems import SYSTEMS

    systems = {name: cls() for name, cls in SYSTEMS.items()}
    lines = ["systems:"]
    for name, s in systems.items():
        kind = "canonical" if s.canonical else "non-canonical, volume-preserving"
        lines.append(f"  {name:<22} dim {s.dim}  {kind}; invariants: {', '.join(s.invariants)}")
    lines.append("models:")
    for name, spec in MODELS.items():
        fits = [s for s, system in systems.items() if spec.incompatibility(system) is None]
        lines.append(f"  {name:<31} {spec.cls.__name__:<28} preserves: {spec.structure:<10}  "
                     f"systems: {', '.join(fits)}")
    print("\n".join(lines))
    return 0



def _parser() -> argparse.ArgumentParser:
    from . import __version__

    def sub_parser(name, help):
        return sub.add_parser(name, help=help, description=help, epilog=f"example:\n  {EXAMPLES[name]}",
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    p = argparse.ArgumentParser(
        prog="geomlearn", description="Train, evaluate and check structure-preserving neural integrators.",
        epilog="exit status: 0 success, 1 a failed check or training, 2 a usage error, 130 interrupted")
    p.add_argument("--version", action="version", version=f"geomlearn {__version__}")
    sub = p.add_subparsers(dest="command", metavar="{train,evaluate,check,list}")
    t = sub_parser("train", "train a model on a system's data, evaluate it, write a report")
    t.add_argument("--system", default="pendulum", help="system name (see `geomlearn list`); default pendulum")
    t.add_argument("--model", default="gsympnet", help="model name (see `geomlearn list`); default gsympnet")
    t.add_argument("--epochs", type=int, default=None, help="training epochs (Levenberg–Marquardt: iterations); default by trainer and data size")
    t.add_argument("--batch-size", type=int, default=None, help="Adam's minibatch size (default: all samples up to 512, else 256)")
    t.add_argument("--trainer", choices=("auto", "lm", "adam"), default="auto",
                   help="Levenberg–Marquardt, Adam, or auto (default): LM for small networks, see geomlearn.training.choose_trainer")
    t.add_argument("--time-budget", type=float, default=None, help="stop training after this many seconds (LM default 150)")
    t.add_argument("--seq-length", type=int, default=None, help=f"transformers: window length T (default {DEFAULT_SEQ_LENGTH})")
    t.add_argument("--prediction-window", type=int, default=None, help="transformers: rows predicted per window, 1..T (default T: the rollout keeps the structure)")
    t.add_argument("--positional-encoding", action="store_true", help="transformers: add the positional encoding")
    t.add_argument("--reduced-dim", type=int, default=None, help="model reduction: the reduced dimension")
    t.add_argument("--n-trajectories", type=int, default=None, help="use this many trajectories of the data set (rigid body default 64)")
    t.add_argument("--x64", action="store_true", help="compute in float64 (JAX's 64-bit mode, this process only)")
    t.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    t.add_argument("--out", default=None, help="output folder (default runs/<system>-<model>-<time>-<id>)")
    t.add_argument("--force", action="store_true", help="write into a non-empty --out folder")
    e = sub_parser("evaluate", "evaluate a trained model again and rewrite metrics.json")
    e.add_argument("dir", help="a folder written by geomlearn train")
    c = sub_parser("check", "structure residuals of a saved model's iterated map, pass/fail")
    c.add_argument("dir", help="a folder written by geomlearn train, or a model file")
    c.add_argument("--points", type=int, default=16, help="random sample points (default 16)")
    sub_parser("list", "systems and models, and which structure each preserves")
    return p


def _wants_x64(args) -> bool:
    """`train --x64`, `check` (always float64), or `evaluate` of a run trained in float64."""
    if args.command == "check" or getattr(args, "x64", False):
        return True
    if args.command == "evaluate":
        run_file = pathlib.Path(args.dir) / "run.json"
        try:
            return bool(json.loads(run_file.read_text()).get("x64"))
        except (OSError, ValueError, AttributeError):
            return False  # a missing or corrupt run.json is reported by the command itself
    return False


def main(argv: list[str] | None = None) -> int:
    """Run the `geomlearn` command with `argv` (default `sys.argv[1:]`); returns the exit status."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, or an argparse usage error (already printed)
        return int(e.code or 0)
    if args.command is None:
        parser.print_help()
        return 2
    handlers = {"train": _train, "evaluate": _evaluate_cmd, "check": _check_cmd, "list": _list_cmd}
    try:
        with _x64() if _wants_x64(args) else contextlib.nullcontext():
            status = handlers[args.command](args)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return status
    except CLIError as e:
        print(f"geomlearn: error: {e}", file=sys.stderr)
        return 2
    except FloatingPointError as e:  # fit's NonFiniteLossError: the run failed, not the usage
        print(f"geomlearn: training failed: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("geomlearn: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `geomlearn list | head`: the reader left; end quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _x64():  # JAX's 64-bit mode for the duration of a command (restored afterwards)
    import jax
    return jax.enable_x64(True)


if __name__ == "__main__":
    sys.exit(main())
