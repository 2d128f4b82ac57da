"""Ridge layers (P- and R-layers) and P-/R-SympNets (geomlearn.layers.ridge,
geomlearn.models.ridge_sympnet)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import geomlearn as gl
from geomlearn.geometry import symplectic_matrix, symplecticity_residual
from geomlearn.layers import NeuralRidgeLayer, PolynomialRidgeLayer
from geomlearn.models import AbstractFeedForwardIntegrator, PSympNet, RSympNet
from geomlearn.cli import MODELS as REGISTRY

from _helpers import n_params, normal, randomize


@pytest.fixture
def rng():
    return np.random.default_rng(2024)


LAYERS = {
    "P(2..2)": lambda d, **kw: PolynomialRidgeLayer(d, **kw),
    "P(1..4)": lambda d, **kw: PolynomialRidgeLayer(d, max_degree=4, min_degree=1, **kw),
    "R(1, tanh)": lambda d, **kw: NeuralRidgeLayer(d, **kw),
    "R(3, sigmoid)": lambda d, **kw: NeuralRidgeLayer(d, width=3, activation="sigmoid", **kw),
}

MODELS = {
    "PSympNet": lambda d, **kw: PSympNet(d, n_layers=6, max_degree=3, min_degree=1, **kw),
    "RSympNet": lambda d, **kw: RSympNet(d, n_layers=6, width=3, **kw),
    "PSympNet-sym": lambda d, **kw: PSympNet(d, n_layers=4, max_degree=3, symmetric=True, **kw),
}


def _layer_residuals(module, Z, H):
    return jax.vmap(lambda z, h: symplecticity_residual(lambda v: module(v, h), z))(Z, H)


@eqx.filter_jit
def residuals(module, Z, H):
    return _layer_residuals(module, Z, H)


# --------------------------------------------------------------------------- structure


@pytest.mark.parametrize("name", list(LAYERS))
def test_layer_symplectic_for_random_parameters(name, rng, key, tol, dtype):
    H = jnp.asarray([1.0, 0.3, -0.7, 1.6], dtype)
    for dim in ((2, 6) if dtype == jnp.float64 else (4,)):
        layer = randomize(LAYERS[name](dim, key=key(), dtype=dtype), rng, 0.3)
        Z = normal(rng, (4, dim), dtype)
        res = residuals(layer, Z, H)
        assert res.dtype == dtype
        assert float(jnp.max(res)) <= tol(dtype, "structure"), res
        # the layer really moves points, and conserves its ridge variable and Hamiltonian
        out = jax.vmap(layer)(Z)
        assert float(jnp.max(jnp.abs(out - Z))) > 1e-3
        w = layer.w.astype(dtype)
        np.testing.assert_allclose(out @ w, Z @ w, rtol=0, atol=10 * tol(dtype))
        if dtype == jnp.float64:
            np.testing.assert_allclose(
                jax.vmap(layer.hamiltonian)(out), jax.vmap(layer.hamiltonian)(Z), rtol=1e-12, atol=1e-12
            )


def test_layer_is_the_exact_flow_of_its_hamiltonian(rng, key):
    """The curve h ↦ layer(z, h) starts at z and solves ż = J∇H(z), H = layer.hamiltonian
    (∇H by autodiff, independently of the layer's closed form): it is the exact flow."""
    J = symplectic_matrix(2, dtype=jnp.float64)
    for name in LAYERS:
        layer = randomize(LAYERS[name](4, key=key()), rng, 0.5)
        z = normal(rng, (4,))
        np.testing.assert_array_equal(layer(z, 0.0), z)
        for h in (0.0, 0.4, -1.3):
            velocity = jax.jacfwd(lambda s: layer(z, s))(h)
            field = J @ jax.grad(layer.hamiltonian)(layer(z, h))
            np.testing.assert_allclose(velocity, field, rtol=1e-10, atol=1e-12, err_msg=name)


def test_negative_control_unconstrained_ridge_is_not_symplectic(rng, key):
    """The same update with a direction v ≠ Jw (an unconstrained 'ridge shear') fails."""
    layer = randomize(PolynomialRidgeLayer(4, max_degree=3, key=key()), rng, 0.7)
    v = normal(rng, (4,))

    def unconstrained(z):
        return z + layer._slope(jnp.dot(layer.w, z)) * v

    Z = normal(rng, (4, 4))
    res = jax.vmap(lambda z: symplecticity_residual(unconstrained, z))(Z)
    assert float(jnp.min(res)) > 1e-3


@pytest.mark.parametrize("name", list(MODELS))
def test_model_symplectic_for_random_parameters(name, rng, key, tol, dtype):
    # Random parameters of a scale that keeps the Jacobian moderate, as for a trained
    # one-step map (the residual's round-off grows like ‖Jacobian‖²).
    H = jnp.asarray([1.0, 0.3, -0.7, 1.2], dtype)
    for dim in ((2, 6) if dtype == jnp.float64 else (4,)):
        model = randomize(MODELS[name](dim, key=key(), dtype=dtype), rng, 0.25)
        assert isinstance(model, AbstractFeedForwardIntegrator) and model.structure == "symplectic"
        res = residuals(model, normal(rng, (4, dim), dtype), H)
        assert float(jnp.max(res)) <= tol(dtype, "structure"), res


def test_negative_control_model_of_unconstrained_layers(rng, key):
    model = randomize(PSympNet(4, n_layers=4, key=key()), rng, 0.5)
    V = normal(rng, (4, 4))

    def unconstrained(z):
        for i in range(4):
            layer = model.layer(i)
            z = z + layer._slope(jnp.dot(layer.w, z)) * V[i]
        return z

    assert float(symplecticity_residual(unconstrained, normal(rng, (4,)))) > 1e-3


@pytest.mark.parametrize("name", list(MODELS))
def test_inverse_and_step_size(name, rng, key):
    model = randomize(MODELS[name](4, key=key()), rng, 0.3)
    z = normal(rng, (4,))
    for h in (None, 0.4, -1.2):
        out = model(z, h)
        assert float(jnp.max(jnp.abs(out - z))) > 1e-3
        np.testing.assert_allclose(model.inverse(out, h), z, rtol=0, atol=1e-12)
        np.testing.assert_allclose(model(model.inverse(z, h), h), z, rtol=0, atol=1e-12)
    np.testing.assert_allclose(model(z), model(z, 1.0), rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(model(z, 0.0), z, rtol=0, atol=1e-15)


def test_layers_are_stacked_and_scanned(key):
    model = PSympNet(4, n_layers=5, max_degree=4, key=key())
    assert model.layers.w.shape == (5, 4) and model.layers.a.shape == (5, 3)
    z = jnp.arange(4.0) / 4
    out = z
    for i in range(5):
        out = model.layer(i)(out)
    np.testing.assert_allclose(model(z), out, rtol=0, atol=1e-14)
    with pytest.raises(IndexError):
        model.layer(5)


def test_parameter_counts(key):
    assert n_params(eqx.filter_eval_shape(PSympNet, 6, n_layers=7, max_degree=5, min_degree=2, key=key())) == 7 * (6 + 4)
    assert n_params(eqx.filter_eval_shape(RSympNet, 6, n_layers=7, width=4, key=key())) == 7 * (6 + 12)


# --------------------------------------------------------------------------- jit / vmap / dtype / grad


@pytest.mark.parametrize("name", list(MODELS))
def test_jit_vmap_grad_and_dtype(name, rng, key, dtype, tol):
    model = randomize(MODELS[name](4, key=key(), dtype=jnp.float64), rng, 0.5)
    Z = normal(rng, (3, 4), dtype)
    out = jax.vmap(model)(Z)
    assert out.dtype == dtype and out.shape == Z.shape
    loop = jnp.stack([model(z) for z in Z])
    np.testing.assert_allclose(out, loop, rtol=0, atol=tol(dtype))
    np.testing.assert_allclose(eqx.filter_jit(model)(Z[0]), model(Z[0]), rtol=0, atol=tol(dtype))
    hs = jnp.asarray([0.1, 0.5, -0.3], dtype)
    np.testing.assert_allclose(
        jax.vmap(model)(Z, hs), jnp.stack([model(z, h) for z, h in zip(Z, hs)]), rtol=0, atol=tol(dtype)
    )
    grads = eqx.filter_grad(lambda m: jnp.sum(jax.vmap(m)(Z) ** 2))(model)
    leaves = jax.tree_util.tree_leaves(eqx.filter(grads, eqx.is_inexact_array))
    assert leaves and all(bool(jnp.all(jnp.isfinite(g))) for g in leaves)


# --------------------------------------------------------------------------- errors, registry


def test_errors_name_expected_and_received(key):
    with pytest.raises(ValueError, match="even"):
        PSympNet(3, n_layers=2, key=key())
    with pytest.raises(ValueError, match="max_degree must be >= min_degree=3, got 2"):
        PSympNet(2, n_layers=2, min_degree=3, key=key())
    with pytest.raises(ValueError, match="min_degree must be >= 1, got 0"):
        PolynomialRidgeLayer(2, min_degree=0, key=key())
    with pytest.raises(ValueError, match="n_layers must be >= 1"):
        RSympNet(2, n_layers=0, key=key())
    with pytest.raises(ValueError, match="unknown activation"):
        RSympNet(2, n_layers=1, activation="nope", key=key())
    with pytest.raises(TypeError, match="symmetric must be a bool"):
        RSympNet(2, n_layers=1, symmetric=1, key=key())
    model = PSympNet(4, n_layers=2, key=key())
    with pytest.raises(ValueError, match="last dimension 4, got shape \\(2,\\)"):
        model(jnp.ones(2))
    with pytest.raises(ValueError, match="scalar"):
        model(jnp.ones(4), jnp.ones(2))


def test_registered_for_the_command_line(key):
    for name, cls in (("psympnet", PSympNet), ("rsympnet", RSympNet)):
        spec = REGISTRY[name]
        assert spec.cls is cls and spec.structure == "symplectic" and spec.needs_canonical
        model = spec.build(4, key=key())
        assert isinstance(model, cls) and model.dim == 4


# --------------------------------------------------------------------------- reproduction


def test_harmonic_oscillator_to_machine_precision(key):
    """Tapley's headline example: SHO, dt = 0.05, train on t ∈ [0, 1], test on [1, 4],
    P-SympNet with 2 layers of degree 2, Adam 1e-2, 1000 full-batch epochs, float64."""
    dt = 0.05
    t = np.arange(81) * dt
    traj = np.stack([np.cos(t), -np.sin(t)], axis=-1)
    train = gl.TrajectoryData(jnp.asarray(traj[None, :21]), dt)
    model = PSympNet(2, n_layers=2, key=jax.random.PRNGKey(0))
    model, history = gl.fit(
        model, train, epochs=1000, optimizer=optax.adam(1e-2), loss="mse",
        key=key(), progress=False,
    )
    assert history["loss"][-1] < 1e-28
    rollout = gl.iterate(model, jnp.asarray(traj[20]), 61)
    assert float(jnp.max(jnp.linalg.norm(rollout - traj[20:], axis=-1))) < 1e-13
