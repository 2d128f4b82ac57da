"""Attention layers: MultiHeadAttention and the (linear) symplectic attention pairs."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn
from geomlearn import (
    LinearSymplecticAttentionP,
    LinearSymplecticAttentionQ,
    MultiHeadAttention,
    PositionalEncoding,
    SymplecticAttentionP,
    SymplecticAttentionQ,
)
from geomlearn.geometry import symplecticity_residual

from _helpers import n_params, randomize

RNG_SEED = 20261130  # the `rng` fixture's seed (tests/conftest.py)

SEQ_LENGTHS = (1, 2, 4, 7)
HALF_DIMS = (1, 2)


def window(rng, T, d, dtype=jnp.float64):
    return jnp.asarray(rng.standard_normal((T, d)), dtype)


def make_pair(family, dim, T, key, rng, dtype):
    """The (Q, P) layers of a family with random O(1) parameters."""
    if family == "linear":
        q = LinearSymplecticAttentionQ(dim, T, key=key(), dtype=dtype)
        p = LinearSymplecticAttentionP(dim, T, key=key(), dtype=dtype)
    else:
        q = SymplecticAttentionQ(dim, key=key(), dtype=dtype)
        p = SymplecticAttentionP(dim, key=key(), dtype=dtype)
    return randomize(q, rng, 0.5), randomize(p, rng, 0.5)


def run_compiled(f, *args):
    """`f(*args)` as one compiled program, compiled without XLA's backend optimisations.

    The test programs are tiny and run once, so optimising them costs far more than it
    saves; one program per configuration also avoids compiling every primitive eagerly.
    """
    dynamic, static = eqx.partition(args, eqx.is_array)

    def g(dynamic):
        return f(*eqx.combine(dynamic, static))

    lowered = jax.jit(g).lower(dynamic)
    for options in _FAST_COMPILE_OPTIONS:
        try:
            compiled = lowered.compile(options)
            break
        except Exception:  # an XLA without one of these options: try the next
            continue
    return compiled(dynamic)


_FAST_COMPILE_OPTIONS = (
    {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False},
    {"xla_backend_optimization_level": 0},
    None,
)


def residual(f, Z):
    """`symplecticity_residual(f, Z)` as one compiled program."""
    return run_compiled(symplecticity_residual, f, Z)


def call(f, Z):
    """`f(Z)` as one compiled program."""
    return run_compiled(lambda f, Z: f(Z), f, Z)


def structure_check(layers, Z):
    """Each layer's product-space residual at `Z`, alone and behind a PositionalEncoding,
    and how far each layer moves `Z` (one compiled program per configuration)."""
    return run_compiled(_structure_check, layers, Z)


def _structure_check(layers, Z):
    pe = PositionalEncoding(Z.shape[-1])
    residuals, moves = [], []
    for layer in layers:
        residuals.append(symplecticity_residual(layer, Z))
        residuals.append(symplecticity_residual(lambda W, layer=layer: layer(pe(W)), Z))
        moves.append(jnp.max(jnp.abs(layer(Z) - Z)))
    return jnp.stack(residuals), jnp.stack(moves)


# --------------------------------------------------------------------------------------
# Symplecticity of both symplectic families


@pytest.mark.parametrize("family", ["linear", "nonlinear"])
def test_symplectic_on_product_space(family, dtype, key, rng, tol):
    configs = [(T, n) for T in SEQ_LENGTHS for n in HALF_DIMS]
    cases = [
        (make_pair(family, 2 * n, T, key, rng, dtype), window(rng, T, 2 * n, dtype))
        for T, n in configs
    ]
    # All configurations in one compiled program.
    results = run_compiled(lambda cases: [_structure_check(*case) for case in cases], cases)
    for (T, n), (res, moves) in zip(configs, results):
        assert res.dtype == dtype
        assert bool(jnp.all(jnp.isfinite(res)))
        assert float(jnp.max(res)) <= tol(dtype, "structure"), (T, n, res)
        # The layers did something (a no-op would pass trivially).
        assert float(jnp.min(moves)) > 1e-6, (T, n, moves)


def test_structure_negative_control_nonsymmetric_linear_attention(key, rng):
    """Q ← Q + B P with a non-symmetric B mixes time steps non-symplectically."""
    T, n = 4, 2
    layer = randomize(LinearSymplecticAttentionQ(2 * n, T, key=key()), rng, 0.5)
    A = layer.matrix()
    S = jnp.asarray(rng.standard_normal((T, T)))
    B = A + 0.5 * (S - S.T)  # add a skew part

    def unconstrained(Z):
        return jnp.concatenate([Z[:, :n] + B @ Z[:, n:], Z[:, n:]], axis=1)

    Z = window(rng, T, 2 * n)
    assert residual(layer, Z) <= 1e-12
    assert residual(unconstrained, Z) > 1e-3


def test_structure_negative_control_columnwise_softmax(key, rng):
    """The row-wise-softmax attention Q ← Q + softmax(PAPᵀ) P A is not a gradient, so it
    is not symplectic, while the matrix-softmax layer with the same A is."""
    T, n = 4, 2
    layer = randomize(SymplecticAttentionQ(2 * n, key=key()), rng, 0.5)
    A = layer.matrix()

    def rowwise(Z):
        P = Z[:, n:]
        W = jax.nn.softmax(P @ A @ P.T, axis=-1)
        return jnp.concatenate([Z[:, :n] + W @ P @ A, P], axis=1)

    Z = window(rng, T, 2 * n)
    assert residual(layer, Z) <= 1e-12
    assert residual(rowwise, Z) > 1e-3


def test_multihead_attention_is_not_symplectic(key, rng):
    layer = randomize(MultiHeadAttention(4, 2, key=key()), rng, 0.5)
    Z = window(rng, 4, 4)
    assert residual(layer, Z) > 1e-3


# --------------------------------------------------------------------------------------
# Formulas


def _symmetric_from_upper(v, m):
    A = np.zeros((m, m))
    A[np.triu_indices(m)] = np.asarray(v)
    return A + A.T - np.diag(np.diag(A))


@pytest.mark.parametrize("cls", [LinearSymplecticAttentionQ, LinearSymplecticAttentionP])
def test_linear_symplectic_attention_formula(cls, key, rng):
    T, n = 5, 2
    layer = randomize(cls(2 * n, T, key=key()), rng, 1.0)
    assert n_params(layer) == T * (T + 1) // 2 == 15
    A = _symmetric_from_upper(layer.weights, T)
    np.testing.assert_array_equal(layer.matrix(), A)
    np.testing.assert_array_equal(A, A.T)
    Z = rng.standard_normal((T, 2 * n))
    Q, P = Z[:, :n], Z[:, n:]
    expected = (
        np.hstack([Q + A @ P, P]) if cls is LinearSymplecticAttentionQ else np.hstack([Q, P + A @ Q])
    )
    np.testing.assert_allclose(call(layer, jnp.asarray(Z)), expected, rtol=0, atol=1e-13)


@pytest.mark.parametrize("cls", [SymplecticAttentionQ, SymplecticAttentionP])
def test_symplectic_attention_is_the_matrix_softmax_gradient(cls, key, rng):
    """Against the closed form ∇F(X) = T W X A, W = softmax over all T² entries of XAXᵀ."""
    n = 2
    layer = randomize(cls(2 * n, key=key()), rng, 1.0)
    assert n_params(layer) == n * (n + 1) // 2 == 3
    A = _symmetric_from_upper(layer.weights, n)
    np.testing.assert_array_equal(layer.matrix(), A)
    for T in (1, 3, 6):
        Z = rng.standard_normal((T, 2 * n))
        Q, P = Z[:, :n], Z[:, n:]
        X = P if cls is SymplecticAttentionQ else Q
        C = X @ A @ X.T
        W = np.exp(C - C.max())
        W /= W.sum()
        update = T * W @ X @ A
        expected = np.hstack([Q + update, P]) if cls is SymplecticAttentionQ else np.hstack(
            [Q, P + update]
        )
        np.testing.assert_allclose(call(layer, jnp.asarray(Z)), expected, rtol=1e-12, atol=1e-12)


def test_symplectic_attention_potential_is_stable_for_large_scores(key, rng):
    layer = randomize(SymplecticAttentionQ(4, key=key()), rng, 1.0)
    Z = 300.0 * window(rng, 5, 4)  # scores ~ 1e5: exp would overflow
    out = layer(Z)
    assert jnp.all(jnp.isfinite(out))
    assert jnp.isfinite(layer.potential(Z[:, 2:]))


def test_multihead_attention_formula(key, rng):
    dim, H, T = 6, 3, 5
    layer = randomize(MultiHeadAttention(dim, H, key=key()), rng, 1.0)
    assert n_params(layer) == 3 * dim**2
    Z = rng.standard_normal((T, dim))
    heads = []
    for h in range(H):
        q = Z @ np.asarray(layer.W_Q[h])
        k = Z @ np.asarray(layer.W_K[h])
        v = Z @ np.asarray(layer.W_V[h])
        s = q @ k.T / math.sqrt(dim // H)  # per-head scaling √(dim/n_heads)
        w = np.exp(s - s.max(axis=1, keepdims=True))
        w /= w.sum(axis=1, keepdims=True)  # softmax over the keys
        heads.append(w @ v)
    attention = np.hstack(heads)
    np.testing.assert_allclose(call(layer, jnp.asarray(Z)), Z + attention, rtol=1e-12, atol=1e-12)
    plain = MultiHeadAttention(dim, H, add_connection=False, key=key())
    plain = eqx.tree_at(
        lambda m: (m.W_Q, m.W_K, m.W_V), plain, (layer.W_Q, layer.W_K, layer.W_V)
    )
    np.testing.assert_allclose(call(plain, jnp.asarray(Z)), attention, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------------------
# Order


def _permutation_gap(layer, Z, perm):
    return float(jnp.max(jnp.abs(call(layer, Z[perm]) - call(layer, Z)[perm])))


@pytest.mark.parametrize(
    "make",
    [
        lambda k: MultiHeadAttention(4, 2, key=k),
        lambda k: SymplecticAttentionQ(4, key=k),
        lambda k: SymplecticAttentionP(4, key=k),
    ],
)
def test_softmax_attentions_are_permutation_equivariant(make, key, rng):
    layer = randomize(make(key()), rng, 0.5)
    Z = window(rng, 6, 4)
    perm = jnp.array([3, 0, 5, 1, 4, 2])
    assert _permutation_gap(layer, Z, perm) <= 1e-12
    # With the positional encoding in front, the order becomes visible.
    pe = PositionalEncoding(4)
    assert _permutation_gap(lambda W: layer(pe(W)), Z, perm) > 1e-3


@pytest.mark.parametrize("cls", [LinearSymplecticAttentionQ, LinearSymplecticAttentionP])
def test_linear_symplectic_attention_is_order_aware(cls, key, rng):
    layer = randomize(cls(4, 6, key=key()), rng, 0.5)
    Z = window(rng, 6, 4)
    perm = jnp.array([3, 0, 5, 1, 4, 2])
    assert _permutation_gap(layer, Z, perm) > 1e-3


# --------------------------------------------------------------------------------------
# Transformations, dtypes, errors

ALL_LAYERS = [
    ("mha", lambda k, dt: MultiHeadAttention(4, 2, key=k, dtype=dt)),
    ("linQ", lambda k, dt: LinearSymplecticAttentionQ(4, 3, key=k, dtype=dt)),
    ("linP", lambda k, dt: LinearSymplecticAttentionP(4, 3, key=k, dtype=dt)),
    ("symQ", lambda k, dt: SymplecticAttentionQ(4, key=k, dtype=dt)),
    ("symP", lambda k, dt: SymplecticAttentionP(4, key=k, dtype=dt)),
]


@pytest.mark.parametrize("make", [m for _, m in ALL_LAYERS], ids=[i for i, _ in ALL_LAYERS])
def test_jit_vmap_grad_dtype(make, dtype, key, rng, tol):
    layer = randomize(make(key(), dtype), rng, 0.5)
    Zs = jnp.asarray(rng.standard_normal((3, 3, 4)), dtype)
    out = layer(Zs[0])
    assert out.shape == (3, 4) and out.dtype == dtype
    close = dict(rtol=tol(dtype), atol=tol(dtype))

    def loss(m):
        return jnp.sum(jax.vmap(m)(Zs) ** 2)

    def program(m, Zs):
        grads = eqx.filter_grad(loss)(m)
        return m(Zs[0]), jax.vmap(m)(Zs), jnp.stack([m(Z) for Z in Zs]), grads

    jitted, batched, looped, g = run_compiled(program, layer, Zs)
    np.testing.assert_allclose(jitted, out, **close)  # jit == eager
    np.testing.assert_allclose(batched, looped, **close)
    leaves = [leaf for leaf in jax.tree_util.tree_leaves(g) if eqx.is_inexact_array(leaf)]
    assert leaves and all(bool(jnp.all(jnp.isfinite(leaf))) for leaf in leaves)
    assert any(float(jnp.max(jnp.abs(leaf))) > 0 for leaf in leaves)


@pytest.mark.parametrize("make", [m for _, m in ALL_LAYERS], ids=[i for i, _ in ALL_LAYERS])
def test_parameters_and_input_of_different_dtypes(make, key, rng):
    layer = make(key(), jnp.float64)
    assert all(leaf.dtype == jnp.float64 for leaf in jax.tree_util.tree_leaves(layer))
    Z = window(rng, 3, 4, jnp.float32)
    assert layer(Z).dtype == jnp.float32
    layer32 = make(key(), jnp.float32)
    assert layer32(Z.astype(jnp.float64)).dtype == jnp.float64


@pytest.mark.parametrize("make", [m for _, m in ALL_LAYERS], ids=[i for i, _ in ALL_LAYERS])
def test_bad_inputs(make, key):
    layer = make(key(), None)
    with pytest.raises(ValueError, match="last dimension 4"):
        layer(jnp.ones((3, 6)))
    with pytest.raises(ValueError, match="2-d"):
        layer(jnp.ones(4))
    with pytest.raises(ValueError, match="2-d"):
        layer(jnp.ones((2, 3, 4)))
    with pytest.raises(TypeError, match="floating"):
        layer(jnp.ones((3, 4), dtype=jnp.int32))


def test_constructor_errors(key):
    with pytest.raises(ValueError, match=r"n_heads must divide dim.*dim=6, n_heads=4"):
        MultiHeadAttention(6, 4, key=key())
    for cls in (SymplecticAttentionQ, SymplecticAttentionP):
        with pytest.raises(ValueError, match="even"):
            cls(3, key=key())
    for cls in (LinearSymplecticAttentionQ, LinearSymplecticAttentionP):
        with pytest.raises(ValueError, match="even"):
            cls(5, 3, key=key())
        with pytest.raises(ValueError, match="seq_length must be >= 1"):
            cls(4, 0, key=key())


@pytest.mark.parametrize("cls", [LinearSymplecticAttentionQ, LinearSymplecticAttentionP])
def test_linear_attention_rejects_wrong_length(cls, key):
    layer = cls(4, 3, key=key())
    with pytest.raises(ValueError, match=r"seq_length=3.*length 5"):
        layer(jnp.ones((5, 4)))


def test_default_dtype_and_exports(key):
    assert SymplecticAttentionQ(4, key=key()).weights.dtype == jnp.float64  # x64 on
    for name in (
        "MultiHeadAttention",
        "LinearSymplecticAttentionQ",
        "LinearSymplecticAttentionP",
        "SymplecticAttentionQ",
        "SymplecticAttentionP",
    ):
        assert getattr(geomlearn, name) is getattr(geomlearn.layers, name)


def test_fresh_layers_are_near_identity(key, rng):
    """The default initialisation is a small perturbation of the identity."""
    Z = window(rng, 5, 4)
    for layer in (
        SymplecticAttentionQ(4, key=key()),
        SymplecticAttentionP(4, key=key()),
        LinearSymplecticAttentionQ(4, 5, key=key()),
        LinearSymplecticAttentionP(4, 5, key=key()),
    ):
        gap = float(jnp.max(jnp.abs(layer(Z) - Z)))
        assert 0 < gap < 1.0
