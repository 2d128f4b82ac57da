"""Dissipation and forcing: conformally symplectic and port-Hamiltonian networks.

Two experiments, float64, every network trained with `geomlearn.fit`:

1. **Damped pendulum** (`DampedPendulum(gamma=0.1)`, data at `h = 0.1`): training
   trajectories from `datasets.damped_pendulum` (q₀ ∈ [-2, 2], p₀ ∈ [-1, 1]);
   `ConformalSympNet(2, n_layers=4, width=16, dt=0.1)` (learned γ), a plain
   `GSympNet(2, n_layers=4, width=16)`, an unconstrained `ResNet(2, width=16,
   depth=2)` and a larger one (`width=32, depth=3`), each trained the same way
   (Levenberg–Marquardt, the same 1000 epochs: the conformal network's loss still
   fell 150× between epoch 150 and 1000). Reported:
   the learned γ and its relative error, and the relative error of a 1000-step rollout
   (t ∈ [0, 100]) from held-out initial states against a Gauss–Legendre reference.
   Goals: γ within 2 %; the conformal network's rollout error ≥ 10× below every other.
2. **Forced Duffing oscillator** (Desai et al., Phys. Rev. E 104, 034312, 2021:
   α = -1, β = 1, δ = 0.3, γ = 0.2, ω = 1.2; 10 training trajectories from
   U(-2.5, 2.5)², t ∈ [0, 10], h = 0.01): `PortHamiltonianNN(3, width=16, depth=2,
   forcing="time")`, Adam then Levenberg–Marquardt. Reported: the spectrum of the
   learned R against (0, δ), the learned forcing amplitude (the least-squares fit
   f_θ(t) ≈ a sin(ωt) + c over the training times; a constant force is a linear term of
   the energy and not identifiable) against γ, the largest discrete energy-balance residual along the rollouts, and the
   trajectory error over t ∈ [0, 10] from 5 held-out initial states (relative, and as the
   mean squared state error, the metric of Desai et al.'s figures). Goals: damping and
   amplitude within 5 %.

`python -m benchmarks.dissipation --side-by-side PATH` writes experiment 1's
damped-pendulum arrays to PATH and trains geomlearn's side of the comparison with
`phlearn` on them (`side_by_side`; the peer is `benchmarks/phlearn_peer.py`).
"""

from __future__ import annotations

import os
import time

from . import _common as C
from ._harness import Benchmark, Column, Option, Table

FULL = {"pendulum_trajectories": 16, "pendulum_steps": 100, "pendulum_epochs": 1000,
        "rollout_steps": 1000, "duffing_trajectories": 10, "duffing_steps": 1000,
        "adam_epochs": 60, "duffing_lm_epochs": 160, "duffing_batch": 1000, "test_trajectories": 5}
QUICK = {"pendulum_trajectories": 2, "pendulum_steps": 10, "pendulum_epochs": 2,
         "rollout_steps": 20, "duffing_trajectories": 2, "duffing_steps": 20,
         "adam_epochs": 1, "duffing_lm_epochs": 1, "duffing_batch": 20, "test_trajectories": 1}


def _rel(a, b) -> float:
    import numpy as np

    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _pendulum_data(settings):
    """The damped pendulum, its training and its held-out test trajectories (float64)."""
    import jax
    import jax.numpy as jnp

    import geomlearn as gl

    system = gl.systems.DampedPendulum(gamma=0.1)
    data = gl.datasets.damped_pendulum(jax.random.PRNGKey(0), n_trajectories=settings["pendulum_trajectories"],
                                       n_steps=settings["pendulum_steps"], dtype=jnp.float64)
    test = gl.datasets.damped_pendulum(jax.random.PRNGKey(1), n_trajectories=settings["test_trajectories"],
                                       n_steps=settings["rollout_steps"], dtype=jnp.float64)
    return system, data, test


