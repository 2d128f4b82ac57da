"""Positional encoding: does it earn its place? One run, side by side, at equal budget.

Each transformer integrator is trained with `positional_encoding=False` and with
`positional_encoding=True` (each family's zero-initialised position signal: its
`default_placement`) — and, for the
symplectic and volume-preserving transformers on the order-dependent problems, with the other
placements (`"input"`, `"scaled"`, `"conjugate"`) — with the same data, seeds, epochs,
batch size and optimiser (`fit`'s default Adam, 1e-2 → 1e-6), and compared by the
median over seeds of the final training loss and validation loss (relative loss,
`fit`'s definition) on held-out trajectories.

Problems (every window length `T`, prediction window `pw = T`):

| problem | data | order matters? | models |
|---|---|---|---|
| driven pendulum | `datasets.parametric_pendulum` (T = 4, one window per drive period, 64 train / 16 validation trajectories, 6 periods, in aligned segments) | yes: row `i` is drive phase `2πi/T` | SymplecticTransformer, Transformer, LinearSymplecticTransformer |
| driven pendulum (as a volume-preserving problem: a 2-d area-preserving flow) | as above | yes | VolumePreservingTransformer |
| pulsating rigid body | `datasets.forced_rigid_body` with `ForcedRigidBody(Omega=4)` (T = 4, aligned as above) | yes | VolumePreservingTransformer |
| rigid body | the paper's rigid body (`RECIPES["rigid_body"]`-style: 16 training / 4 validation trajectories of the 1238, T = 3) | no (Markov) | VolumePreservingTransformer |
| coupled oscillator | `datasets.coupled_oscillator_lst` (T = 4; validation: 5 new initial conditions) | no (Markov) | LinearSymplecticTransformer, SymplecticTransformer, Transformer |

Goals (issue 14): on the order-dependent problems the encoding improves the validation
error of SymplecticTransformer, VolumePreservingTransformer and Transformer by ≥ 2×; on
the Markov problems, and for the linear symplectic transformer (which already indexes
positions), it costs ≤ 1.5× in training and validation loss.
"""

from __future__ import annotations

import statistics
import time

from . import _common as C

NAME = "positional_encoding"
DESCRIPTION = ("positional encoding placements: order-dependent (driven pendulum, "
               "pulsating rigid body) vs Markov problems, equal budget, median of seeds")

FULL = {"seeds": 3, "placement_seeds": 1, "scale": 1.0}
QUICK = {"seeds": 1, "placement_seeds": 1, "scale": 0.001}

#: name → (problem, model, epochs, batch size, with the other placements)
CASES = (
    ("pendulum ST", "pendulum", "ST", 4000, 64, True),
    ("pendulum TF", "pendulum", "TF", 4000, 64, False),
    ("pendulum LST", "pendulum", "LST", 4000, 64, False),
    ("pendulum VPT", "pendulum", "VPT", 4000, 64, True),
    ("pulsating body VPT", "pulsating", "VPT", 3000, 64, False),
    ("rigid body VPT", "rigid", "VPT", 600, 256, False),
    ("oscillator LST", "oscillator", "LST", 800, 256, False),
    ("oscillator ST", "oscillator", "ST", 800, 256, False),
    ("oscillator TF", "oscillator", "TF", 800, 256, False),
)
QUICK_CASES = ("pendulum ST", "pendulum VPT")
OTHER_PLACEMENTS = ("input", "scaled", "conjugate")


def add_arguments(parser) -> None:
    parser.add_argument("--seeds", type=int, default=None,
                        help="seeds per configuration (default 3)")


def _data(problem: str, quick: bool):
    """`(train, validation, T, order_dependent)` of a problem."""
    import jax
    import numpy as np

    import geomlearn as gl
    from geomlearn.datasets import (
        coupled_oscillator_lst,
        forced_rigid_body,
        parametric_pendulum,
        rigid_body_vpt_initial_conditions,
    )

    n_train, n_val = (8, 4) if quick else (64, 16)
    if problem == "pendulum":
        make = parametric_pendulum
        kw = {}
    elif problem == "pulsating":
        make = forced_rigid_body
        kw = {"system": gl.systems.ForcedRigidBody(Omega=4.0)}
    if problem in ("pendulum", "pulsating"):
        periods = 3 if quick else 6
        train = make(jax.random.PRNGKey(0), seq_length=4, n_trajectories=n_train,
                     n_periods=periods, **kw)
        val = make(jax.random.PRNGKey(1), seq_length=4, n_trajectories=n_val,
                   n_periods=periods, **kw)
        return train, val, 4, True
    if problem == "rigid":
        z0 = np.asarray(rigid_body_vpt_initial_conditions())
        idx = np.linspace(0, len(z0) - 1, 20).round().astype(int)
        steps = 20 if quick else 100
        data = gl.TrajectoryData.from_system(gl.systems.RigidBody(), z0[idx], 0.2, steps,
                                             method="implicit_midpoint")
        states = np.asarray(data.states)
        val_rows = np.arange(len(idx)) % 5 == 2  # every fifth trajectory held out
        return (gl.TrajectoryData(states[~val_rows], 0.2),
                gl.TrajectoryData(states[val_rows], 0.2), 3, False)
    if problem == "oscillator":
        train = coupled_oscillator_lst(jax.random.PRNGKey(0))
        val = coupled_oscillator_lst(jax.random.PRNGKey(1))
        if quick:
            train = gl.TrajectoryData(np.asarray(train.states)[:, :40], train.dt)
            val = gl.TrajectoryData(np.asarray(val.states)[:2, :40], val.dt)
        return train, val, 4, False
    raise ValueError(problem)


