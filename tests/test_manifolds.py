"""Stiefel and Grassmann parameters, retractions and Riemannian Adam."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import geomlearn as gl
from geomlearn.manifolds import (
    GrassmannMatrix,
    StiefelMatrix,
    cayley_retraction,
    exp_retraction,
    orthonormality_residual,
    riemannian_adam,
    stiefel_projection,
    stiefel_tangent,
)


def _tangent(key, Y, scale=1.0):
    return stiefel_tangent(Y, scale * jax.random.normal(key, Y.shape, dtype=Y.dtype))


@pytest.mark.parametrize("retraction", [cayley_retraction, exp_retraction])
@pytest.mark.parametrize("scale", [1e-3, 1.0, 10.0])
def test_retractions_stay_on_the_manifold(key, retraction, scale):
    Y = StiefelMatrix.random(12, 4, key=key(), dtype=jnp.float64).value
    assert float(orthonormality_residual(Y)) <= 1e-13
    Y1 = retraction(Y, _tangent(key(), Y, scale))
    assert float(orthonormality_residual(Y1)) <= 1e-12


@pytest.mark.parametrize("retraction", [cayley_retraction, exp_retraction])
def test_retractions_are_first_order(key, retraction):
    Y = StiefelMatrix.random(10, 3, key=key(), dtype=jnp.float64).value
    D = _tangent(key(), Y)
    t = 1e-4
    assert float(jnp.linalg.norm(retraction(Y, t * D) - Y - t * D)) <= 10 * t**2 * float(
        jnp.linalg.norm(D)) ** 2


def test_negative_control_euclidean_step_leaves_the_manifold(key):
    Y = StiefelMatrix.random(12, 4, key=key(), dtype=jnp.float64).value
    assert float(orthonormality_residual(Y + 0.1 * _tangent(key(), Y))) > 1e-4


def test_projection_is_tangent_and_tangent_is_idempotent(key):
    Y = StiefelMatrix.random(9, 3, key=key(), dtype=jnp.float64).value
    G = jax.random.normal(key(), Y.shape, dtype=jnp.float64)
    for D in (stiefel_projection(Y, G), stiefel_tangent(Y, G)):
        A = Y.T @ D
        np.testing.assert_allclose(A, -A.T, atol=1e-13)
    T = stiefel_tangent(Y, G)
    np.testing.assert_allclose(stiefel_tangent(Y, T), T, atol=1e-13)


@pytest.mark.parametrize("retraction", ["cayley", "exp"])
@pytest.mark.parametrize("cls", [StiefelMatrix, GrassmannMatrix])
def test_trace_maximisation_finds_the_leading_eigenvectors(key, retraction, cls):
    N, n = 12, 3
    A = jax.random.normal(key(), (N, N), dtype=jnp.float64)
    A = A @ A.T
    w, V = np.linalg.eigh(np.asarray(A))
    params = {"Y": cls.random(N, n, key=key(), dtype=jnp.float64), "b": jnp.ones(2)}
    opt = riemannian_adam(0.02, retraction=retraction)
    state = opt.init(params)

    def loss(p):
        Y = p["Y"].value
        return -jnp.trace(Y.T @ A @ Y) + jnp.sum(p["b"] ** 2)

    @jax.jit
    def step(p, s):
        g = jax.grad(loss)(p)
        u, s = opt.update(g, s, p)
        return optax.apply_updates(p, u), s

    for _ in range(1500):
        params, state = step(params, state)
    Y = params["Y"].value
    assert float(orthonormality_residual(Y)) <= 1e-12  # after 1500 steps
    np.testing.assert_allclose(-float(loss(params)), w[-n:].sum(), rtol=1e-10)
    P = V[:, -n:] @ V[:, -n:].T
    assert np.linalg.norm(np.asarray(Y @ Y.T) - P) <= 1e-8
    assert float(jnp.max(jnp.abs(params["b"]))) < 1e-3  # plain arrays: plain Adam


def test_riemannian_adam_matches_adam_on_plain_arrays(key):
    params = {"w": jax.random.normal(key(), (3, 2)), "v": jnp.arange(3.0)}
    grads = jax.tree_util.tree_map(lambda x: 0.5 * x + 1.0, params)
    u1, _ = riemannian_adam(1e-2).update(grads, riemannian_adam(1e-2).init(params), params)
    with jax.numpy_dtype_promotion("standard"):  # Optax is not written for strict mode
        u2, _ = optax.adam(1e-2).update(grads, optax.adam(1e-2).init(params), params)
    for a, b in zip(jax.tree_util.tree_leaves(u1), jax.tree_util.tree_leaves(u2)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_update_keeps_dtype_and_jit_equals_eager(key):
    for dtype in (jnp.float32, jnp.float64):
        p = {"Y": StiefelMatrix.random(6, 2, key=key(), dtype=dtype)}
        g = {"Y": StiefelMatrix(jax.random.normal(key(), (6, 2), dtype=dtype))}
        opt = riemannian_adam(1e-2)
        s = opt.init(p)
        u_eager, _ = opt.update(g, s, p)
        u_jit, _ = jax.jit(opt.update)(g, s, p)
        assert u_eager["Y"].value.dtype == dtype
        np.testing.assert_allclose(u_eager["Y"].value, u_jit["Y"].value,
                                   rtol=1e-5 if dtype == jnp.float32 else 1e-12, atol=1e-7)


def test_errors():
    with pytest.raises(ValueError):
        riemannian_adam(retraction="qr")
    with pytest.raises(ValueError):
        StiefelMatrix.random(2, 3, key=jax.random.PRNGKey(0))
    with pytest.raises(ValueError):
        StiefelMatrix(jnp.ones(3))
    opt = riemannian_adam()
    p = {"Y": StiefelMatrix.random(4, 2, key=jax.random.PRNGKey(0))}
    with pytest.raises(ValueError, match="params"):
        opt.update(p, opt.init(p))


@pytest.mark.slow  # a training run
def test_fit_keeps_stiefel_parameters_on_the_manifold(key):
    """A model with a Stiefel leaf trained by geomlearn.fit with riemannian_adam."""
    ae = gl.SymplecticAutoencoder(12, 2, width=4, n_encoder_blocks=1, n_decoder_blocks=1,
                                  key=key(), dtype=jnp.float64)
    X = jax.random.normal(key(), (32, 12), dtype=jnp.float64)
    ae, hist = gl.fit(ae, (X, X), epochs=60, optimizer=riemannian_adam(1e-2), key=key(),
                      progress=False)
    assert hist["loss"][-1] < hist["loss"][0]
    leaves = [x for x in jax.tree_util.tree_leaves(
        ae, is_leaf=lambda x: isinstance(x, StiefelMatrix)) if isinstance(x, StiefelMatrix)]
    assert leaves
    for x in leaves:
        assert float(orthonormality_residual(x.value)) <= 1e-12