def _pendulum(settings, ctx):
    import jax
    import jax.numpy as jnp

    import geomlearn as gl

    system, data, test = _pendulum_data(settings)
    k = jax.random.PRNGKey(2)
    models = {
        "ConformalSympNet": gl.ConformalSympNet(2, n_layers=4, width=16, dt=0.1, key=k, dtype=jnp.float64),
        "GSympNet": gl.GSympNet(2, n_layers=4, width=16, key=k, dtype=jnp.float64),
        "ResNet (MLP)": gl.ResNet(2, width=16, depth=2, key=k, dtype=jnp.float64),
        "ResNet (MLP, 32 × 3)": gl.ResNet(2, width=32, depth=3, key=k, dtype=jnp.float64),
    }
    rows = []
    for name, model in models.items():
        ctx.log(f"damped pendulum: {name} …")
        started = time.perf_counter()
        model, history = gl.fit(model, data, optimizer=gl.LevenbergMarquardt(),
                                epochs=settings["pendulum_epochs"], key=jax.random.PRNGKey(3), progress=False)
        train_s = time.perf_counter() - started
        rollout = gl.iterate(model, test.states[:, 0], settings["rollout_steps"] + 1)
        row = {"name": name, "final_loss": history["loss"][-1], "train_s": train_s,
               "err": _rel(rollout, test.states)}
        if name == "ConformalSympNet":
            gamma = float(model.damping_rate())
            row.update(gamma=gamma, gamma_error=abs(gamma - system.gamma) / system.gamma)
        rows.append(row)
    return rows


