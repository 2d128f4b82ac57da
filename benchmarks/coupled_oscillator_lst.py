"""Coupled harmonic oscillator: the linear symplectic transformer tutorial of
GeometricMachineLearning.jl, reproduced with `geomlearn.fit` and `geomlearn.evaluate`.

Data: `datasets.coupled_oscillator_lst(key)` (5 random initial conditions in `[0, 1)⁴`,
`dt = 0.3`, `t ∈ [0, 100]`, implicit midpoint). As in the tutorial: `seq_length = 4`,
prediction window 4, batch size 1024, 2000 epochs, Adam with an exponential learning-rate
decay (`fit`'s default optimiser, 1e-2 → 1e-6 over the planned training), relative loss.

| name | model | parameters |
|---|---|---|
| LST | `LinearSymplecticTransformer(4, 4, n_sympnet=2, width=4, L=1)` | 84 |
| SymT | `SymplecticTransformer(4, n_sympnet=2, width=4, L=1)` | (reported) |
| ST | `Transformer(4, n_heads=2, L=1, n_blocks=2)` | 108 |
| GSympNet | `GSympNet(4, n_layers=4, width=4)` (one-step pairs) | 64 |

Validation on 5 *new* random initial conditions from the same distribution (an unseen
key), against implicit midpoint: the relative trajectory error over the first 30 and the
first 300 steps (`geomlearn.evaluate`'s definition: Frobenius norm over all states up to
that step, relative), and the energy drift over 300 steps,
`max |H(ẑ_t) − H(z_0)| / max |H(z_0)|`. The transformers start from the first 4
reference states, the SympNet from the first one.
"""

from __future__ import annotations

import time

from . import _common as C

NAME = "coupled_oscillator_lst"
DESCRIPTION = "coupled oscillator: LST, symplectic transformer, standard transformer, GSympNet"

FULL = {"epochs": 2000, "batch_size": 1024, "val_steps": 300, "short": 30, "n_val": 5}
QUICK = {"epochs": 5, "batch_size": 256, "val_steps": 40, "short": 10, "n_val": 2}
SEQ = 4
NETWORK_NAMES = ("LST", "SymT", "ST", "GSympNet")


def add_arguments(parser) -> None:
    parser.add_argument("--epochs", type=int, default=None, help="training epochs (default 2000)")
    parser.add_argument("--seed", type=int, default=None, help="data seed (default 0)")


def _models(dtype, quick: bool = False):
    """name → (constructor(key), is_transformer); tiny networks in quick mode."""
    import geomlearn as gl

    if quick:
        return {
            "LST": (lambda k: gl.LinearSymplecticTransformer(4, SEQ, n_sympnet=1, width=2, L=1, key=k, dtype=dtype), True),
            "SymT": (lambda k: gl.SymplecticTransformer(4, n_sympnet=1, width=2, L=1, key=k, dtype=dtype), True),
            "ST": (lambda k: gl.Transformer(4, n_heads=1, L=1, n_blocks=1, key=k, dtype=dtype), True),
            "GSympNet": (lambda k: gl.GSympNet(4, n_layers=2, width=2, key=k, dtype=dtype), False),
        }
    return {
        "LST": (lambda k: gl.LinearSymplecticTransformer(4, SEQ, n_sympnet=2, width=4, L=1, key=k, dtype=dtype), True),
        "SymT": (lambda k: gl.SymplecticTransformer(4, n_sympnet=2, width=4, L=1, key=k, dtype=dtype), True),
        "ST": (lambda k: gl.Transformer(4, n_heads=2, L=1, n_blocks=2, key=k, dtype=dtype), True),
        "GSympNet": (lambda k: gl.GSympNet(4, n_layers=4, width=4, key=k, dtype=dtype), False),
    }


