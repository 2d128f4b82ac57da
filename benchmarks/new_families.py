"""New families: P-SympNets, time-symmetric SympNets and Lagrangian neural networks.

Four experiments, every network trained with `geomlearn.fit` (float64):

1. **Harmonic oscillator** (Tapley 2024 / strupnet's headline example): `H = (q² + p²)/2`
   from `(1, 0)`, `dt = 0.05`, train on `t ∈ [0, 1]` (20 pairs), test by rolling out over
   `[1, 4]`; `PSympNet(2, n_layers=2)` (degree 2), Adam 1e-2, MSE, full batch, 1000
   epochs. Reported: the final training MSE and the largest error norm of the rollout.
2. **Linear system, 20 dimensions** (n = 10): `H = zᵀSz/2` with a random symmetric
   positive-definite `S`, exact flow `expm(dt J S)` with `dt = 0.1`; one-step pairs from
   random states; `PSympNet(20, n_layers=40)`, Adam 1e-2, MSE. Reported: training and
   test MSE, and training throughput (epochs/s, full batch). strupnet's throughput on the
   same problem is measured by `benchmarks/strupnet_peer.py`, run in a separate
   benchmark-only environment with PyTorch (never a dependency of geomlearn).
3. **Symmetric compositions on the pendulum**: the SympNets pendulum data
   (`datasets.pendulum_sympnets()`), `PSympNet(2, n_layers=8, max_degree=4)` and
   `GSympNet(2, n_layers=4, width=16)` with and without `symmetric=True`, same training;
   energy error and trajectory error of a long rollout (`geomlearn.evaluate`).
4. **Double pendulum, Lagrangian network** (Cranmer et al. 2020, qualitatively):
   accelerations `q̈(q, q̇)` of `DoublePendulum()` at random states; a
   `LagrangianNeuralNetwork(2, width=64, depth=2)` and a baseline MLP that learns `q̈`
   directly (the same `fit`, through a thin model wrapper), both rolled out with RK4 from
   a test state; the true energy along each rollout (figure `new_families_energy.png`).
   Both are trained with Adam, a cosine schedule from 1e-2 to 1e-4, MSE, full batch. The
   LNN starts from its default initialisation (kinetic prior, see
   `LagrangianNeuralNetwork`); its Hessian conditioning and q̈ at initialisation are
   recorded.
"""

from __future__ import annotations

import time

from ._harness import Benchmark, Column, Option, Table

FULL = {"sho_epochs": 1000, "linear_epochs": 3000, "linear_samples": 400,
        "pendulum_epochs": 20000, "rollout_steps": 10000, "lnn_epochs": 3000,
        "lnn_samples": 1000, "lnn_steps": 5000, "sizes": "full"}
QUICK = {"sho_epochs": 5, "linear_epochs": 2, "linear_samples": 8,
         "pendulum_epochs": 2, "rollout_steps": 20, "lnn_epochs": 2,
         "lnn_samples": 16, "lnn_steps": 10, "sizes": "tiny"}


def _mse(model, x, y):
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    return float(eqx.filter_jit(lambda m: jnp.mean(jnp.square(jax.vmap(m)(x) - y)))(model))


def _sho(settings):
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax

    import geomlearn as gl

    dt = 0.05
    t = np.arange(81) * dt
    traj = np.stack([np.cos(t), -np.sin(t)], axis=-1)
    train = gl.TrajectoryData(jnp.asarray(traj[None, :21]), dt)
    model = gl.PSympNet(2, n_layers=2, key=jax.random.PRNGKey(0))
    t0 = time.perf_counter()
    model, history = gl.fit(model, train, epochs=settings["sho_epochs"],
                            optimizer=optax.adam(1e-2), loss="mse",
                            key=jax.random.PRNGKey(1), progress=False)
    train_s = time.perf_counter() - t0
    rollout = np.asarray(gl.iterate(model, jnp.asarray(traj[20]), 61))
    err = np.linalg.norm(rollout - traj[20:], axis=-1)
    x, y = train.pairs()
    return {"name": "PSympNet(2, n_layers=2), degree 2", "train_mse": _mse(model, x, y),
            "test_error": float(err.max()), "test_error_final": float(err[-1]),
            "train_s": train_s, "strupnet_train_mse": 3e-33, "strupnet_test_error": 7e-16}