def _amplitude(model, system, t_max, n=2000):
    """The learned force's amplitude: the least-squares fit `f_θ(t) ≈ a sin(ωt) + c` over
    `t ∈ [0, t_max]` (a constant force is a linear term of the energy, ṗ = −∂q(H − cq),
    so `c` is not identifiable), and the relative L² error of `f_θ − c` against the true
    force."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    t = jnp.linspace(0.0, t_max, n)
    x = jnp.zeros(2)
    learned = np.asarray(jax.vmap(lambda s: model.force(x, s)[1])(t))
    true = np.asarray(jax.vmap(lambda s: system.force(s)[1])(t))
    basis = np.stack([np.sin(system.omega * np.asarray(t)), np.ones(n)], axis=1)
    (a, c), *_ = np.linalg.lstsq(basis, learned, rcond=None)
    return float(a), float(np.linalg.norm(learned - c - true) / np.linalg.norm(true))


def _duffing(settings, ctx):
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax

    import geomlearn as gl

    system = gl.systems.Duffing()
    data = gl.datasets.duffing(jax.random.PRNGKey(4), n_trajectories=settings["duffing_trajectories"],
                               n_steps=settings["duffing_steps"], dtype=jnp.float64)
    test = gl.datasets.duffing(jax.random.PRNGKey(5), n_trajectories=settings["test_trajectories"],
                               n_steps=settings["duffing_steps"], dtype=jnp.float64)
    model = gl.PortHamiltonianNN(3, width=16, depth=2, forcing="time", key=jax.random.PRNGKey(6),
                                 dtype=jnp.float64)
    ctx.log("forced Duffing: Adam …")
    started = time.perf_counter()
    model, first = gl.fit(model, data, optimizer=optax.adam(1e-3), epochs=settings["adam_epochs"],
                          batch_size=settings["duffing_batch"], key=jax.random.PRNGKey(7), progress=False)
    ctx.log("forced Duffing: Levenberg–Marquardt …")
    model, history = gl.fit(model, data, optimizer=gl.LevenbergMarquardt(),
                            epochs=settings["duffing_lm_epochs"], batch_size=settings["duffing_batch"],
                            key=jax.random.PRNGKey(7), progress=False)
    train_s = time.perf_counter() - started
    spectrum = model.dissipation_spectrum()
    amplitude, force_error = _amplitude(model, system, data.dt * settings["duffing_steps"])
    rollout = gl.iterate(model, test.states[:, 0], settings["duffing_steps"] + 1, dt=data.dt)
    x, y, t = rollout[:, :-1, :2], rollout[:, 1:, :2], rollout[:, :-1, 2]
    balance = jax.vmap(jax.vmap(lambda a, b, s: model.energy_balance_residual(a, b, data.dt, s)))(x, y, t)
    return [{"name": "PortHamiltonianNN", "final_loss": history["loss"][-1], "adam_loss": first["loss"][-1],
             "r_small": float(spectrum[0]), "r_large": float(spectrum[-1]),
             "delta_error": abs(float(spectrum[-1]) - system.delta) / system.delta,
             "amplitude": amplitude, "amplitude_error": abs(amplitude - system.gamma) / system.gamma,
             "force_error": force_error, "balance": float(np.max(np.asarray(balance))),
             "err": _rel(rollout[..., :2], test.states[..., :2]), "train_s": train_s,
             # Desai et al.'s metric: the mean squared state error over the rollouts
             "state_mse": float(np.mean((np.asarray(rollout[..., :2]) - np.asarray(test.states[..., :2])) ** 2))}]


def measure(settings: dict, ctx) -> dict:
    C.require_x64()
    return {"pendulum": _pendulum(settings, ctx), "duffing": _duffing(settings, ctx)}


def _targets(settings, results):
    rows = {r["name"]: r for r in results["pendulum"]}
    conf = rows["ConformalSympNet"]
    ratio = min(r["err"] for name, r in rows.items() if name != "ConformalSympNet") / conf["err"]
    duff = results["duffing"][0]
    return [
        C.target("damped pendulum: learned γ", "within 2 %", conf["gamma_error"], conf["gamma_error"] <= 0.02),
        C.target("damped pendulum: rollout error ratio (best other / conformal)", "≥ 10", ratio, ratio >= 10),
        C.target("Duffing: damping δ from the spectrum of R", "within 5 %", duff["delta_error"],
                 duff["delta_error"] <= 0.05),
        C.target("Duffing: forcing amplitude", "within 5 %", duff["amplitude_error"], duff["amplitude_error"] <= 0.05),
    ]


SPEC = Benchmark(
    name="dissipation",
    description="damped pendulum: ConformalSympNet vs GSympNet vs ResNet (γ recovery, "
    "1000-step rollout); forced Duffing: PortHamiltonianNN (damping, forcing amplitude)",
    full=FULL,
    quick=QUICK,
    measure=measure,
    tables=(
        Table("Damped pendulum (γ = 0.1, h = 0.1), {pendulum_trajectories} trajectories of "
              "{pendulum_steps} steps, {pendulum_epochs} LM epochs, {rollout_steps}-step rollout", (
            Column("name", "network"),
            Column("final_loss", "train loss", ".2e"),
            Column("gamma", "learned γ", ".5f"),
            Column("gamma_error", "γ rel. error", ".2%"),
            Column("err", "rollout rel. error", ".2e"),
            Column("train_s", "train (s)", ".1f"),
        ), rows="pendulum"),
        Table("Forced Duffing (Desai et al. 2021), {duffing_trajectories} trajectories, "
              "{adam_epochs} Adam + {duffing_lm_epochs} LM epochs", (
            Column("name", "network"),
            Column("final_loss", "train loss", ".2e"),
            Column("r_small", "R eigenvalue 1 (true 0)", ".4f"),
            Column("r_large", "R eigenvalue 2 (true 0.3)", ".4f"),
            Column("delta_error", "δ rel. error", ".2%"),
            Column("amplitude", "forcing amplitude (true 0.2)", ".4f"),
            Column("amplitude_error", "amplitude rel. error", ".2%"),
            Column("balance", "max energy-balance residual", ".1e"),
            Column("err", "rel. error t ≤ 10", ".2e"),
            Column("state_mse", "state MSE t ≤ 10", ".2e"),
            Column("train_s", "train (s)", ".1f"),
        ), rows="duffing"),
    ),
    targets=_targets,
    options=(
        Option("--pendulum-epochs", int, "LM epochs of the three pendulum networks (default 150)"),
        Option("--adam-epochs", int, "Adam epochs of the port-Hamiltonian network (default 60)"),
        Option("--duffing-lm-epochs", int, "LM epochs of the port-Hamiltonian network (default 40)"),
    ),
)
NAME, DESCRIPTION = SPEC.name, SPEC.description
add_arguments, run = SPEC.add_arguments, SPEC.run


# ----------------------------------------------------------------------------- side by side with phlearn


def write_pendulum_data(path, settings=None) -> dict:
    """Write experiment 1's damped-pendulum trajectories (float64) to the `.npz` file `path`:
    `train` `(n_train, pendulum_steps + 1, 2)`, `test` `(n_test, rollout_steps + 1, 2)`,
    `dt` and `gamma`. `side_by_side` and `benchmarks/phlearn_peer.py` both train on this
    file, so the two libraries see identical arrays. Returns the shapes written."""
    import numpy as np

    system, data, test = _pendulum_data(FULL if settings is None else settings)
    arrays = {"train": np.asarray(data.states), "test": np.asarray(test.states),
              "dt": np.float64(data.dt), "gamma": np.float64(system.gamma)}
    np.savez(path, **arrays)
    return {name: list(np.shape(a)) for name, a in arrays.items()}


def _dg_iterate(model, initial, n_points, dt):
    """`PortHamiltonianNN`'s discrete-gradient map iterated from `initial` `(B, 2)`, as
    `geomlearn.iterate` does, except that a solve flagged as unconverged keeps Newton's
    last iterate instead of raising; returns the states `(B, n_points, 2)` and the number
    of flagged solves, reported as `unconverged_solves` (expected 0). (Near the
    equilibrium a learned energy with a large constant offset puts the rounding floor of
    the discrete gradient's quotient `(H(y) − H(x) − ∇H·d)/|d|²`, of size `eps·|H|/|d|`,
    above a fixed acceptance threshold; the solver now accepts changes down to that
    rounding level, and this count shows whether any solve is still flagged.)"""
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    @eqx.filter_jit
    def run(model, z0):
        def body(z, _):
            y, ok = jax.vmap(lambda s: model._solve(s, dt, 0.0))(z)
            return y, (y, ok)

        _, (ys, oks) = jax.lax.scan(body, z0, None, length=n_points - 1)
        return jnp.concatenate([z0[:, None], jnp.swapaxes(ys, 0, 1)], axis=1), jnp.sum(~oks)

    states, flagged = run(model, jnp.asarray(initial))
    return states, int(flagged)


SIDE_BY_SIDE = ("PortHamiltonianNN", "PortHamiltonianNN (solved pairs)", "ConformalSympNet")


#: The side-by-side's Levenberg–Marquardt epochs (its earlier runs' number).
SIDE_BY_SIDE_EPOCHS = 150


def side_by_side(path, epochs: int = SIDE_BY_SIDE_EPOCHS, names=SIDE_BY_SIDE) -> dict:
    """geomlearn's side of the comparison with `phlearn` (`benchmarks/phlearn_peer.py`).

    Reads the arrays of `write_pendulum_data` from `path` and trains, with `epochs`
    Levenberg–Marquardt epochs of `geomlearn.fit` (full batch, as experiment 1),
    `PortHamiltonianNN(2, width=16, depth=2, dt)` (constant learned `R = LLᵀ`, trained on
    its discrete-gradient step's residual, the default), the same trained through the
    solved step (`sample_form="pairs"`) and `ConformalSympNet(2, n_layers=4, width=16,
    dt)` (or those of them in `names`). For each: the training wall time (compilation
    included), the learned damping (the largest eigenvalue of `R`, or γ), the one-step
    test error (relative Frobenius error and mean squared error of one step from every
    test pair) and the relative error of the rollout over the whole test horizon against
    the Gauss–Legendre reference, computed as in experiment 1. `ValueError` for a name
    not in `SIDE_BY_SIDE`."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import geomlearn as gl
    from geomlearn._nn import count_parameters

    arrays = np.load(path)
    dt, gamma = float(arrays["dt"]), float(arrays["gamma"])
    data = gl.TrajectoryData(jnp.asarray(arrays["train"]), dt)
    test = jnp.asarray(arrays["test"])
    x, y = test[:, :-1].reshape(-1, 2), test[:, 1:].reshape(-1, 2)
    k = jax.random.PRNGKey(2)
    models = {
        "PortHamiltonianNN": lambda: gl.PortHamiltonianNN(2, width=16, depth=2, dt=dt, key=k, dtype=jnp.float64),
        "PortHamiltonianNN (solved pairs)": lambda: gl.PortHamiltonianNN(
            2, width=16, depth=2, dt=dt, sample_form="pairs", key=k, dtype=jnp.float64),
        "ConformalSympNet": lambda: gl.ConformalSympNet(2, n_layers=4, width=16, dt=dt, key=k, dtype=jnp.float64),
    }
    unknown = set(names) - set(models)
    if unknown:
        raise ValueError(f"names must be among {SIDE_BY_SIDE}, got {sorted(unknown)}")
    rows = []
    for name in names:
        model = models[name]()
        started = time.perf_counter()
        model, history = gl.fit(model, data, optimizer=gl.LevenbergMarquardt(), epochs=epochs,
                                key=jax.random.PRNGKey(3), progress=False)
        train_s = time.perf_counter() - started
        port = isinstance(model, gl.PortHamiltonianNN)
        damping = float(model.dissipation_spectrum()[-1]) if port else float(model.damping_rate())
        if port:
            step, flagged_step = _dg_iterate(model, x, 2, dt)
            rollout, flagged = _dg_iterate(model, test[:, 0], test.shape[1], dt)
            step, flagged = step[:, 1], {"one_step": flagged_step, "rollout": flagged}
        else:
            step, flagged = gl.iterate(model, x, 2)[:, 1], None
            rollout = gl.iterate(model, test[:, 0], test.shape[1])
        step = np.asarray(step)
        rows.append({"name": name, "parameters": count_parameters(model), "epochs": epochs,
                     "final_loss": float(history["loss"][-1]),
                     "train_s": train_s, "damping": damping, "damping_error": abs(damping - gamma) / gamma,
                     "one_step_rel": _rel(step, y), "one_step_mse": float(np.mean((step - np.asarray(y)) ** 2)),
                     "rollout_rel": _rel(rollout, test), "unconverged_solves": flagged})
    return {"library": "geomlearn", "jax": jax.__version__, "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
            "cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
            "n_train_pairs": int(arrays["train"].shape[0] * (arrays["train"].shape[1] - 1)),
            "n_test_pairs": int(x.shape[0]), "rollout_steps": int(test.shape[1] - 1), "rows": rows}


def _main(argv=None) -> dict:
    """`python -m benchmarks.dissipation --side-by-side PATH`: write the damped-pendulum
    arrays to PATH (unless `--reuse`), train geomlearn's side on them, print one JSON."""
    import argparse
    import json

    parser = argparse.ArgumentParser(description="geomlearn's side of benchmarks/phlearn_peer.py")
    parser.add_argument("--side-by-side", required=True, metavar="PATH", help="the .npz file (written, then read)")
    parser.add_argument("--epochs", type=int, default=SIDE_BY_SIDE_EPOCHS)
    parser.add_argument("--reuse", action="store_true", help="read PATH as it is instead of writing it")
    args = parser.parse_args(argv)
    C.enable_x64()
    if not args.reuse:
        write_pendulum_data(args.side_by_side)
    result = side_by_side(args.side_by_side, args.epochs)
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    _main()
