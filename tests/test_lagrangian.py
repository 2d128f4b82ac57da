"""Lagrangian neural networks (geomlearn.models.lagrangian)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import geomlearn as gl
from geomlearn.models import LagrangianNeuralNetwork, lagrangian
from geomlearn.cli import MODELS as REGISTRY

from _helpers import n_params, normal, randomize


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def lnn(key, n=2, dtype=None, **kw):
    return LagrangianNeuralNetwork(n, width=kw.pop("width", 8), depth=kw.pop("depth", 2), key=key(), dtype=dtype, **kw)


def euler_lagrange_residual(model, acceleration, q, qdot):
    """d/dt ∇_q̇ L − ∇_q L along (q̇, q̈), computed by a jvp, independently of the solve."""
    n = q.shape[0]
    grad = lambda x: jax.grad(lambda y: model._L(y))(x)  # noqa: E731
    x = jnp.concatenate([q, qdot])
    qddot = acceleration(q, qdot)
    _, dgrad = jax.jvp(grad, (x,), (jnp.concatenate([qdot, qddot]),))
    return dgrad[n:] - grad(x)[:n]


def test_public_name_config_and_parameter_count(key):
    model = lnn(key, n=3, width=5, depth=2)
    assert gl.LagrangianNeuralNetwork is LagrangianNeuralNetwork
    assert model.dim == 6 and model.n == 3 and model.structure == "none"
    assert model.config() == {"n": 3, "width": 5, "depth": 2, "activation": "softplus",
                              "dtype": model.weights[0].dtype}
    assert n_params(model) == 3 * 3 + 6 * 5 + 5 + 5 * 5 + 5 + 5 + 1  # mass A, then the MLP
    np.testing.assert_array_equal(model.mass_matrix(), jnp.eye(3))


def test_acceleration_solves_euler_lagrange_and_conserves_energy(rng, key):
    model = randomize(lnn(key, n=2), rng, 0.7)

    @jax.jit  # one program for the three points (eagerly, every operation compiles alone)
    def residuals(q, qdot):
        res = euler_lagrange_residual(model, model.acceleration, q, qdot)
        # dE/dt = ∇E · (q̇, q̈) = 0
        z = jnp.concatenate([q, qdot])
        return res, jnp.dot(jax.grad(lambda v: model.energy(v[:2], v[2:]))(z), model(z))

    for _ in range(3):
        res, dE = residuals(normal(rng, (2,)), normal(rng, (2,)))
        assert float(jnp.max(jnp.abs(res))) <= 1e-12
        assert abs(float(dE)) <= 1e-12


def test_negative_control_dropping_the_mixed_term(rng, key):
    """An acceleration without the term (∇_q̇∇_qᵀL) q̇ violates Euler–Lagrange: the test
    above can fail."""
    model = randomize(lnn(key, n=2), rng, 0.7)

    def wrong(q, qdot):
        x = jnp.concatenate([q, qdot])
        hess = jax.hessian(model._L)(x)
        return jnp.linalg.solve(hess[2:, 2:], jax.grad(model._L)(x)[:2])

    q, qdot = normal(rng, (2,)), normal(rng, (2,))
    assert float(jnp.max(jnp.abs(euler_lagrange_residual(model, wrong, q, qdot)))) > 1e-4


def test_known_lagrangian_through_the_same_formula():
    """The formula of `acceleration` on the pendulum L = q̇²/2 + cos q gives q̈ = −sin q."""
    L = lambda x: 0.5 * x[1] ** 2 + jnp.cos(x[0])  # noqa: E731
    x = jnp.array([0.7, -0.3])
    hess = jax.hessian(L)(x)
    qddot = (jax.grad(L)(x)[:1] - hess[1:, :1] @ x[1:]) / hess[1, 1]
    np.testing.assert_allclose(qddot, -jnp.sin(x[:1]), rtol=1e-15)


def _cancel_prior(model, W0=None):
    """`model` with the kinetic prior cancelled (A = 0) and the MLP's weights zero (or only
    the first layer `W0`): L no longer depends quadratically on q̇."""
    weights = tuple(jnp.zeros_like(w) for w in model.weights)
    if W0 is not None:
        weights = (W0,) + weights[1:-1] + (jnp.ones_like(model.weights[-1]),)
    return eqx.tree_at(lambda m: (m.mass, m.weights), model, (jnp.zeros_like(model.mass), weights))


def test_singular_hessian_raises_a_clear_error(key):
    model = lnn(key, n=2)
    q, qdot = jnp.ones(2), jnp.ones(2)
    assert np.all(np.isfinite(model.acceleration(q, qdot)))  # the same state, well-posed
    # L ≡ const: the velocity Hessian is the zero matrix
    flat = _cancel_prior(model)
    assert float(jnp.max(jnp.abs(jax.hessian(flat._L)(jnp.ones(4))))) == 0.0
    with pytest.raises(Exception, match="singular or badly conditioned.*<= 7.0e\\+13 in float64"):
        flat.acceleration(q, qdot)
    # a Lagrangian that depends on q̇ only through q̇₁ (only the first input column of the
    # MLP is non-zero, apart from q), vmapped and jitted: Hessian of rank ≤ 1
    W0 = jnp.zeros_like(model.weights[0]).at[:, 2].set(1.0)
    rank_one = _cancel_prior(model, W0)
    with pytest.raises(Exception, match="singular or badly conditioned"):
        jax.jit(jax.vmap(rank_one))(jnp.ones((3, 4)))
    # invertible but badly conditioned: M = diag(1, 1e-15), cond 1e15 > 7e13
    bad = eqx.tree_at(lambda m: m.mass, flat, jnp.diag(jnp.array([1.0, 1e-15])))
    assert np.isfinite(np.linalg.cond(np.asarray(bad.mass)))
    with pytest.raises(Exception, match="singular or badly conditioned"):
        bad.acceleration(q, qdot)
    ok = eqx.tree_at(lambda m: m.mass, flat, jnp.diag(jnp.array([1.0, 1e-6])))
    np.testing.assert_allclose(ok.acceleration(q, qdot), 0.0, atol=1e-12)  # L = ½q̇ᵀMq̇


def test_initialisation_is_well_posed_and_a_bare_mlp_is_not(key):
    """At initialisation the velocity Hessian is ≈ I and q̈ ≈ 0 on the double pendulum's
    state range (the kinetic prior). Negative control: the same MLP without the prior
    and with a Glorot output layer (Cranmer et al.'s form) has a small, indefinite
    Hessian whose accelerations are orders of magnitude larger."""
    rng = np.random.default_rng(3)
    X = jnp.asarray(rng.uniform(-1.5, 1.5, (256, 4)))

    @eqx.filter_jit  # one program for every model (eagerly, every operation compiles alone)
    def stats(m):
        H = jax.vmap(lambda x: jax.hessian(m._L)(x)[2:, 2:])(X)
        acc = jax.vmap(lambda x: m._acceleration(x[:2], x[2:])[0])(X)
        return jnp.linalg.eigvalsh(H), jnp.max(jnp.abs(acc))

    for seed in range(3):
        model = REGISTRY["lnn"].build(4, key=jax.random.PRNGKey(seed))
        eig, acc = stats(model)
        assert float(jnp.min(eig)) > 0.9 and float(jnp.max(eig)) < 1.1
        assert float(acc) < 0.1
        bare = eqx.tree_at(lambda m: (m.mass, m.weights[-1]), model,
                           (jnp.zeros_like(model.mass), model.weights[-1] / model.output_scale))
        eig_b, acc_b = stats(bare)
        assert float(jnp.max(jnp.abs(eig_b))) < 0.1  # no scale: a small Hessian ...
        assert float(acc_b) > 10 * float(acc)  # ... and large accelerations


def _double_pendulum_accelerations(M, seed=5):
    """States (q, q̇) and accelerations q̈ of `DoublePendulum()` at M random states."""
    system = gl.systems.DoublePendulum()

    def velocity(z):
        return system.vector_field(z)[:2]

    def sample(z):
        qddot = jax.jvp(velocity, (z,), (system.vector_field(z),))[1]
        return jnp.concatenate([z[:2], velocity(z)]), qddot

    Z = jnp.asarray(np.random.default_rng(seed).uniform(-1.0, 1.0, (M, 4)))
    return jax.vmap(sample)(Z)


@pytest.mark.slow  # a training run
def test_default_initialisation_trains_on_the_double_pendulum():
    """A default-initialised LNN (the command line's configuration) fitted with Adam 1e-2
    to double-pendulum accelerations for 300 epochs: the loss stays finite, falls by more
    than 10x and ends below 3 % of the mean square acceleration (0.7 % measured; the bare
    MLP without the kinetic prior ends at 14 % on the same data and budget)."""
    X, A = _double_pendulum_accelerations(256)
    scale = float(jnp.mean(jnp.square(A)))
    model = REGISTRY["lnn"].build(4, key=jax.random.PRNGKey(0))
    trained, history = gl.fit(model, (X, A), epochs=300, optimizer=optax.adam(1e-2),
                              loss="mse", key=jax.random.PRNGKey(1), progress=False)
    loss = np.asarray(history["loss"])
    assert np.all(np.isfinite(loss)) and len(loss) == 300
    assert loss[-1] < 0.1 * loss[0], (loss[0], loss[-1])
    assert loss[-1] < 0.03 * scale, (loss[-1], scale)
    pred = jax.vmap(lambda x: trained.acceleration(x[:2], x[2:]))(X)
    assert float(jnp.mean(jnp.square(pred - A))) < 0.03 * scale


@pytest.mark.slow  # a command-line training run
def test_command_line_trains_the_lnn(tmp_path):
    """`geomlearn train --model lnn` as a user runs it (float32, no --x64; pendulum, where
    p = q̇; Levenberg–Marquardt) finishes with a finite training loss below 1 and below
    the initial one (before the kinetic prior: a relative loss of 1e18)."""
    import json

    from geomlearn import cli

    out = tmp_path / "lnn"
    with jax.enable_x64(False):  # the command line's default precision
        assert cli.main(["train", "--model", "lnn", "--epochs", "4", "--out", str(out)]) in (0, 4)
    assert json.loads((out / "run.json").read_text())["dtype"] == "float32"
    metrics = json.loads((out / "metrics.json").read_text())
    history = json.loads((out / "history.json").read_text())
    assert metrics["model"] == "LagrangianNeuralNetwork"
    assert np.isfinite(metrics["final_loss"]) and metrics["final_loss"] < 1.0
    assert metrics["final_loss"] < history["loss"][0]
    assert np.all(np.isfinite(list(metrics["trajectory_error"].values())))


def test_jit_vmap_dtype(rng, key, dtype, tol):
    model = randomize(lnn(key, n=2, dtype=jnp.float64), rng, 0.5)
    Z = normal(rng, (2, 4), dtype)
    rows = [jnp.asarray(z) for z in np.asarray(Z)]  # sliced on the host: no slicing programs
    jitted = eqx.filter_jit(model)
    out = jax.jit(jax.vmap(model))(Z)  # vmapped and compiled; `model(rows[0])` below runs eagerly
    assert out.dtype == dtype and out.shape == (2, 4)
    loop = jnp.stack([jitted(z) for z in rows])
    np.testing.assert_allclose(out, loop, rtol=10 * tol(dtype), atol=10 * tol(dtype))
    np.testing.assert_allclose(model(rows[0]), loop[0], rtol=10 * tol(dtype), atol=10 * tol(dtype))
    q, qdot = (jnp.asarray(v) for v in np.split(np.asarray(Z)[0], 2))
    assert eqx.filter_jit(model.lagrangian)(q, qdot).dtype == dtype
    assert eqx.filter_jit(model.energy)(q, qdot).dtype == dtype


def test_errors(key):
    model = lnn(key, n=2)
    with pytest.raises(ValueError, match="expects last dimension 2, got shape \\(3,\\)"):
        model.acceleration(jnp.ones(3), jnp.ones(3))
    with pytest.raises(ValueError, match="n must be >= 1"):
        LagrangianNeuralNetwork(0, width=2, depth=1, key=key())
    with pytest.raises(ValueError, match="accelerations of shape \\(5, 2\\).*got \\(5, 3\\)"):
        gl.fit(model, (jnp.ones((5, 4)), jnp.ones((5, 3))), epochs=1, key=key(), progress=False)
    with pytest.raises(ValueError, match="needs the time step dt"):
        gl.iterate(model, jnp.ones(4), 3)


@pytest.mark.slow  # a training run
def test_fit_on_accelerations_and_trajectories_then_iterate(key):
    """Harmonic oscillator q̈ = −q: acceleration regression, then an RK4 rollout of the
    learned dynamics keeps the learned energy; training on one-step pairs of a
    TrajectoryData; (q̇, q̈) targets are accepted too."""
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.uniform(-1.0, 1.0, (64, 2)))
    y = -x[:, :1]
    model = LagrangianNeuralNetwork(1, width=16, depth=2, key=jax.random.PRNGKey(0))
    trained, history = gl.fit(model, (x, y), epochs=300, optimizer=optax.adam(1e-2),
                              loss="mse", key=key(), progress=False)
    assert history["loss"][-1] < 1e-2 * history["loss"][0]
    traj = gl.iterate(trained, jnp.array([0.5, 0.0]), 200, dt=0.05)
    assert traj.shape == (200, 2)
    np.testing.assert_allclose(traj[:50, 0], 0.5 * np.cos(0.05 * np.arange(50)), atol=0.05)
    E = jax.vmap(lambda z: trained.energy(z[:1], z[1:]))(traj)
    assert float(jnp.max(jnp.abs(E - E[0]))) < 1e-7
    _, h2 = gl.fit(model, (x, jnp.concatenate([x[:, 1:], y], axis=1)), epochs=1,
                   loss="mse", key=key(), progress=False)
    assert h2["loss"][0] == pytest.approx(history["loss"][0])
    data = gl.TrajectoryData(traj[None, :20], 0.05)
    _, h3 = gl.fit(trained, data, epochs=2, loss="mse", key=key(), progress=False)
    assert h3["loss"][-1] < 1e-3


def test_registered_and_saved(key, tmp_path):
    spec = REGISTRY["lnn"]
    model = spec.build(4, key=key())
    assert isinstance(model, LagrangianNeuralNetwork) and model.n == 2 and model.dim == 4
    gl.save(tmp_path / "m", model)
    loaded = gl.load(tmp_path / "m")
    z = jnp.array([0.1, 0.2, 0.3, -0.1])
    np.testing.assert_array_equal(loaded(z), model(z))
