"""SympNet layers: gradient, activation and linear shears (geomlearn.layers.sympnet)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn
from geomlearn.geometry import symplecticity_residual, volume_residual
from geomlearn.layers import (
    ActivationLayerP,
    ActivationLayerQ,
    GradientLayerP,
    GradientLayerQ,
    LinearLayerP,
    LinearLayerQ,
)

from _helpers import n_params, normal, randomize

RNG_SEED = 1729  # the `rng` fixture's seed (tests/conftest.py)

LAYER_CLASSES = [
    GradientLayerQ,
    GradientLayerP,
    ActivationLayerQ,
    ActivationLayerP,
    LinearLayerQ,
    LinearLayerP,
]


# One hidden width throughout the layer and model tests: every distinct parameter shape
# costs a compilation of the random initialiser, which dominates these tests' run time.
WIDTH = 5


def make(cls, dim, *, key, dtype=None, width=WIDTH, activation=jnp.tanh):
    if cls in (GradientLayerQ, GradientLayerP):
        return cls(dim, width, activation, key=key, dtype=dtype)
    if cls in (ActivationLayerQ, ActivationLayerP):
        return cls(dim, activation, key=key, dtype=dtype)
    return cls(dim, key=key, dtype=dtype)


def shapes_only(cls, *args, **kwargs):
    """The module with its arrays replaced by ShapeDtypeStructs: builds no arrays (and so
    compiles nothing) — enough for parameter counts and layouts."""
    return eqx.filter_eval_shape(cls, *args, **kwargs)


def split(z):
    n = z.shape[0] // 2
    return np.asarray(z[:n]), np.asarray(z[n:])


# --------------------------------------------------------------------------- formulas


def test_public_names():
    for cls in LAYER_CLASSES:
        assert getattr(geomlearn, cls.__name__) is cls


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("width", [1, 4, 7])
def test_gradient_layer_parameter_count(key, n, width):
    for cls in (GradientLayerQ, GradientLayerP):
        layer = shapes_only(cls, 2 * n, width, key=key())
        assert n_params(layer) == width * (n + 2)
        assert layer.K.shape == (width, n) and layer.a.shape == (width,)
        assert (layer.dim, layer.width, layer.activation) == (2 * n, width, jnp.tanh)


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_activation_and_linear_parameter_count(key, n):
    for cls in (ActivationLayerQ, ActivationLayerP):
        assert n_params(shapes_only(cls, 2 * n, key=key())) == n
    for cls in (LinearLayerQ, LinearLayerP):
        assert n_params(shapes_only(cls, 2 * n, key=key())) == n * (n + 1) // 2
    # the eval_shape count agrees with a real layer's
    assert n_params(LinearLayerQ(6, key=key())) == 6


def test_gradient_layer_matches_formula(rng, key):
    n, w = 3, WIDTH
    z = normal(rng, (2 * n,))
    h = 0.7
    for cls, changes_q in ((GradientLayerQ, True), (GradientLayerP, False)):
        layer = randomize(cls(2 * n, w, jax.nn.sigmoid, key=key()), rng)
        K, a, b = (np.asarray(x) for x in (layer.K, layer.a, layer.b))
        q, p = split(z)
        x = p if changes_q else q
        inc = h * K.T @ (a / (1.0 + np.exp(-(K @ x + b))))
        expected = np.concatenate([q + inc, p] if changes_q else [q, p + inc])
        np.testing.assert_allclose(layer(z, h), expected, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(layer(z), layer(z, 1.0), rtol=0, atol=0)


def test_activation_layer_matches_formula(rng, key):
    z = normal(rng, (4,))
    for cls, changes_q in ((ActivationLayerQ, True), (ActivationLayerP, False)):
        layer = randomize(cls(4, "sin", key=key()), rng)
        q, p = split(z)
        inc = -0.3 * np.asarray(layer.a) * np.sin(p if changes_q else q)
        expected = np.concatenate([q + inc, p] if changes_q else [q, p + inc])
        np.testing.assert_allclose(layer(z, -0.3), expected, rtol=1e-13, atol=1e-13)


def test_linear_layer_matches_formula_and_is_symmetric(rng, key):
    n = 3
    z = normal(rng, (2 * n,))
    for cls, changes_q in ((LinearLayerQ, True), (LinearLayerP, False)):
        layer = randomize(cls(2 * n, key=key()), rng)
        S = np.asarray(layer.symmetric_matrix())
        np.testing.assert_array_equal(S, S.T)
        # Every upper-triangle entry is an independent parameter, in triu order.
        np.testing.assert_array_equal(S[np.triu_indices(n)], np.asarray(layer.S))
        q, p = split(z)
        expected = np.concatenate([q + 2.0 * S @ p, p] if changes_q else [q, p + 2.0 * S @ q])
        np.testing.assert_allclose(layer(z, 2.0), expected, rtol=1e-13, atol=1e-13)


def test_initialisation_is_near_identity_with_zero_bias(rng, key):
    layer = GradientLayerQ(4, WIDTH, key=key())
    np.testing.assert_array_equal(layer.b, 0.0)
    assert np.std(np.asarray(layer.K)) > 0.1  # Glorot normal: std sqrt(2/7) ≈ 0.53
    z = normal(rng, (4,))
    assert 0 < np.max(np.abs(layer(z) - z)) < 0.5


# --------------------------------------------------------------------------- structure


@eqx.filter_jit
def residuals(layers, Zs, H):
    """Residuals of `v ↦ layer(v, h)` for every layer (any dimensions, `Zs` holding the
    matching points), point and step: shape (len(layers), P, S). One compile per call
    signature, however many layer classes and dimensions."""

    def one(layer, Z):
        per_point = lambda z: jax.vmap(  # noqa: E731
            lambda h: symplecticity_residual(lambda v: layer(v, h), z)
        )(H)
        return jax.vmap(per_point)(Z)

    return jnp.stack([one(layer, Z) for layer, Z in zip(layers, Zs)])


def test_symplectic_for_random_parameters_and_steps(rng, key, tol, dtype):
    """Every layer class, n ∈ {1, 2, 3}, three random parameter draws, three points, four
    step sizes (h = None is exactly h = 1: see test_step_size_scales_the_update)."""
    H = jnp.asarray([1.0, 0.37, -1.3, 4.0], dtype)
    cases = [(cls, n) for n in (1, 2, 3) for cls in LAYER_CLASSES]
    for _ in range(3):
        layers = tuple(
            randomize(make(cls, 2 * n, key=key(), dtype=dtype), rng) for cls, n in cases
        )
        Zs = tuple(normal(rng, (3, 2 * n), dtype) for _, n in cases)
        res = residuals(layers, Zs, H)
        assert res.shape == (len(cases), 3, 4) and res.dtype == dtype
        worst = np.max(res, axis=(1, 2))
        assert np.max(worst) <= tol(dtype, "structure"), dict(zip(map(str, cases), worst))


def test_negative_control_non_symmetric_gradient_part(rng, key):
    """q ← q + K₂ᵀ(a ⊙ σ(K₁p + b)) with K₁ ≠ K₂ is a shear (volume-preserving) but not
    symplectic: the residual test must see it."""
    n, w = 2, 5
    K1, K2 = normal(rng, (w, n)), normal(rng, (w, n))
    a, b = normal(rng, (w,)), normal(rng, (w,))

    def bad(z):
        q, p = z[:n], z[n:]
        return jnp.concatenate([q + K2.T @ (a * jnp.tanh(K1 @ p + b)), p])

    z = normal(rng, (2 * n,))
    assert symplecticity_residual(bad, z) > 1e-3
    assert volume_residual(bad, z) <= 1e-12


def test_negative_control_non_symmetric_linear_part(rng, key):
    n = 2
    A = normal(rng, (n, n))

    def bad(z):
        return jnp.concatenate([z[:n] + A @ z[n:], z[n:]])

    assert symplecticity_residual(bad, normal(rng, (2 * n,))) > 1e-3


@pytest.mark.parametrize("cls", LAYER_CLASSES)
def test_inverse_round_trip(rng, key, cls):
    for n in (1, 2, 3):
        layer = randomize(make(cls, 2 * n, key=key()), rng)
        z = normal(rng, (2 * n,))
        for h in (None, 0.5, -2.0):
            np.testing.assert_allclose(layer.inverse(layer(z, h), h), z, rtol=0, atol=1e-12)
            np.testing.assert_allclose(layer(layer.inverse(z, h), h), z, rtol=0, atol=1e-12)


@pytest.mark.parametrize("cls", LAYER_CLASSES)
def test_step_size_scales_the_update(rng, key, cls):
    """A shear is affine in h: layer(z, h) = z + h·(layer(z) − z); h → 0 is the identity."""
    layer = randomize(make(cls, 4, key=key()), rng)
    z = normal(rng, (4,))
    full = layer(z) - z
    assert np.max(np.abs(full)) > 1e-3
    np.testing.assert_array_equal(layer(z, 0.0), z)
    np.testing.assert_array_equal(layer(z), layer(z, 1.0))  # h=None means h = 1
    for h in (1e-1, 1e-4, 1e-8):
        np.testing.assert_allclose(layer(z, h) - z, h * full, rtol=1e-7, atol=1e-15)
    np.testing.assert_allclose(layer(z, jnp.asarray(0.25)), layer(z, 0.25), rtol=0, atol=0)


# --------------------------------------------------------------------------- transformations


@pytest.mark.parametrize("cls", LAYER_CLASSES)
def test_jit_vmap_grad(rng, key, tol, cls):
    layer = randomize(make(cls, 6, key=key()), rng)
    Z = normal(rng, (5, 6))
    hs = jnp.asarray(rng.uniform(0.1, 2.0, 5))
    # jit == eager
    for h in (None, 0.4):
        np.testing.assert_allclose(
            eqx.filter_jit(lambda m, z: m(z, h))(layer, Z[0]), layer(Z[0], h), rtol=0, atol=1e-14
        )
    # vmap == loop, with one h per sample
    batched = jax.vmap(layer)(Z, hs)
    looped = jnp.stack([layer(z, h) for z, h in zip(Z, hs)])
    np.testing.assert_allclose(batched, looped, rtol=0, atol=1e-14)
    np.testing.assert_allclose(jax.vmap(layer.inverse)(batched, hs), Z, rtol=0, atol=1e-12)

    # finite, non-zero parameter gradients of a loss
    def loss(m):
        return jnp.mean((jax.vmap(m)(Z, hs) - 0.5) ** 2)

    grads = eqx.filter_jit(eqx.filter_grad(loss))(layer)
    leaves = jax.tree_util.tree_leaves(grads)
    assert leaves and all(np.all(np.isfinite(g)) for g in leaves)
    assert any(np.max(np.abs(g)) > 0 for g in leaves)


@pytest.mark.parametrize("cls", LAYER_CLASSES)
def test_dtype_in_equals_dtype_out(rng, key, dtype, cls):
    z = normal(rng, (4,), dtype)
    for param_dtype in (jnp.float32, jnp.float64):
        layer = make(cls, 4, key=key(), dtype=param_dtype)
        assert all(x.dtype == param_dtype for x in jax.tree_util.tree_leaves(layer))
        assert layer(z).dtype == dtype
        assert layer(z, 0.5).dtype == dtype
        assert layer(z, jnp.asarray(0.5, jnp.float64)).dtype == dtype
        assert layer.inverse(z, 0.5).dtype == dtype


def test_default_dtype_is_jax_default(key):
    assert GradientLayerQ(2, WIDTH, key=key()).K.dtype == jnp.float64  # x64 on in the suite


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("cls", LAYER_CLASSES)
def test_errors(key, cls):
    with pytest.raises(ValueError, match="even"):
        make(cls, 3, key=key())
    layer = make(cls, 4, key=key())
    with pytest.raises(ValueError, match="last dimension 4"):
        layer(jnp.ones(6))
    with pytest.raises(ValueError, match="1-d"):
        layer(jnp.ones((2, 4)))
    with pytest.raises(TypeError, match="floating"):
        layer(jnp.ones(4, dtype=jnp.int32))
    with pytest.raises(ValueError, match="scalar"):
        layer(jnp.ones(4), jnp.ones(2))


def test_argument_errors(key):
    with pytest.raises(ValueError, match="width"):
        GradientLayerQ(4, 0, key=key())
    with pytest.raises(TypeError, match="width"):
        GradientLayerP(4, 2.5, key=key())
    with pytest.raises(ValueError, match="unknown activation"):
        ActivationLayerQ(4, "nope", key=key())
    with pytest.raises(TypeError, match="dtype"):
        LinearLayerQ(4, key=key(), dtype=jnp.int32)


def test_activation_by_name_is_stored_as_given(key):
    layer = GradientLayerQ(2, WIDTH, "sigmoid", key=key())
    assert layer.activation == "sigmoid"
    reference = GradientLayerQ(2, WIDTH, jax.nn.sigmoid, key=key())
    reference = eqx.tree_at(lambda m: (m.K, m.a, m.b), reference, (layer.K, layer.a, layer.b))
    z = jnp.array([0.3, -1.2])
    np.testing.assert_array_equal(layer(z), reference(z))