def _model(kind: str, dim: int, T: int, encoding, key):
    import geomlearn as gl

    if kind == "ST":
        return gl.SymplecticTransformer(dim, n_sympnet=2, width=8, L=2,
                                        positional_encoding=encoding, key=key)
    if kind == "LST":
        return gl.LinearSymplecticTransformer(dim, T, n_sympnet=2, width=8, L=2,
                                              positional_encoding=encoding, key=key)
    if kind == "TF":
        return gl.Transformer(dim, n_heads=1, L=2, n_blocks=1, transformer_dim=8,
                              positional_encoding=encoding, key=key)
    if kind == "VPT":
        return gl.VolumePreservingTransformer(dim, n_blocks=2, L=2,
                                              positional_encoding=encoding, key=key)
    raise ValueError(kind)


def _train(kind, encoding, seed, train, val, T, epochs, batch):
    import jax

    import geomlearn as gl

    model = _model(kind, train.dim, T, encoding, jax.random.PRNGKey(seed))
    n_samples = train.windows(T, T)[0].shape[0]
    t0 = time.perf_counter()
    _, history = gl.fit(
        model, train, epochs=epochs, batch_size=min(batch, n_samples), seq_length=T,
        prediction_window=T, val_data=val, key=jax.random.PRNGKey(1000 + seed),
        progress=False,
    )
    return {"loss": history["loss"][-1], "val_loss": history["val_loss"][-1],
            "train_s": time.perf_counter() - t0, "n_samples": int(n_samples)}


def _median(runs, key):
    return statistics.median(r[key] for r in runs)


def run(*, quick: bool = False, out=None, seeds: int | None = None) -> dict:
    C.require_x64()
    started = time.perf_counter()
    cfg = dict(QUICK if quick else FULL)
    if seeds is not None:
        cfg["seeds"] = seeds
    cases = [c for c in CASES if not quick or c[0] in QUICK_CASES]
    data_cache: dict = {}
    results: dict = {}
    rows = []
    for name, problem, kind, epochs, batch, others in cases:
        if problem not in data_cache:
            data_cache[problem] = _data(problem, quick)
        train, val, T, order = data_cache[problem]
        epochs = max(2, round(epochs * cfg["scale"]))
        encodings = [False, True] + (list(OTHER_PLACEMENTS) if others and not quick else [])
        per = {}
        for enc in encodings:
            n_seeds = cfg["seeds"] if enc in (False, True) else cfg["placement_seeds"]
            runs = [_train(kind, enc, s, train, val, T, epochs, batch) for s in range(n_seeds)]
            per[str(enc)] = {
                "runs": runs,
                "loss": _median(runs, "loss"),
                "val_loss": _median(runs, "val_loss"),
                "train_s": _median(runs, "train_s"),
                "seeds": n_seeds,
            }
            C.emit(f"{name:22s} positional_encoding={enc!s:9s} loss {per[str(enc)]['loss']:.3e}"
                   f"  val {per[str(enc)]['val_loss']:.3e}  ({per[str(enc)]['train_s']:.1f} s,"
                   f" {n_seeds} seed(s))")
        base = per["False"]
        for enc, r in per.items():
            rows.append({
                "case": name, "order": "yes" if order else "no (Markov)",
                "encoding": enc, "seeds": r["seeds"], "epochs": epochs,
                "loss": r["loss"], "val_loss": r["val_loss"],
                "val_ratio": r["val_loss"] / base["val_loss"],
                "loss_ratio": r["loss"] / base["loss"], "train_s": r["train_s"],
            })
        results[name] = {"problem": problem, "model": kind, "epochs": epochs,
                         "batch_size": batch, "T": T, "order_dependent": order,
                         "placements": per}

    targets = []
    for name, res in results.items():
        plain, enc = res["placements"]["False"], res["placements"]["True"]
        if res["order_dependent"] and res["model"] != "LST":
            gain = plain["val_loss"] / enc["val_loss"]
            targets.append(C.target(
                f"{name}: improvement", "val(False) / val(True) >= 2", gain, gain >= 2.0, "x",
                "median over seeds"))
        else:
            cost = max(enc["loss"] / plain["loss"], enc["val_loss"] / plain["val_loss"])
            targets.append(C.target(
                f"{name}: cost", "max(loss, val) ratio True / False <= 1.5", cost,
                cost <= 1.5, "x", "median over seeds"))
    targets = C.quick_targets(targets, quick)
    cols = [
        ("case", "case", ""), ("order", "order matters", ""),
        ("encoding", "positional_encoding", ""), ("seeds", "seeds", "d"),
        ("epochs", "epochs", "d"), ("loss", "train loss", ".3e"),
        ("val_loss", "val loss", ".3e"), ("val_ratio", "val / val(False)", ".2f"),
        ("loss_ratio", "loss / loss(False)", ".2f"), ("train_s", "train (s)", ".1f"),
    ]
    title = ("Positional encoding at equal budget (median over seeds; True = zero-initialised "
             "position bias)")
    payload = C.make_payload(
        NAME, quick=quick, options={"seeds": seeds},
        settings={**cfg, "cases": [c[:5] for c in cases], "dtype": "float64",
                  "optimizer": "fit default: Adam, lr 1e-2 -> 1e-6 exponential",
                  "loss": "relative", "prediction_window": "T"},
        results=results, tables=[C.table(title, cols, rows)], targets=targets,
        started=started,
        notes=["Ratios below 1 in 'val / val(False)' are improvements.",
               "'train (s)' is the median wall time of fit over the seeds; the first seed "
               "of a configuration includes compilation (a single-seed row is all compile)."],
    )
    return C.finish(out, payload)