def run(*, quick: bool = False, out=None, epochs: int | None = None, seed: int | None = None) -> dict:
    import jax
    import numpy as np

    import geomlearn as gl
    from geomlearn.integrators import integrate

    C.require_x64()
    started = time.perf_counter()
    options = {"epochs": epochs, "seed": seed}
    cfg = dict(QUICK if quick else FULL)
    if epochs is not None:
        cfg["epochs"] = epochs
    seed = 0 if seed is None else seed
    dtype = "float64"

    data_key, val_key = jax.random.split(jax.random.PRNGKey(seed))
    data = gl.datasets.coupled_oscillator_lst(data_key)
    if quick:
        data = gl.TrajectoryData(np.asarray(data.states)[:, :120], data.dt)
    system = gl.systems.CoupledHarmonicOscillator()
    z0 = jax.random.uniform(val_key, (cfg["n_val"], 4), dtype=dtype)
    reference = integrate(system, z0, float(data.dt), cfg["val_steps"], method="implicit_midpoint")
    horizons = [cfg["short"], cfg["val_steps"]]

    rows, details = [], {}
    for i, (name, (make, is_transformer)) in enumerate(_models(dtype, quick).items()):
        model = make(jax.random.PRNGKey(10 + i))
        n_params = sum(a.size for a in jax.tree_util.tree_leaves(model) if hasattr(a, "size"))
        kwargs = {"seq_length": SEQ, "prediction_window": SEQ} if is_transformer else {}
        n_samples = (data.windows(SEQ, SEQ)[0] if is_transformer else data.pairs()[0]).shape[0]
        batch = min(cfg["batch_size"], n_samples)
        t0 = time.perf_counter()
        trained, history = gl.fit(
            model, data, epochs=cfg["epochs"], batch_size=batch, loss="relative",
            key=jax.random.PRNGKey(100 + i), progress=False, **kwargs,
        )
        train_s = time.perf_counter() - t0
        metrics = gl.evaluate(trained, system, reference, dt=float(data.dt), horizons=horizons,
                              **kwargs)
        details[name] = {
            "model": type(trained).__name__,
            "n_params": int(n_params),
            "train_s": train_s,
            "final_loss": history["loss"][-1],
            "loss_curve": history["loss"][:: max(1, len(history["loss"]) // 200)],
            "batch_size": batch,
            "n_samples": int(n_samples),
            "metrics": metrics,
        }
        err = metrics["trajectory_error"]
        rows.append(
            {
                "name": name,
                "model": type(trained).__name__,
                "n_params": int(n_params),
                "loss": history["loss"][-1],
                "train_s": train_s,
                "err_short": err[str(cfg["short"])],
                "err_long": err[str(cfg["val_steps"])],
                "energy_drift": metrics["invariant_drift"]["energy"],
                "symplecticity": metrics["structure_residual"].get("symplecticity"),
            }
        )
    cols = [
        ("name", "network", ""),
        ("model", "class", ""),
        ("n_params", "params", "d"),
        ("loss", "final train loss", ".3e"),
        ("train_s", "train (s)", ".1f"),
        ("err_short", f"rel. error {cfg['short']} steps", ".3e"),
        ("err_long", f"rel. error {cfg['val_steps']} steps", ".3e"),
        ("energy_drift", "energy drift", ".2e"),
        ("symplecticity", "symplecticity residual", ".1e"),
    ]
    title = (
        f"Coupled oscillator, T=pw={SEQ}, {cfg['epochs']} epochs, batch {cfg['batch_size']}; "
        f"validation on {cfg['n_val']} unseen initial conditions"
    )
    payload = C.make_payload(
        NAME, quick=quick, options=options,
        settings={**cfg, "seq_length": SEQ, "prediction_window": SEQ, "seed": seed,
                  "dtype": dtype, "optimizer": "fit default: Adam, lr 1e-2 -> 1e-6 exponential",
                  "loss": "relative"},
        results={"networks": details}, tables=[C.table(title, cols, rows)], targets=[],
        started=started,
    )
    return C.finish(out, payload)
