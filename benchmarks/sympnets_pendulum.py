"""SympNets pendulum: the experiment of Jin et al. (2020) with five networks.

Data: `datasets.pendulum_sympnets()` — the pendulum `H = p²/2 − cos q` from
`(q, p) = (1, 0)`, `h = 0.1`, 40 training pairs and 100 test pairs. Every network is
trained with `geomlearn.fit` on the full batch, Adam with the paper's fixed learning rate
1e-3, MSE loss (the paper's), for the same number of epochs (= iterations). The SympNets
use the paper's sigmoid activation; the other networks tanh.

| name | model | parameters |
|---|---|---|
| G-SympNet | `GSympNet(2, n_layers=5, width=30, activation="sigmoid")` | 450 |
| LA-SympNet | `LASympNet(2, n_layers=3, n_linear=2, activation="sigmoid")` (3 layers × 2 sublayers) | 14 |
| HenonNet | `HenonNet(2, n_layers=5, width=30)` | 455 |
| HNN | `HamiltonianNeuralNetwork(2, width=20, depth=2)` (trained through one implicit-midpoint step of its field) | 501 |
| ResNet | `ResNet(2, width=30, depth=3)` (not symplectic) | 450 |

Reported: the one-step training and test MSE (`iterate(model, x, 2)` on the pairs), and
over 1000 steps from `(1, 0)` against a 6th-order reference (`yoshida6`, 10 substeps)
with `geomlearn.evaluate`: the relative trajectory error and the energy error
`max |H(ẑ_t) − H(z_0)| / |H(z_0)|`; and the training wall time.
"""

from __future__ import annotations

import time

from . import _common as C

NAME = "sympnets_pendulum"
DESCRIPTION = "SympNets pendulum: GSympNet, LASympNet, HenonNet, HNN, ResNet"

FULL = {"epochs": 50_000, "rollout_steps": 1000}
QUICK = {"epochs": 20, "rollout_steps": 50}
LEARNING_RATE = 1e-3


def add_arguments(parser) -> None:
    parser.add_argument(
        "--epochs", type=int, default=None, help="training epochs = Adam iterations (default 50000)"
    )


def _models(dtype, quick: bool = False):
    """name → constructor(key); tiny networks in quick mode (a smoke test: short compiles)."""
    import geomlearn as gl

    if quick:
        return {
            "G-SympNet": lambda k: gl.GSympNet(2, n_layers=2, width=4, activation="sigmoid", key=k, dtype=dtype),
            "LA-SympNet": lambda k: gl.LASympNet(2, n_layers=2, n_linear=1, activation="sigmoid", key=k, dtype=dtype),
            "HenonNet": lambda k: gl.HenonNet(2, n_layers=1, width=4, key=k, dtype=dtype),
            "HNN": lambda k: gl.HamiltonianNeuralNetwork(2, width=4, depth=1, key=k, dtype=dtype),
            "ResNet": lambda k: gl.ResNet(2, width=4, depth=1, key=k, dtype=dtype),
        }
    return {
        "G-SympNet": lambda k: gl.GSympNet(2, n_layers=5, width=30, activation="sigmoid", key=k, dtype=dtype),
        "LA-SympNet": lambda k: gl.LASympNet(2, n_layers=3, n_linear=2, activation="sigmoid", key=k, dtype=dtype),
        "HenonNet": lambda k: gl.HenonNet(2, n_layers=5, width=30, key=k, dtype=dtype),
        "HNN": lambda k: gl.HamiltonianNeuralNetwork(2, width=20, depth=2, key=k, dtype=dtype),
        "ResNet": lambda k: gl.ResNet(2, width=30, depth=3, key=k, dtype=dtype),
    }