def _linear(settings):
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax
    import scipy.linalg

    import geomlearn as gl

    n, dt = 10, 0.1
    rng = np.random.default_rng(0)
    A = rng.standard_normal((2 * n, 2 * n))
    S = A @ A.T / (2 * n) + np.eye(2 * n)
    J = np.asarray(gl.geometry.symplectic_matrix(n, dtype=jnp.float64))
    Phi = scipy.linalg.expm(dt * J @ S)
    M = settings["linear_samples"]
    x = rng.standard_normal((2 * M, 2 * n))
    y = x @ Phi.T
    xtr, ytr, xte, yte = (jnp.asarray(a) for a in (x[:M], y[:M], x[M:], y[M:]))
    layers = 40 if settings["sizes"] == "full" else 4
    model = gl.PSympNet(2 * n, n_layers=layers, key=jax.random.PRNGKey(2))
    epochs = settings["linear_epochs"]
    gl.fit(model, (xtr, ytr), epochs=1, optimizer=optax.adam(1e-2), loss="mse",
           key=jax.random.PRNGKey(3), progress=False)  # compile
    t0 = time.perf_counter()
    model, history = gl.fit(model, (xtr, ytr), epochs=epochs, optimizer=optax.adam(1e-2),
                            loss="mse", key=jax.random.PRNGKey(3), progress=False)
    train_s = time.perf_counter() - t0
    return {"name": f"PSympNet(20, n_layers={layers})", "train_mse": _mse(model, xtr, ytr),
            "test_mse": _mse(model, xte, yte), "epochs_per_s": epochs / train_s,
            "train_s": train_s, "n_samples": M}


def _pendulum_symmetric(settings):
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax

    import geomlearn as gl
    from geomlearn.integrators import integrate

    train, _ = gl.datasets.pendulum_sympnets()
    dt = float(train.dt)
    system = gl.systems.Pendulum()
    z0 = jnp.asarray(np.asarray(train.states)[0, 0], dtype=jnp.float64)
    steps = settings["rollout_steps"]
    reference = integrate(system, z0, dt, steps, method="yoshida6", substeps=10)
    tiny = settings["sizes"] == "tiny"
    makers = {
        "PSympNet": lambda s, k: gl.PSympNet(2, n_layers=2 if tiny else 8, max_degree=4,
                                             symmetric=s, key=k),
        "GSympNet": lambda s, k: gl.GSympNet(2, n_layers=2 if tiny else 4,
                                             width=4 if tiny else 16, symmetric=s, key=k),
    }
    rows = []
    for i, (name, make) in enumerate(makers.items()):
        for symmetric in (False, True):
            model = make(symmetric, jax.random.PRNGKey(20 + i))
            t0 = time.perf_counter()
            model, history = gl.fit(model, train, epochs=settings["pendulum_epochs"],
                                    optimizer=optax.adam(1e-3), loss="mse",
                                    key=jax.random.PRNGKey(30 + i), progress=False)
            train_s = time.perf_counter() - t0
            metrics = gl.evaluate(model, system, reference, dt=dt, horizons=[steps])
            rows.append({
                "name": name + (" symmetric" if symmetric else ""),
                "final_loss": history["loss"][-1],
                "err": metrics["trajectory_error"][str(steps)],
                "energy": metrics["invariant_drift"]["energy"],
                "train_s": train_s,
            })
    return rows


