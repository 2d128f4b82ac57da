r"""The `geomlearn` command: train, evaluate, check and list, from a terminal.

```text
geomlearn train [--system S] [--model M] [--epochs N] [--batch-size B]
                [--seq-length T] [--prediction-window P] [--positional-encoding]
                [--n-trajectories K] [--x64] [--seed K] [--out DIR]
geomlearn evaluate DIR
geomlearn check DIR
geomlearn list
```

`geomlearn train` with no options trains a `GSympNet` on the SympNets pendulum (40
one-step pairs), evaluates it on the 100-step test trajectory, and writes to
`runs/<system>-<model>-<time>/`:

- `model.geomlearn` — the trained model (`geomlearn.load` reads it);
- `run.json` — the options of the run (what `geomlearn evaluate` needs to rebuild the data);
- `history.json` — per-epoch training/validation loss, learning rate, wall time;
- `metrics.json` — `geomlearn.evaluate`'s dict plus the training time;
- `report.png` — rollout against the reference in phase space, invariant error over
  time, loss curves (needs matplotlib: `pip install "geomlearn[plot]"`).

Data per system: `pendulum` — the SympNets data set (train on its 40 steps, evaluate on
the 100 test steps); `rigid_body` — the volume-preserving transformer paper's 1238
trajectories, of which `--n-trajectories` (default 64, evenly spaced in the paper's
parameter) are used, 80 % for training and 20 % held out for validation and evaluation;
`coupled_oscillator` — the linear symplectic transformer tutorial's 5 trajectories (4 for
training, 1 held out); any other system — trajectories from its default initial
conditions (`dt = 0.1`, 200 steps), split the same way when there are at least two.

`--x64` turns on JAX's 64-bit mode for this process only (the library itself never
changes global JAX configuration); `geomlearn check` evaluates the residuals in float64
the same way, so a float32 model is checked without float32 round-off.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import pathlib
import sys
import time

__all__ = ["main"]

MODEL_FILE = "model.geomlearn"

# CLI name -> (class name in geomlearn.models, default constructor arguments besides dim)
MODELS: dict[str, tuple[str, dict]] = {
    "gsympnet": ("GSympNet", {"n_layers": 4, "width": 16}),
    "lasympnet": ("LASympNet", {"n_layers": 3, "n_linear": 2}),
    "henonnet": ("HenonNet", {"n_layers": 3, "width": 8}),
    "resnet": ("ResNet", {"width": 16, "depth": 2}),
    "hnn": ("HamiltonianNeuralNetwork", {"width": 16, "depth": 2}),
    "vp-feedforward": ("VolumePreservingFeedForward", {"n_blocks": 6, "n_linear": 1}),
    "transformer": ("Transformer", {"n_heads": 1, "L": 2, "n_blocks": 1}),
    "vp-transformer": ("VolumePreservingTransformer", {"n_blocks": 6, "n_linear": 1, "L": 1}),
    "linear-symplectic-transformer": ("LinearSymplecticTransformer", {"n_sympnet": 2, "L": 1}),
    "symplectic-transformer": ("SymplecticTransformer", {"n_sympnet": 2, "L": 1}),
}

DEFAULT_SEQ_LENGTH = 3
DEFAULT_PREDICTION_WINDOW = 1  # one new state per transformer call: the stablest rollout
DEFAULT_N_TRAJECTORIES = {"rigid_body": 64}
GENERIC_DT, GENERIC_STEPS = 0.1, 200
CHECK_TOLERANCE = 1e-10  # float64 residuals of an exactly structure-preserving map


class CLIError(Exception):
    """A user error: printed as `geomlearn: error: …`, exit status 2."""


# --------------------------------------------------------------------- registries


def _model_class(cli_name: str):
    from . import models

    return getattr(models, MODELS[cli_name][0])


def _resolve_model(name: str) -> str:
    key = name.strip().lower().replace("_", "-")
    if key in MODELS:
        return key
    for cli_name, (cls_name, _) in MODELS.items():
        if key == cls_name.lower():
            return cli_name
    raise CLIError(f"unknown model {name!r}; valid models: {', '.join(MODELS)}")


def _systems() -> dict:
    from .systems import SYSTEMS

    return SYSTEMS


def _resolve_system(name: str) -> str:
    systems = _systems()
    key = name.strip().lower().replace("-", "_")
    if key in systems:
        return key
    for sys_name, cls in systems.items():
        if key == cls.__name__.lower():
            return sys_name
    raise CLIError(f"unknown system {name!r}; valid systems: {', '.join(systems)}")


def _kind(cls) -> str:
    from .models._base import AbstractHamiltonianModel, AbstractTransformerIntegrator

    if issubclass(cls, AbstractTransformerIntegrator):
        return "transformer"
    if issubclass(cls, AbstractHamiltonianModel):
        return "hamiltonian"
    return "feedforward"


def _incompatibility(model_name: str, system) -> str | None:
    """Why `model_name` cannot be trained on `system`, or `None`."""
    cls = _model_class(model_name)
    needs_canonical = cls.structure == "symplectic" or _kind(cls) == "hamiltonian"
    if needs_canonical and (not system.canonical or system.dim % 2):
        what = (
            "is symplectic" if cls.structure == "symplectic" else "learns a Hamiltonian H with field J∇H"
        )
        return (
            f"{cls.__name__} {what}, which needs a canonical phase space z = (q, p) of even "
            f"dimension 2n; {type(system).__name__} is {system.dim}-dimensional and "
            f"{'not canonical' if not system.canonical else 'odd-dimensional'} (it preserves "
            "volume, not a symplectic form). Use a volume-preserving model "
            "(vp-feedforward, vp-transformer) or an unconstrained one (resnet, transformer)."
        )
    if cls.__name__ == "Transformer":
        n_heads = MODELS[model_name][1].get("n_heads", 1)
        if system.dim % n_heads:
            return f"Transformer with {n_heads} heads needs dim divisible by {n_heads}"
    return None


# --------------------------------------------------------------------- data


def _dataset(system_name: str, system, *, n_trajectories, seed: int):
    """`(train, evaluation_data, description)` for a system."""
    import jax
    import numpy as np

    from . import datasets
    from .data import TrajectoryData

    key = jax.random.fold_in(jax.random.PRNGKey(seed), 7)
    if system_name == "pendulum":
        train, test = datasets.pendulum_sympnets()
        if n_trajectories is not None:
            raise CLIError("the pendulum data set has one trajectory; drop --n-trajectories")
        return train, test, "SympNets pendulum: train on 40 steps, evaluate on the next 100"
    if system_name == "rigid_body":
        source = "volume-preserving transformer rigid body"
        n = n_trajectories if n_trajectories is not None else DEFAULT_N_TRAJECTORIES[system_name]
        z0 = datasets.rigid_body_vpt_initial_conditions()
        if not 1 <= n <= z0.shape[0]:
            raise CLIError(f"--n-trajectories must be between 1 and {z0.shape[0]}, got {n}")
        if n == z0.shape[0]:
            data = datasets.rigid_body_vpt()
        else:  # integrate only the trajectories used, as rigid_body_vpt() does (dt 0.2, 100 steps)
            idx = np.unique(np.linspace(0, z0.shape[0] - 1, n).round().astype(int))
            data = TrajectoryData.from_system(
                system, z0[idx], 0.2, 100, method="implicit_midpoint"
            )
        n_trajectories = None  # already selected
    elif system_name == "coupled_oscillator":
        data = datasets.coupled_oscillator_lst(jax.random.fold_in(key, 1))
        source = "linear symplectic transformer coupled oscillator"
    else:
        z0 = system.default_initial_conditions()
        data = TrajectoryData.from_system(system, z0, GENERIC_DT, GENERIC_STEPS)
        source = f"default initial conditions, dt={GENERIC_DT}, {GENERIC_STEPS} steps"
    n_total = data.n_trajectories
    n = n_trajectories
    if n is not None:
        if not 1 <= n <= n_total:
            raise CLIError(f"--n-trajectories must be between 1 and {n_total}, got {n}")
        idx = np.unique(np.linspace(0, n_total - 1, n).round().astype(int))
        data = TrajectoryData(data.states[idx], data.dt)
    if data.n_trajectories >= 2:
        train, held_out = data.split(0.8, key=jax.random.fold_in(key, 2))
        how = (
            f"{train.n_trajectories} training / {held_out.n_trajectories} held-out trajectories"
        )
        return train, held_out, f"{source}: {how}"
    return data, data, f"{source}: 1 trajectory, trained and evaluated on it"


# --------------------------------------------------------------------- output


def _fmt(x) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        if x == 0.0:
            return "0"
        if not math.isfinite(x):
            return str(x)
        return f"{x:.3g}" if 1e-3 <= abs(x) < 1e5 else f"{x:.2e}"
    return str(x)


def _summary(metrics: dict, *, title: str, extra: list[tuple[str, str]] = ()) -> str:
    rows = list(extra)
    errs = "   ".join(f"step {k}: {_fmt(v)}" for k, v in metrics["trajectory_error"].items())
    rows.append(("trajectory error", errs))
    for name, value in metrics["invariant_drift"].items():
        ref = metrics["reference_invariant_drift"].get(name)
        rows.append((f"{name} drift", f"model {_fmt(value)}   reference {_fmt(ref)}"))
    for name, value in metrics["structure_residual"].items():
        claimed = (name == "symplecticity" and metrics["structure"] == "symplectic") or (
            name == "volume" and metrics["structure"] in ("symplectic", "volume")
        )
        rows.append((f"{name} residual", _fmt(value) + ("" if claimed else "   (not claimed)")))
    speed = f"{_fmt(metrics['rollout_states_per_second'])} states/s"
    if metrics.get("reference_states_per_second") is not None:
        speed += (
            f"   reference {metrics['reference_method']}: "
            f"{_fmt(metrics['reference_states_per_second'])} states/s"
        )
    rows.append(("rollout speed", speed))
    width = max(len(r[0]) for r in rows)
    return "\n".join([title] + [f"  {name:<{width}}  {value}" for name, value in rows])


def _report(path, *, run, history, metrics, rollout, reference, series) -> bool:
    """Write report.png; `False` (with a message) when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(
            "geomlearn: matplotlib is not installed, so report.png was not written; "
            'install it with pip install "geomlearn[plot]"',
            file=sys.stderr,
        )
        return False
    import numpy as np

    labels = run.get("labels") or []
    d = reference.shape[-1]
    a, b = (0, d // 2) if run.get("canonical") else (0, min(1, d - 1))
    name = lambda i: labels[i] if i < len(labels) else f"z{i + 1}"  # noqa: E731
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    ax = axes[0]
    ref, pred = np.asarray(reference[0]), np.asarray(rollout[0])
    ax.plot(ref[:, a], ref[:, b], "k-", lw=2.5, alpha=0.35, label="reference")
    ax.plot(pred[:, a], pred[:, b], "C0--", lw=1.3, label=metrics["model"])
    ax.plot(ref[0, a], ref[0, b], "ko", ms=4)
    ax.set_xlabel(name(a))
    ax.set_ylabel(name(b))
    ax.set_title(f"rollout, {metrics['n_steps']} steps (evaluation trajectory 1)")
    ax.legend(loc="best", fontsize=8)
    ax.set_aspect("equal", adjustable="datalim")
    ax = axes[1]
    t = np.arange(reference.shape[1]) * (metrics["dt"] or 1.0)
    for i, (inv, values) in enumerate(series.items()):
        ax.semilogy(t[1:], np.maximum(values["model"][1:], 1e-17), f"C{i}-",
                    label=f"{inv}, {metrics['model']}")
        ax.semilogy(t[1:], np.maximum(values["reference"][1:], 1e-17), f"C{i}:",
                    label=f"{inv}, reference data")
    ax.set_xlabel("time" if metrics["dt"] else "step")
    ax.set_ylabel("relative invariant error")
    ax.set_title("invariant error of the rollout")
    ax.legend(loc="best", fontsize=8)
    ax = axes[2]
    ax.semilogy(history["epoch"], history["loss"], "C0-", label="training")
    val = [v for v in history["val_loss"] if v is not None]
    if len(val) == len(history["epoch"]):
        ax.semilogy(history["epoch"], val, "C1-", label="validation")
    ax.set_xlabel("epoch")
    ax.set_ylabel(f"{run.get('loss', 'relative')} loss")
    ax.set_title("training")
    ax.legend(loc="best", fontsize=8)
    fig.suptitle(f"{metrics['model']} on {metrics['system']} ({metrics['structure']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _jsonable(obj):
    """Strict JSON: non-finite floats (a diverged rollout) become `null`."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj


def _write_json(path: pathlib.Path, obj) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(_jsonable(obj), indent=2, allow_nan=False) + "\n")
    os.replace(tmp, path)


# --------------------------------------------------------------------- commands


def _train(args) -> int:
    import jax

    from . import io as gio
    from .evaluation import _evaluate
    from .training import fit

    system_name = _resolve_system(args.system)
    model_name = _resolve_model(args.model)
    system = _systems()[system_name]()
    why = _incompatibility(model_name, system)
    if why:
        raise CLIError(f"cannot train {model_name} on {system_name}: {why}")
    cls = _model_class(model_name)
    kind = _kind(cls)
    if kind != "transformer":
        for flag, value in (
            ("--seq-length", args.seq_length),
            ("--prediction-window", args.prediction_window),
            ("--positional-encoding", args.positional_encoding or None),
        ):
            if value is not None:
                raise CLIError(f"{flag} applies to transformer models only, not {model_name}")
    T = args.seq_length if args.seq_length is not None else DEFAULT_SEQ_LENGTH
    pw = args.prediction_window if args.prediction_window is not None else DEFAULT_PREDICTION_WINDOW
    if kind == "transformer" and not 1 <= pw <= T:
        raise CLIError(f"--prediction-window must be between 1 and --seq-length={T}, got {pw}")

    started = time.perf_counter()
    train, evaluation_data, description = _dataset(
        system_name, system, n_trajectories=args.n_trajectories, seed=args.seed
    )
    key = jax.random.PRNGKey(args.seed)
    k_model, k_fit = jax.random.split(key)
    kwargs = dict(MODELS[model_name][1])
    if kind == "transformer":
        if cls.__name__ == "LinearSymplecticTransformer":
            kwargs["seq_length"] = T
        kwargs["positional_encoding"] = bool(args.positional_encoding)
    model = cls(system.dim, **kwargs, key=k_model)

    epochs = args.epochs if args.epochs is not None else _default_epochs(kind, train, T)
    n_samples = _n_samples(kind, train, T, pw)
    batch_size = args.batch_size if args.batch_size is not None else _default_batch(n_samples)
    if batch_size > n_samples:
        raise CLIError(f"--batch-size {batch_size} exceeds the {n_samples} training samples")
    out = pathlib.Path(args.out) if args.out else _default_out(system_name, model_name)
    out.mkdir(parents=True, exist_ok=True)
    fit_kwargs = {}
    if kind == "transformer":
        fit_kwargs = {"seq_length": T, "prediction_window": pw}
    run = {
        "system": system_name,
        "model": model_name,
        "model_class": cls.__name__,
        "model_config": gio._encode_config(model)["config"],
        "epochs": epochs,
        "batch_size": batch_size,
        "seq_length": T if kind == "transformer" else None,
        "prediction_window": pw if kind == "transformer" else None,
        "positional_encoding": bool(args.positional_encoding),
        "n_trajectories": args.n_trajectories,
        "seed": args.seed,
        "x64": bool(args.x64),
        "dtype": str(train.states.dtype),
        "data": description,
        "loss": "relative",
        "canonical": bool(system.canonical),
        "labels": list(getattr(system, "labels", ()) or ()),
    }
    _write_json(out / "run.json", run)
    print(
        f"geomlearn train: {cls.__name__} ({cls.structure}) on {type(system).__name__} — "
        f"{description}; {epochs} epochs, batch size {batch_size}",
        file=sys.stderr,
    )
    val = evaluation_data if evaluation_data is not train else None
    t_fit = time.perf_counter()
    model, history = fit(
        model,
        train,
        epochs=epochs,
        batch_size=batch_size,
        val_data=val,
        key=k_fit,
        progress=True,
        **fit_kwargs,
    )
    fit_seconds = time.perf_counter() - t_fit
    gio.save(out / MODEL_FILE, model)
    _write_json(out / "history.json", history)
    metrics, rollout, reference, series = _evaluate(
        model,
        system,
        evaluation_data,
        prediction_window=run["prediction_window"],
        seq_length=run["seq_length"],
    )
    metrics["training_seconds"] = fit_seconds
    metrics["epochs"] = len(history["epoch"])
    metrics["final_loss"] = history["loss"][-1] if history["loss"] else None
    metrics["final_val_loss"] = history["val_loss"][-1] if history["val_loss"] else None
    _write_json(out / "metrics.json", metrics)
    wrote = [MODEL_FILE, "run.json", "history.json", "metrics.json"]
    if _report(out / "report.png", run=run, history=history, metrics=metrics,
               rollout=rollout, reference=reference, series=series):
        wrote.append("report.png")
    total = time.perf_counter() - started
    extra = [
        ("epochs", f"{metrics['epochs']} in {_fmt(fit_seconds)} s"),
        ("final loss", f"training {_fmt(metrics['final_loss'])}   validation "
                       f"{_fmt(metrics['final_val_loss'])}"),
    ]
    print(_summary(metrics, title=f"{cls.__name__} on {type(system).__name__}", extra=extra))
    final = metrics["final_loss"]
    if final is not None and final > 0.1:
        print(f"  note: the training loss is still {_fmt(final)}: the model has not converged "
              "(too few epochs, or a poor local minimum) — try more --epochs or another --seed")
    print(f"  wrote {out}/ ({', '.join(wrote)}) in {total:.1f} s")
    return 0


def _n_samples(kind, train, T, pw) -> int:
    if kind == "transformer":
        return train.n_trajectories * max(train.n_steps + 1 - T - pw + 1, 0)
    return train.n_trajectories * train.n_steps


def _default_batch(n_samples: int) -> int:
    return n_samples if n_samples <= 512 else 256


def _default_epochs(kind: str, train, T: int) -> int:
    n = train.n_trajectories * train.n_steps
    if kind == "transformer":
        return 200 if n <= 2000 else 50
    return 3000 if n <= 512 else 100


def _default_out(system_name: str, model_name: str) -> pathlib.Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return pathlib.Path("runs") / f"{system_name}-{model_name}-{stamp}"


def _load_run(directory: str):
    from . import io as gio

    path = pathlib.Path(directory)
    model_file = path / MODEL_FILE if path.is_dir() else path
    if not model_file.exists():
        raise CLIError(f"no {MODEL_FILE} in {directory!r} (expected a folder written by geomlearn train)")
    try:
        model = gio.load(model_file)
    except gio.PersistenceError as e:
        raise CLIError(str(e)) from None
    run_file = model_file.parent / "run.json"
    run = json.loads(run_file.read_text()) if run_file.exists() else None
    return model_file.parent, model, run


def _evaluate_cmd(args) -> int:
    from .evaluation import _evaluate

    out, model, run = _load_run(args.dir)
    if run is None:
        raise CLIError(f"no run.json in {str(out)!r}: cannot tell which data to evaluate on")
    system = _systems()[run["system"]]()
    _, evaluation_data, _ = _dataset(
        run["system"], system, n_trajectories=run.get("n_trajectories"), seed=run["seed"]
    )
    metrics, rollout, reference, series = _evaluate(
        model,
        system,
        evaluation_data,
        prediction_window=run.get("prediction_window"),
        seq_length=run.get("seq_length"),
    )
    history_file = out / "history.json"
    history = json.loads(history_file.read_text()) if history_file.exists() else None
    old = out / "metrics.json"
    if old.exists():
        previous = json.loads(old.read_text())
        for k in ("training_seconds", "epochs", "final_loss", "final_val_loss"):
            if k in previous:
                metrics[k] = previous[k]
    _write_json(out / "metrics.json", metrics)
    if history is not None:
        _report(out / "report.png", run=run, history=history, metrics=metrics,
                rollout=rollout, reference=reference, series=series)
    print(_summary(metrics, title=f"{metrics['model']} on {metrics['system']} ({out})"))
    return 0


def _check_cmd(args) -> int:
    import jax
    import jax.numpy as jnp

    from .geometry import symplecticity_residual, volume_residual
    from .rollout import ROLLOUT_MIDPOINT_ITERATIONS, _midpoint_step, _model_kind

    out, model, run = _load_run(args.dir)
    kind = _model_kind(model)
    d = model.dim
    key = jax.random.PRNGKey(0)
    if kind == "transformer":
        T = model.seq_length or (run or {}).get("seq_length") or DEFAULT_SEQ_LENGTH
        shape = (T, d)
        fmap = model
    elif kind == "hamiltonian":
        shape = (d,)
        dt = 0.1
        fmap = lambda z: _midpoint_step(model, z, dt, ROLLOUT_MIDPOINT_ITERATIONS)  # noqa: E731
    else:
        shape = (d,)
        fmap = model
    points = jax.random.normal(key, (args.points, *shape), dtype=jnp.float64)
    structure = type(model).structure
    checks = []
    if d % 2 == 0:
        checks.append(("symplecticity", symplecticity_residual, structure == "symplectic"))
    checks.append(("volume", volume_residual, structure in ("symplectic", "volume")))
    print(f"{type(model).__name__} ({out}): claims structure {structure!r}; residuals in "
          f"float64 at {args.points} random points")
    ok = True
    for name, fn, claimed in checks:
        res = jax.jit(lambda z, fn=fn: fn(fmap, z))
        r = max(float(res(z)) for z in points)
        if claimed:
            passed = r <= CHECK_TOLERANCE
            ok &= passed
            verdict = f"{'PASS' if passed else 'FAIL'} (≤ {CHECK_TOLERANCE:g})"
        else:
            verdict = "not claimed"
        print(f"  {name:<14} {r:.3e}   {verdict}")
    if kind == "hamiltonian":
        print("  (a Hamiltonian network is checked through one implicit-midpoint step, "
              f"dt={dt}, solved by {ROLLOUT_MIDPOINT_ITERATIONS} fixed-point iterations)")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def _list_cmd(args) -> int:
    systems = _systems()
    print("systems:")
    for name, cls in systems.items():
        s = cls()
        inv = ", ".join(s.invariants)
        kind = "canonical" if s.canonical else "non-canonical, volume-preserving"
        print(f"  {name:<22} dim {s.dim}  {kind}; invariants: {inv}")
    print("models:")
    for name in MODELS:
        cls = _model_class(name)
        fits = [s for s, c in systems.items() if _incompatibility(name, c()) is None]
        print(
            f"  {name:<31} {cls.__name__:<28} {_kind(cls):<12} preserves: "
            f"{cls.structure:<10}  systems: {', '.join(fits)}"
        )
    return 0


# --------------------------------------------------------------------- entry point


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="geomlearn",
        description="Train, evaluate and check structure-preserving neural integrators.",
    )
    sub = p.add_subparsers(dest="command", metavar="{train,evaluate,check,list}")
    t = sub.add_parser("train", help="train a model on a system's data, evaluate it, write a report")
    t.add_argument("--system", default="pendulum", help="system name (see `geomlearn list`); default pendulum")
    t.add_argument("--model", default="gsympnet", help="model name (see `geomlearn list`); default gsympnet")
    t.add_argument("--epochs", type=int, default=None, help="training epochs (default: by model and data size)")
    t.add_argument("--batch-size", type=int, default=None, help="minibatch size (default: all samples up to 512, else 256)")
    t.add_argument("--seq-length", type=int, default=None, help=f"transformers: window length T (default {DEFAULT_SEQ_LENGTH})")
    t.add_argument("--prediction-window", type=int, default=None, help=f"transformers: rows predicted per window, 1..T (default {DEFAULT_PREDICTION_WINDOW})")
    t.add_argument("--positional-encoding", action="store_true", help="transformers: add the sinusoidal positional encoding")
    t.add_argument("--n-trajectories", type=int, default=None, help="use this many trajectories of the data set (rigid body default 64)")
    t.add_argument("--x64", action="store_true", help="compute in float64 (JAX's 64-bit mode, this process only)")
    t.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    t.add_argument("--out", default=None, help="output folder (default runs/<system>-<model>-<time>)")
    e = sub.add_parser("evaluate", help="evaluate a trained model again and rewrite metrics.json")
    e.add_argument("dir", help="a folder written by geomlearn train")
    c = sub.add_parser("check", help="structure residuals of a saved model, pass/fail")
    c.add_argument("dir", help="a folder written by geomlearn train, or a model file")
    c.add_argument("--points", type=int, default=16, help="random sample points (default 16)")
    sub.add_parser("list", help="systems and models, and which structure each preserves")
    return p


@contextlib.contextmanager
def _x64(enabled: bool):
    """Turn on JAX's 64-bit mode for the duration of a command (restored afterwards)."""
    import jax

    before = jax.config.jax_enable_x64
    if enabled and not before:
        jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        if jax.config.jax_enable_x64 != before:
            jax.config.update("jax_enable_x64", before)


def main(argv: list[str] | None = None) -> int:
    """Run the `geomlearn` command with `argv` (default `sys.argv[1:]`); returns the exit status."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, or an argparse usage error (already printed)
        return int(e.code or 0)
    if args.command is None:
        parser.print_help()
        return 2
    handlers = {"train": _train, "evaluate": _evaluate_cmd, "check": _check_cmd, "list": _list_cmd}
    x64 = bool(getattr(args, "x64", False)) or args.command == "check"
    try:
        with _x64(x64):
            return handlers[args.command](args)
    except CLIError as e:
        print(f"geomlearn: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("geomlearn: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