def run(*, quick: bool = False, out=None, epochs: int | None = None) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax

    import geomlearn as gl
    from geomlearn.integrators import integrate

    C.require_x64()
    started = time.perf_counter()
    options = {"epochs": epochs}
    cfg = dict(QUICK if quick else FULL)
    if epochs is not None:
        cfg["epochs"] = epochs
    dtype = "float64"

    train, test = gl.datasets.pendulum_sympnets()
    dt = float(train.dt)
    x_train, y_train = (jnp.asarray(np.asarray(a), dtype=dtype) for a in train.pairs())
    x_test, y_test = (jnp.asarray(np.asarray(a), dtype=dtype) for a in test.pairs())
    system = gl.systems.Pendulum()
    z0 = jnp.asarray(np.asarray(train.states)[0, 0], dtype=dtype)
    reference = integrate(system, z0, dt, cfg["rollout_steps"], method="yoshida6", substeps=10)
    horizons = sorted({min(100, cfg["rollout_steps"]), cfg["rollout_steps"]})

    rows, details = [], {}
    for i, (name, make) in enumerate(_models(dtype, quick).items()):
        model = make(jax.random.PRNGKey(10 + i))
        n_params = sum(a.size for a in jax.tree_util.tree_leaves(model) if hasattr(a, "size"))
        is_hnn = isinstance(model, gl.HamiltonianNeuralNetwork)
        t0 = time.perf_counter()
        trained, history = gl.fit(
            model, train, epochs=cfg["epochs"], optimizer=optax.adam(LEARNING_RATE),
            loss="mse", key=jax.random.PRNGKey(100 + i), progress=False,
        )
        train_s = time.perf_counter() - t0
        step_kw = {"dt": dt} if is_hnn else {}

        # one-step predictions of the training and test inputs in one rollout call
        pred = gl.iterate(trained, jnp.concatenate([x_train, x_test]), 2, **step_kw)[:, 1]
        err = jnp.square(pred - jnp.concatenate([y_train, y_test]))
        n_train = x_train.shape[0]
        mse_train = float(jnp.mean(err[:n_train]))
        mse_test = float(jnp.mean(err[n_train:]))
        metrics = gl.evaluate(trained, system, reference, dt=dt, horizons=horizons)
        details[name] = {
            "model": type(trained).__name__,
            "n_params": int(n_params),
            "train_s": train_s,
            "final_loss": history["loss"][-1],
            "loss_curve": history["loss"][:: max(1, len(history["loss"]) // 200)],
            "mse_train": mse_train,
            "mse_test": mse_test,
            "metrics": metrics,
        }
        rows.append(
            {
                "name": name,
                "structure": type(trained).structure,
                "n_params": int(n_params),
                "mse_train": mse_train,
                "mse_test": mse_test,
                "err": metrics["trajectory_error"][str(cfg["rollout_steps"])],
                "energy": metrics["invariant_drift"]["energy"],
                "train_s": train_s,
                "epochs_per_s": cfg["epochs"] / train_s,
            }
        )
    n = cfg["rollout_steps"]
    cols = [
        ("name", "network", ""),
        ("structure", "structure", ""),
        ("n_params", "params", "d"),
        ("mse_train", "train MSE", ".2e"),
        ("mse_test", "test MSE", ".2e"),
        ("err", f"rel. error {n} steps", ".2e"),
        ("energy", f"energy error {n} steps", ".2e"),
        ("train_s", "train (s)", ".1f"),
        ("epochs_per_s", "epochs/s", ",.0f"),
    ]
    title = f"SympNets pendulum, {cfg['epochs']} epochs full batch, Adam {LEARNING_RATE:g}, MSE"
    payload = C.make_payload(
        NAME, quick=quick, options=options,
        settings={**cfg, "dtype": dtype, "learning_rate": LEARNING_RATE, "loss": "mse",
                  "batch": "full (40 pairs)", "dt": dt,
                  "reference": "integrate(..., method='yoshida6', substeps=10)"},
        results={"networks": details}, tables=[C.table(title, cols, rows)], targets=[],
        started=started,
    )
    return C.finish(out, payload)