def _double_pendulum(settings, out):
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax

    import geomlearn as gl
    from geomlearn.models import AbstractPointModel, Task

    system = gl.systems.DoublePendulum()
    n = 2

    def velocity(z):
        return system.vector_field(z)[:n]

    def lagrangian_state(z):  # (q, p) -> (q, q̇, q̈)
        qdot = velocity(z)
        qddot = jax.jvp(velocity, (z,), (system.vector_field(z),))[1]
        return jnp.concatenate([z[:n], qdot]), qddot

    def momenta(x):  # (q, q̇) -> (q, p): p = (∂²H/∂p²)⁻¹ q̇ (H is quadratic in p)
        q, qdot = x[:n], x[n:]
        hpp = jax.hessian(lambda p: system.hamiltonian(jnp.concatenate([q, p])))(jnp.zeros(n))
        return jnp.concatenate([q, jnp.linalg.solve(hpp, qdot)])

    rng = np.random.default_rng(5)
    M = settings["lnn_samples"]
    Z = jnp.asarray(np.concatenate([rng.uniform(-1.0, 1.0, (M, n)), rng.uniform(-1.0, 1.0, (M, n))], 1))
    X, A = jax.vmap(lagrangian_state)(Z)
    tiny = settings["sizes"] == "tiny"
    width = 8 if tiny else 64

    class Baseline(AbstractPointModel):
        """A plain MLP q̈ = g(q, q̇): the baseline of Cranmer et al. (trained, not iterated)."""

        mlp: eqx.nn.MLP
        dim: int = eqx.field(static=True)
        structure = "none"

        def __init__(self, key):
            self.dim = 2 * n
            self.mlp = eqx.nn.MLP(2 * n, n, width, 2, activation=jax.nn.softplus, key=key)

        def task(self, **options):
            return Task()

        def training_samples(self, data, task, *, what="data"):
            x, y = data
            return jnp.asarray(x), jnp.asarray(y), Task(samples="acceleration")

        def predict(self, x, task):
            return self.mlp(x)

        def target(self, y, task):
            return y

        def step(self, state, task):
            raise TypeError("the baseline is not an integrator")

        rollout_task = rollout = structure_residuals = describe_step = step

    def rk4(field, z, dt, steps):
        def body(z, _):
            k1 = field(z); k2 = field(z + dt / 2 * k1); k3 = field(z + dt / 2 * k2)  # noqa: E702
            k4 = field(z + dt * k3)
            z = z + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            return z, z
        _, zs = jax.lax.scan(body, z, None, length=steps)
        return jnp.concatenate([z[None], zs])

    lnn = gl.LagrangianNeuralNetwork(n, width=width, depth=2, key=jax.random.PRNGKey(7))
    base = Baseline(jax.random.PRNGKey(8))
    results, curves = [], {}
    dt, steps = 0.01, settings["lnn_steps"]
    x0 = lagrangian_state(jnp.array([0.6, -0.4, 0.3, 0.2]))[0]
    truth = jax.vmap(lambda z: lagrangian_state(z)[0])(
        gl.integrators.integrate(system, momenta(x0), dt, steps, method="gauss_legendre6", substeps=2))
    E0 = float(system.hamiltonian(momenta(x0)))
    # the LNN at its default initialisation (kinetic prior ½q̇ᵀq̇, small output layer):
    # the conditioning of the velocity Hessian and the size of q̈ over the training states
    hess = jax.vmap(lambda x: jax.hessian(lnn._L)(x)[n:, n:])(X)
    acc0 = jax.vmap(lambda x: lnn.acceleration(x[:n], x[n:]))(X)
    init = {"cond_max": float(jnp.max(jnp.linalg.cond(hess))),
            "acc_max": float(jnp.max(jnp.abs(acc0))),
            "acc_rms_data": float(jnp.sqrt(jnp.mean(jnp.square(A))))}
    epochs = settings["lnn_epochs"]
    for name, model in (("LNN", lnn), ("baseline MLP q̈", base)):
        t0 = time.perf_counter()
        try:
            schedule = optax.cosine_decay_schedule(1e-2, epochs, alpha=1e-2)
            model, history = gl.fit(model, (X, A), epochs=epochs,
                                    optimizer=optax.adam(schedule), loss="mse",
                                    key=jax.random.PRNGKey(9), progress=False)
        except Exception as error:  # the LNN's singular-Hessian error (raised through XLA)
            if "singular or badly conditioned" not in str(error):
                raise
            results.append({"name": name, "final_loss": float("nan"), "train_s":
                            time.perf_counter() - t0, "energy": float("nan"),
                            "err": float("nan"), "failed": str(error).splitlines()[0][:200]})
            continue
        train_s = time.perf_counter() - t0
        if isinstance(model, gl.LagrangianNeuralNetwork):
            field = model
        else:
            field = lambda z, m=model: jnp.concatenate([z[n:], m.mlp(z)])  # noqa: E731
        traj = eqx.filter_jit(rk4)(field, x0, dt, steps)
        energy = np.asarray(jax.vmap(lambda x: system.hamiltonian(momenta(x)))(traj))
        curves[name] = energy
        err = np.linalg.norm(np.asarray(traj - truth), axis=-1)
        results.append({
            "name": name, "initial_loss": history["loss"][0], "final_loss": history["loss"][-1],
            "train_s": train_s, "energy": float(np.max(np.abs(energy - E0)) / abs(E0)),
            "energy_final": float(abs(energy[-1] - E0) / abs(E0)),
            "err": float(np.max(err)), "err_1": float(np.max(err[: int(round(1.0 / dt)) + 1])),
        })
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3.2))
        t = np.arange(steps + 1) * dt
        for name, energy in curves.items():
            ax.plot(t, (energy - E0) / abs(E0), label=name)
        ax.set_xlabel("t"); ax.set_ylabel("relative energy error")  # noqa: E702
        ax.set_yscale("symlog", linthresh=1e-4)
        ax.set_title("double pendulum: learned dynamics rolled out with RK4")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "new_families_energy.png", dpi=120)
        plt.close(fig)
    except ImportError:  # matplotlib is an optional extra
        pass
    return results, init


