"""Dissipation and forcing: conformally symplectic and port-Hamiltonian networks.

Two experiments, float64, every network trained with `geomlearn.fit`:

1. **Damped pendulum** (`DampedPendulum(gamma=0.1)`, data at `h = 0.1`): training
   trajectories from `datasets.damped_pendulum` (q₀ ∈ [-2, 2], p₀ ∈ [-1, 1]);
   `ConformalSympNet(2, n_layers=4, width=16, dt=0.1)` (learned γ), a plain
   `GSympNet(2, n_layers=4, width=16)` and an unconstrained `ResNet(2, width=16,
   depth=2)`, each trained the same way (Levenberg–Marquardt, the same epochs). Reported:
   the learned γ and its relative error, and the relative error of a 1000-step rollout
   (t ∈ [0, 100]) from held-out initial states against a Gauss–Legendre reference.
   Goals: γ within 2 %; the conformal network's rollout error ≥ 10× below both others.
2. **Forced Duffing oscillator** (Desai et al., Phys. Rev. E 104, 034312, 2021:
   α = -1, β = 1, δ = 0.3, γ = 0.2, ω = 1.2; 10 training trajectories from
   U(-2.5, 2.5)², t ∈ [0, 10], h = 0.01): `PortHamiltonianNN(3, width=16, depth=2,
   forcing="time")`, Adam then Levenberg–Marquardt. Reported: the spectrum of the
   learned R against (0, δ), the learned forcing amplitude (the least-squares fit
   f_θ(t) ≈ a sin(ωt) + c over the training times; a constant force is a linear term of
   the energy and not identifiable) against γ, the largest discrete energy-balance residual along the rollouts, and the
   trajectory error over t ∈ [0, 10] from 5 held-out initial states. Goals: damping and
   amplitude within 5 %.
"""

from __future__ import annotations

import time

from . import _common as C
from ._harness import Benchmark, Column, Option, Table

FULL = {"pendulum_trajectories": 16, "pendulum_steps": 100, "pendulum_epochs": 150,
        "rollout_steps": 1000, "duffing_trajectories": 10, "duffing_steps": 1000,
        "adam_epochs": 60, "duffing_lm_epochs": 40, "duffing_batch": 1000, "test_trajectories": 5}
QUICK = {"pendulum_trajectories": 2, "pendulum_steps": 10, "pendulum_epochs": 2,
         "rollout_steps": 20, "duffing_trajectories": 2, "duffing_steps": 20,
         "adam_epochs": 1, "duffing_lm_epochs": 1, "duffing_batch": 20, "test_trajectories": 1}


def _rel(a, b) -> float:
    import numpy as np

    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _pendulum(settings, ctx):
    import jax
    import jax.numpy as jnp

    import geomlearn as gl

    system = gl.systems.DampedPendulum(gamma=0.1)
    data = gl.datasets.damped_pendulum(jax.random.PRNGKey(0), n_trajectories=settings["pendulum_trajectories"],
                                       n_steps=settings["pendulum_steps"], dtype=jnp.float64)
    test = gl.datasets.damped_pendulum(jax.random.PRNGKey(1), n_trajectories=settings["test_trajectories"],
                                       n_steps=settings["rollout_steps"], dtype=jnp.float64)
    k = jax.random.PRNGKey(2)
    models = {
        "ConformalSympNet": gl.ConformalSympNet(2, n_layers=4, width=16, dt=0.1, key=k, dtype=jnp.float64),
        "GSympNet": gl.GSympNet(2, n_layers=4, width=16, key=k, dtype=jnp.float64),
        "ResNet (MLP)": gl.ResNet(2, width=16, depth=2, key=k, dtype=jnp.float64),
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
             "err": _rel(rollout[..., :2], test.states[..., :2]), "train_s": train_s}]


def measure(settings: dict, ctx) -> dict:
    C.require_x64()
    return {"pendulum": _pendulum(settings, ctx), "duffing": _duffing(settings, ctx)}


def _targets(settings, results):
    rows = {r["name"]: r for r in results["pendulum"]}
    conf = rows["ConformalSympNet"]
    ratio = min(rows["GSympNet"]["err"], rows["ResNet (MLP)"]["err"]) / conf["err"]
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
