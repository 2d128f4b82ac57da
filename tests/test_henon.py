"""The Hénon layer (geomlearn.layers.henon); the HenonNet model is tested in test_sympnet.py."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn

from _helpers import n_params, normal, randomize
from geomlearn.geometry import symplecticity_residual, volume_residual
from geomlearn.layers import HenonLayer

RNG_SEED = 314  # the `rng` fixture's seed (tests/conftest.py)


# One hidden width throughout: each new parameter shape compiles the random initialiser.
WIDTH = 5


@eqx.filter_jit
def residuals(layers, Zs, H):
    """Residuals for every layer (with its points in `Zs`), point and step: (L, P, S)."""

    def one(layer, Z):
        per_point = lambda z: jax.vmap(  # noqa: E731
            lambda h: symplecticity_residual(lambda v: layer(v, h), z)
        )(H)
        return jax.vmap(per_point)(Z)

    return jnp.stack([one(layer, Z) for layer, Z in zip(layers, Zs)])


def grad_v_numpy(layer, y):
    """∇V(y) = Kᵀ(a ⊙ tanh'(Ky + b)), written out by hand (tanh' = 1 − tanh²)."""
    K, a, b = (np.asarray(x) for x in (layer.K, layer.a, layer.b))
    return K.T @ (a * (1.0 - np.tanh(K @ y + b) ** 2))


def test_public_name():
    assert geomlearn.HenonLayer is HenonLayer


@pytest.mark.parametrize("n", [1, 2, 3])
def test_parameter_count(key, n):
    layer = eqx.filter_eval_shape(HenonLayer, 2 * n, 7, key=key())
    assert n_params(layer) == 7 * (n + 2) + n
    assert layer.K.shape == (7, n) and layer.eta.shape == (n,)


def test_initialisation(key):
    layer = HenonLayer(4, WIDTH, key=key())
    assert n_params(layer) == WIDTH * 4 + 2
    np.testing.assert_array_equal(layer.eta, 0.0)
    np.testing.assert_array_equal(layer.b, 0.0)
    assert np.max(np.abs(layer.a)) > 0


def test_matches_four_henon_maps_by_hand(rng, key):
    n, h = 2, 0.7
    layer = randomize(HenonLayer(2 * n, WIDTH, key=key()), rng)
    z = np.asarray(normal(rng, (2 * n,)))
    eta = np.asarray(layer.eta)
    x, y = z[:n], z[n:]
    for _ in range(4):
        x, y = y + eta, -x + h * grad_v_numpy(layer, y)
    np.testing.assert_allclose(layer(jnp.asarray(z), h), np.concatenate([x, y]), atol=1e-13)
    # h=None is h=1
    x, y = z[:n], z[n:]
    for _ in range(4):
        x, y = y + eta, -x + grad_v_numpy(layer, y)
    np.testing.assert_allclose(layer(jnp.asarray(z)), np.concatenate([x, y]), atol=1e-13)
    # the potential is the scalar network a·tanh(Ky + b)
    yy = z[n:]
    expected_v = np.asarray(layer.a) @ np.tanh(np.asarray(layer.K) @ yy + np.asarray(layer.b))
    np.testing.assert_allclose(layer.potential(jnp.asarray(yy)), expected_v, rtol=1e-14)


def test_symplectic_for_random_parameters_and_steps(rng, key, tol, dtype):
    """n ∈ {1, 2, 3}, three random parameter draws each, four points, four steps. (Random
    parameters of scale 0.5 keep the Jacobian moderate: the residual's round-off grows like
    its squared norm, and at scale 1 with h = 2 that norm reaches 10³.)"""
    H = jnp.asarray([1.0, 0.25, -0.8, 2.0], dtype)
    ns = (1, 2, 3)
    for _ in range(3):  # the same compiled function for every draw
        layers = tuple(
            randomize(HenonLayer(2 * n, WIDTH, key=key(), dtype=dtype), rng, 0.5) for n in ns
        )
        Zs = tuple(normal(rng, (4, 2 * n), dtype) for n in ns)
        res = residuals(layers, Zs, H)
        assert res.shape == (len(ns), 4, 4) and res.dtype == dtype
        assert np.max(res) <= tol(dtype, "structure"), np.max(res, axis=(1, 2))


def test_negative_control_non_gradient_potential(rng):
    """The same four maps with a field that is not a gradient (Kᵀ replaced by another
    matrix) preserve volume but are not symplectic; the residual must see it."""
    n, w = 2, 5
    K1, K2 = np.asarray(normal(rng, (w, n))), np.asarray(normal(rng, (w, n)))
    a, b = np.asarray(normal(rng, (w,))), np.asarray(normal(rng, (w,)))

    def bad(z):
        x, y = z[:n], z[n:]
        for _ in range(4):
            x, y = y, -x + K2.T @ (a * (1.0 - jnp.tanh(K1 @ y + b) ** 2))
        return jnp.concatenate([x, y])

    z = normal(rng, (2 * n,))
    assert symplecticity_residual(bad, z) > 1e-3
    assert volume_residual(bad, z) <= 1e-12


def test_inverse_round_trip(rng, key):
    for n in (1, 3):
        layer = randomize(HenonLayer(2 * n, WIDTH, key=key()), rng)
        z = normal(rng, (2 * n,))
        for h in (None, 0.3, -1.7):
            out = layer(z, h)
            assert np.max(np.abs(out - z)) > 1e-3
            np.testing.assert_allclose(layer.inverse(out, h), z, rtol=0, atol=1e-12)
            np.testing.assert_allclose(layer(layer.inverse(z, h), h), z, rtol=0, atol=1e-12)


def test_zero_step_is_identity_whatever_eta(rng, key):
    layer = randomize(HenonLayer(4, WIDTH, key=key()), rng, scale=2.0)
    assert np.min(np.abs(layer.eta)) > 0
    z = normal(rng, (4,))
    np.testing.assert_allclose(layer(z, 0.0), z, rtol=0, atol=1e-14)
    np.testing.assert_allclose(layer.inverse(z, 0.0), z, rtol=0, atol=1e-14)


def test_first_order_in_h_is_the_documented_separable_flow(rng, key):
    """∂_h layer(q, p; h) at h = 0 is (−∇W(p), ∇W(q − η)), W(y) = V(y) + V(−y − η)."""
    n = 2
    layer = randomize(HenonLayer(2 * n, WIDTH, key=key()), rng)
    z = normal(rng, (2 * n,))
    q, p = np.asarray(z[:n]), np.asarray(z[n:])
    eta = np.asarray(layer.eta)

    def grad_w(y):
        return grad_v_numpy(layer, y) - grad_v_numpy(layer, -y - eta)

    expected = np.concatenate([-grad_w(p), grad_w(q - eta)])
    derivative = jax.jacfwd(lambda s: layer(z, s))(0.0)
    np.testing.assert_allclose(derivative, expected, rtol=1e-12, atol=1e-12)
    assert np.max(np.abs(expected)) > 1e-2
    for h in (1e-2, 1e-3):  # and the map is first-order close to z + h·derivative
        assert np.max(np.abs(layer(z, h) - z - h * expected)) <= 1e3 * h**2


def test_jit_vmap_grad(rng, key):
    layer = randomize(HenonLayer(4, WIDTH, key=key()), rng)
    Z = normal(rng, (5, 4))
    hs = jnp.asarray(rng.uniform(0.1, 1.5, 5))
    jitted = eqx.filter_jit(lambda m, z: m(z))(layer, Z[0])
    np.testing.assert_allclose(jitted, layer(Z[0]), rtol=0, atol=1e-14)
    jitted_inv = eqx.filter_jit(lambda m, z, h: m.inverse(z, h))(layer, Z[0], hs[0])
    np.testing.assert_allclose(jitted_inv, layer.inverse(Z[0], hs[0]), atol=1e-14)
    batched = jax.vmap(layer)(Z, hs)
    np.testing.assert_allclose(
        batched, jnp.stack([layer(z, h) for z, h in zip(Z, hs)]), rtol=0, atol=1e-14
    )

    def loss(m):
        return jnp.mean((jax.vmap(m)(Z, hs) - Z) ** 2)

    grads = jax.tree_util.tree_leaves(eqx.filter_jit(eqx.filter_grad(loss))(layer))
    assert len(grads) == 4
    assert all(np.all(np.isfinite(g)) and np.max(np.abs(g)) > 0 for g in grads)


def test_dtype_in_equals_dtype_out(rng, key, dtype):
    z = normal(rng, (4,), dtype)
    for param_dtype in (jnp.float32, jnp.float64):
        layer = HenonLayer(4, WIDTH, key=key(), dtype=param_dtype)
        assert all(x.dtype == param_dtype for x in jax.tree_util.tree_leaves(layer))
        assert layer(z).dtype == dtype
        assert layer.inverse(z, 0.5).dtype == dtype


def test_errors(key):
    with pytest.raises(ValueError, match="even"):
        HenonLayer(3, 4, key=key())
    with pytest.raises(ValueError, match="width"):
        HenonLayer(4, 0, key=key())
    with pytest.raises(ValueError, match="unknown activation"):
        HenonLayer(4, 2, "bogus", key=key())
    layer = HenonLayer(4, 2, key=key())
    with pytest.raises(ValueError, match="last dimension 4"):
        layer(jnp.ones(2))
    with pytest.raises(ValueError, match="1-d"):
        layer(jnp.ones((1, 4)))
    with pytest.raises(TypeError, match="floating"):
        layer(jnp.ones(4, dtype=jnp.int32))
    with pytest.raises(ValueError, match="scalar"):
        layer.inverse(jnp.ones(4), jnp.ones(4))
