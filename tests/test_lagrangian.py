"""Lagrangian neural networks (geomlearn.models.lagrangian)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import geomlearn as gl
from geomlearn.models import LagrangianNeuralNetwork
from geomlearn.models.registry import MODELS as REGISTRY

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
    assert n_params(model) == 6 * 5 + 5 + 5 * 5 + 5 + 5 + 1


def test_acceleration_solves_euler_lagrange_and_conserves_energy(rng, key):
    model = randomize(lnn(key, n=2), rng, 0.7)
    for _ in range(3):
        q, qdot = normal(rng, (2,)), normal(rng, (2,))
        res = euler_lagrange_residual(model, model.acceleration, q, qdot)
        assert float(jnp.max(jnp.abs(res))) <= 1e-12
        # dE/dt = ∇E · (q̇, q̈) = 0
        z = jnp.concatenate([q, qdot])
        dE = jnp.dot(jax.grad(lambda v: model.energy(v[:2], v[2:]))(z), model(z))
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


def test_singular_hessian_raises_a_clear_error(key):
    model = lnn(key, n=2)
    flat = eqx.tree_at(lambda m: m.weights, model, tuple(jnp.zeros_like(w) for w in model.weights))
    with pytest.raises(Exception, match="singular or badly conditioned"):
        flat.acceleration(jnp.ones(2), jnp.ones(2))
    # a Lagrangian linear in q̇ (here: only the first input column is non-zero) too
    W0 = jnp.zeros_like(model.weights[0]).at[:, 0].set(1.0)
    linear = eqx.tree_at(lambda m: m.weights[0], model, W0)
    with pytest.raises(Exception, match="singular or badly conditioned"):
        jax.jit(jax.vmap(linear))(jnp.ones((3, 4)))


def test_jit_vmap_dtype(rng, key, dtype, tol):
    model = randomize(lnn(key, n=2, dtype=jnp.float64), rng, 0.5)
    Z = normal(rng, (2, 4), dtype)
    jitted = eqx.filter_jit(model)
    out = jax.vmap(model)(Z)
    assert out.dtype == dtype and out.shape == (2, 4)
    loop = jnp.stack([jitted(z) for z in Z])
    np.testing.assert_allclose(out, loop, rtol=10 * tol(dtype), atol=10 * tol(dtype))
    np.testing.assert_allclose(model(Z[0]), loop[0], rtol=10 * tol(dtype), atol=10 * tol(dtype))
    q, qdot = Z[0, :2], Z[0, 2:]
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
