"""The unconstrained ResNetLayer and ResNet baseline (geomlearn.layers.resnet, models.resnet)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn

from _helpers import n_params, normal, randomize
from geomlearn.geometry import symplecticity_residual, volume_residual
from geomlearn.layers import ResNetLayer
from geomlearn.models import AbstractFeedForwardIntegrator, ResNet

RNG_SEED = 2718  # the `rng` fixture's seed (tests/conftest.py)


shapes_only = eqx.filter_eval_shape
WIDTH = 5  # one hidden width throughout: each new shape compiles the random initialiser


def test_public_names():
    assert geomlearn.ResNetLayer is ResNetLayer
    assert geomlearn.ResNet is ResNet


# --------------------------------------------------------------------------- ResNetLayer


@pytest.mark.parametrize("dim", [1, 3, 4])
def test_layer_parameter_count(key, dim):
    assert n_params(shapes_only(ResNetLayer, dim, key=key())) == dim * dim + dim
    no_bias = shapes_only(ResNetLayer, dim, use_bias=False, key=key())
    assert n_params(no_bias) == dim * dim and no_bias.bias is None


def test_layer_matches_formula_on_points_and_windows(rng, key):
    layer = randomize(ResNetLayer(3, "sigmoid", key=key()), rng)
    W, b = np.asarray(layer.weight), np.asarray(layer.bias)
    X = np.asarray(normal(rng, (5, 3)))
    expected = X + 1.0 / (1.0 + np.exp(-(X @ W.T + b)))
    np.testing.assert_allclose(layer(jnp.asarray(X)), expected, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(layer(jnp.asarray(X[2])), expected[2], rtol=1e-13, atol=1e-13)
    no_bias = ResNetLayer(3, use_bias=False, key=key())
    no_bias = eqx.tree_at(lambda m: m.weight, no_bias, layer.weight)
    np.testing.assert_allclose(no_bias(jnp.asarray(X)), X + np.tanh(X @ W.T), atol=1e-13)


def test_layer_is_not_symplectic_nor_volume_preserving(rng, key):
    """The unconstrained layer is the negative control for the structure tests."""
    layer = randomize(ResNetLayer(4, key=key()), rng)
    z = normal(rng, (4,))
    assert symplecticity_residual(layer, z) > 1e-3
    assert volume_residual(layer, z) > 1e-3


def test_layer_jit_vmap_grad(rng, key):
    layer = randomize(ResNetLayer(3, key=key()), rng)
    X = normal(rng, (4, 5, 3))
    jitted = eqx.filter_jit(lambda m, x: m(x))(layer, X[0])
    np.testing.assert_allclose(jitted, layer(X[0]), rtol=0, atol=1e-14)
    # vmap over windows == loop; the window map == the row map applied row by row
    np.testing.assert_allclose(jax.vmap(layer)(X), jnp.stack([layer(x) for x in X]), atol=1e-14)
    np.testing.assert_allclose(layer(X[0]), jax.vmap(layer)(X[0]), atol=1e-14)
    grads = eqx.filter_grad(lambda m: jnp.sum(jax.vmap(m)(X) ** 2))(layer)
    leaves = jax.tree_util.tree_leaves(grads)
    assert len(leaves) == 2 and all(np.all(np.isfinite(g)) for g in leaves)


def test_layer_dtype_in_equals_dtype_out(rng, key, dtype):
    x = normal(rng, (2, 3), dtype)
    for param_dtype in (jnp.float32, jnp.float64):
        layer = ResNetLayer(3, key=key(), dtype=param_dtype)
        assert layer.weight.dtype == param_dtype and layer.bias.dtype == param_dtype
        assert layer(x).dtype == dtype
        assert layer(x[0]).dtype == dtype


def test_layer_errors(key):
    layer = ResNetLayer(3, key=key())
    with pytest.raises(ValueError, match="last dimension 3"):
        layer(jnp.ones(4))
    with pytest.raises(ValueError, match="1-d or 2-d"):
        layer(jnp.ones((2, 2, 3)))
    with pytest.raises(TypeError, match="floating"):
        layer(jnp.ones(3, dtype=jnp.int32))
    with pytest.raises(ValueError, match="dim"):
        ResNetLayer(0, key=key())
    with pytest.raises(TypeError, match="use_bias"):
        ResNetLayer(3, use_bias=1, key=key())


# --------------------------------------------------------------------------- ResNet model


@pytest.mark.parametrize("dim,width,depth", [(2, 5, 1), (3, 4, 3), (6, 2, 4)])
def test_model_parameter_count(key, dim, width, depth):
    model = shapes_only(ResNet, dim, width=width, depth=depth, key=key())
    assert n_params(model) == depth * (2 * dim * width + width)
    assert model.blocks.W1.shape == (depth, width, dim)


def test_model_matches_formula(rng, key):
    model = randomize(ResNet(3, width=WIDTH, depth=2, key=key()), rng, 0.7)
    z = np.asarray(normal(rng, (3,)))
    h = 0.4
    x = z
    for i in range(2):
        W1, b, W2 = (np.asarray(getattr(model.blocks, f)[i]) for f in ("W1", "b", "W2"))
        x = x + h * W2 @ np.tanh(W1 @ x + b)
    np.testing.assert_allclose(model(jnp.asarray(z), h), x, rtol=1e-13, atol=1e-13)


def test_model_is_not_symplectic(rng, key):
    """Negative control for the SympNet tests: at its initialisation and at random
    parameters, for several step sizes, the residual is far above round-off."""
    fresh = ResNet(4, width=WIDTH, depth=2, key=key())
    assert fresh.structure == "none" and not hasattr(fresh, "inverse")
    z = normal(rng, (4,))
    assert symplecticity_residual(fresh, z) > 1e-3
    model = randomize(fresh, rng, 0.5)
    for h in (1.0, 0.3):
        assert symplecticity_residual(lambda v: model(v, h), z) > 1e-3
    assert volume_residual(model, z) > 1e-3


def test_model_step_size(rng, key):
    model = randomize(ResNet(4, width=WIDTH, depth=2, key=key()), rng, 0.5)
    z = normal(rng, (4,))
    np.testing.assert_array_equal(model(z), model(z, 1.0))
    np.testing.assert_array_equal(model(z, 0.0), z)
    v = jax.jacfwd(lambda s: model(z, s))(0.0)
    assert np.max(np.abs(v)) > 1e-3
    for h in (1e-2, 1e-3, 1e-4):
        assert np.max(np.abs(model(z, h) - z - h * v)) <= 1e3 * h**2


def test_model_jit_vmap_grad(rng, key):
    model = randomize(ResNet(3, width=WIDTH, depth=2, key=key()), rng, 0.5)
    Z = normal(rng, (5, 3))
    hs = jnp.asarray(rng.uniform(0.1, 1.5, 5))
    for h in (None, hs[0]):
        jitted = eqx.filter_jit(lambda m, z: m(z, h))(model, Z[0])
        np.testing.assert_allclose(jitted, model(Z[0], h), rtol=0, atol=1e-14)
    np.testing.assert_allclose(
        jax.vmap(model)(Z, hs), jnp.stack([model(z, h) for z, h in zip(Z, hs)]), atol=1e-14
    )
    grads = eqx.filter_jit(eqx.filter_grad(lambda m: jnp.sum(jax.vmap(m)(Z, hs) ** 2)))(model)
    leaves = jax.tree_util.tree_leaves(grads)
    assert len(leaves) == 3
    assert all(np.all(np.isfinite(g)) and np.max(np.abs(g)) > 0 for g in leaves)


def test_model_dtype_and_config(rng, key, dtype):
    z = normal(rng, (3,), dtype)  # odd dimension: fine for the unconstrained baseline
    for param_dtype in (jnp.float32, jnp.float64):
        model = ResNet(3, width=WIDTH, depth=2, activation="gelu", key=key(), dtype=param_dtype)
        assert isinstance(model, AbstractFeedForwardIntegrator)
        assert model(z).dtype == dtype
        config = model.config()
        assert config == dict(dim=3, width=WIDTH, depth=2, activation="gelu", dtype=param_dtype)
        rebuilt = shapes_only(type(model), **config, key=key())
        assert jax.tree_util.tree_structure(rebuilt) == jax.tree_util.tree_structure(model)
        assert [(x.shape, x.dtype) for x in jax.tree_util.tree_leaves(rebuilt)] == [
            (x.shape, x.dtype) for x in jax.tree_util.tree_leaves(model)
        ]


def test_model_errors(key):
    with pytest.raises(ValueError, match="depth"):
        ResNet(2, width=3, depth=0, key=key())
    with pytest.raises(TypeError, match="width"):
        ResNet(2, width=3.0, depth=1, key=key())
    model = ResNet(2, width=3, depth=1, key=key())
    with pytest.raises(ValueError, match="last dimension 2"):
        model(jnp.ones(3))
    with pytest.raises(ValueError, match="scalar"):
        model(jnp.ones(2), jnp.ones(2))
