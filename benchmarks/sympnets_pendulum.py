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

Reported: the one-step training and test MSE (`fit`'s MSE loss on the pairs, from the
model protocol's `predict`/`target` — for the HNN its implicit-midpoint step), and
over 1000 steps from `(1, 0)` against a 6th-order reference (`yoshida6`, 10 substeps)
with `geomlearn.evaluate`: the relative trajectory error and the energy error
`max |H(ẑ_t) − H(z_0)| / |H(z_0)|`; and the training wall time.
"""

from __future__ import annotations

import time

from ._harness import Benchmark, Column, Option, Table

FULL = {"epochs": 50_000, "rollout_steps": 1000, "learning_rate": 1e-3, "dtype": "float64",
        "sizes": "paper"}
QUICK = {"epochs": 20, "rollout_steps": 50, "learning_rate": 1e-3, "dtype": "float64",
         "sizes": "tiny"}


def _models(dtype, sizes: str):
    """name → constructor(key); tiny networks for the smoke test (short compiles)."""
    import geomlearn as gl

    if sizes == "tiny":
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


def one_step_mse(model, data) -> float:
    """`fit`'s MSE loss of `model` on all the samples it takes from `data` (the model
    protocol's prediction and target, the library's loss)."""
    import equinox as eqx
    import jax

    from geomlearn.training import resolve_loss

    x, y, task = model.training_samples(data, model.task())
    loss = resolve_loss("mse")

    @eqx.filter_jit
    def mse(m, x, y):
        pred = jax.vmap(lambda s: m.predict(s, task))(x)
        target = jax.vmap(lambda s: m.target(s, task))(y)
        return loss(pred, target, None)

    return float(mse(model, x, y))


def measure(settings: dict, ctx) -> dict:
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax

    import geomlearn as gl
    from geomlearn.integrators import integrate

    dtype = settings["dtype"]
    train, test = gl.datasets.pendulum_sympnets()
    dt = float(train.dt)
    system = gl.systems.Pendulum()
    z0 = jnp.asarray(np.asarray(train.states)[0, 0], dtype=dtype)
    reference = integrate(system, z0, dt, settings["rollout_steps"], method="yoshida6",
                          substeps=10)
    horizons = sorted({min(100, settings["rollout_steps"]), settings["rollout_steps"]})
    optimizer = optax.adam(settings["learning_rate"])

    networks = {}
    for i, (name, make) in enumerate(_models(dtype, settings["sizes"]).items()):
        model = make(jax.random.PRNGKey(10 + i))
        t0 = time.perf_counter()
        trained, history = gl.fit(
            model, train, epochs=settings["epochs"], optimizer=optimizer, loss="mse",
            key=jax.random.PRNGKey(100 + i), progress=False,
        )
        train_s = time.perf_counter() - t0
        metrics = gl.evaluate(trained, system, reference, dt=dt, horizons=horizons)
        networks[name] = {
            "model": type(trained).__name__,
            "structure": trained.structure,
            "n_params": sum(a.size for a in jax.tree_util.tree_leaves(
                eqx.filter(trained, eqx.is_inexact_array))),
            "train_s": train_s,
            "final_loss": history["loss"][-1],
            "loss_curve": history["loss"][:: max(1, len(history["loss"]) // 200)],
            "mse_train": one_step_mse(trained, train),
            "mse_test": one_step_mse(trained, test),
            "metrics": dict(metrics),
        }
    return {"networks": networks, "dt": dt}


def _rows(settings, results):
    n = str(settings["rollout_steps"])
    return [
        {
            "name": name,
            "structure": net["structure"],
            "n_params": net["n_params"],
            "mse_train": net["mse_train"],
            "mse_test": net["mse_test"],
            "err": net["metrics"]["trajectory_error"][n],
            "energy": net["metrics"]["invariant_drift"]["energy"],
            "train_s": net["train_s"],
            "epochs_per_s": settings["epochs"] / net["train_s"],
        }
        for name, net in results["networks"].items()
    ]


SPEC = Benchmark(
    name="sympnets_pendulum",
    description="SympNets pendulum: GSympNet, LASympNet, HenonNet, HNN, ResNet",
    full=FULL,
    quick=QUICK,
    measure=measure,
    tables=(
        Table("SympNets pendulum, {epochs} epochs full batch, Adam {learning_rate:g}, MSE", (
            Column("name", "network"),
            Column("structure", "structure"),
            Column("n_params", "params", "d"),
            Column("mse_train", "train MSE", ".2e"),
            Column("mse_test", "test MSE", ".2e"),
            Column("err", "rel. error {rollout_steps} steps", ".2e"),
            Column("energy", "energy error {rollout_steps} steps", ".2e"),
            Column("train_s", "train (s)", ".1f"),
            Column("epochs_per_s", "epochs/s", ",.0f"),
        ), rows=_rows),
    ),
    notes=lambda settings, results: [
        "one-step MSE: fit's MSE loss (the model protocol's prediction) on the 40 training "
        "and 100 test pairs; rollout against integrate(..., method='yoshida6', substeps=10)"],
    options=(Option("--epochs", int, "training epochs = Adam iterations (default 50000)"),),
)
NAME, DESCRIPTION = SPEC.name, SPEC.description
add_arguments, run = SPEC.add_arguments, SPEC.run