def measure(settings: dict, ctx) -> dict:
    ctx.log("harmonic oscillator …")
    sho = _sho(settings)
    ctx.log("linear system …")
    linear = _linear(settings)
    ctx.log("pendulum, symmetric compositions …")
    pendulum = _pendulum_symmetric(settings)
    ctx.log("double pendulum, LNN …")
    lnn, lnn_init = _double_pendulum(settings, ctx.out)
    return {"sho": [sho], "linear": [linear], "pendulum": pendulum, "lnn": lnn,
            "lnn_init": lnn_init}


SPEC = Benchmark(
    name="new_families",
    description="P-SympNet SHO and 20-dim linear system, symmetric SympNets on the "
    "pendulum, Lagrangian network vs MLP on the double pendulum",
    full=FULL,
    quick=QUICK,
    measure=measure,
    tables=(
        Table("Harmonic oscillator, P-SympNet, {sho_epochs} epochs Adam 1e-2 (float64)", (
            Column("name", "network"),
            Column("train_mse", "train MSE", ".1e"),
            Column("test_error", "max test error norm, t in [1, 4]", ".1e"),
            Column("strupnet_train_mse", "strupnet train MSE", ".0e"),
            Column("strupnet_test_error", "strupnet test error", ".0e"),
            Column("train_s", "train (s)", ".1f"),
        ), rows="sho"),
        Table("Linear Hamiltonian system, 20 dims, {linear_epochs} epochs", (
            Column("name", "network"),
            Column("n_samples", "pairs", "d"),
            Column("train_mse", "train MSE", ".1e"),
            Column("test_mse", "test MSE", ".1e"),
            Column("epochs_per_s", "epochs/s", ",.0f"),
        ), rows="linear"),
        Table("Pendulum, plain vs symmetric, {pendulum_epochs} epochs, {rollout_steps}-step rollout", (
            Column("name", "network"),
            Column("final_loss", "train MSE", ".1e"),
            Column("err", "rel. error", ".2e"),
            Column("energy", "energy error", ".2e"),
            Column("train_s", "train (s)", ".1f"),
        ), rows="pendulum"),
        Table("Double pendulum, {lnn_samples} states, {lnn_epochs} epochs, RK4 rollout of {lnn_steps} steps (dt 0.01)", (
            Column("name", "network"),
            Column("initial_loss", "first-epoch MSE (q̈)", ".1e"),
            Column("final_loss", "train MSE (q̈)", ".1e"),
            Column("energy", "max rel. energy error", ".2e"),
            Column("energy_final", "final rel. energy error", ".2e"),
            Column("err_1", "max state error, t <= 1", ".2e"),
            Column("err", "max state error", ".2e"),
            Column("train_s", "train (s)", ".1f"),
        ), rows="lnn"),
    ),
    notes=lambda settings, results: [
        "strupnet's numbers are those it reports for the same SHO setting; its throughput "
        "on the 20-dim system: benchmarks/strupnet_peer.py, in a separate environment"] + [
        f"{row['name']} training stopped: {row['failed']}" for row in results["lnn"]
        if "failed" in row] + [
        "LNN at its default initialisation on the training states: condition number of the "
        f"velocity Hessian <= {results['lnn_init']['cond_max']:.3g}, |q̈| <= "
        f"{results['lnn_init']['acc_max']:.2g} (data: rms q̈ "
        f"{results['lnn_init']['acc_rms_data']:.2g})"],
    options=(
        Option("--epochs", int, "P-SympNet epochs for the SHO (default 1000)", setting="sho_epochs"),
        Option("--linear-epochs", int, "epochs on the 20-dim linear system (default 3000)"),
        Option("--pendulum-epochs", int, "epochs of the plain/symmetric pendulum SympNets (default 20000)"),
        Option("--rollout-steps", int, "pendulum rollout steps (default 10000)"),
        Option("--lnn-epochs", int, "epochs of the LNN and the baseline (default 3000)"),
        Option("--lnn-samples", int, "double-pendulum training states (default 1000)"),
        Option("--lnn-steps", int, "double-pendulum rollout steps of dt 0.01 (default 5000)"),
    ),
)
NAME, DESCRIPTION = SPEC.name, SPEC.description
add_arguments, run = SPEC.add_arguments, SPEC.run
