"""Volume-preserving layers, the feed-forward network and the transformer.

Every structure claim is checked with `geomlearn.geometry.volume_residual` at random
inputs and random parameters (every parameter leaf redrawn), tight in float64, next to a
negative control that must fail: a dense (non-triangular) shear for the layers and the
"arbitrary" attention weighting for the attention and the transformer.

Compile time dominates this file, so the structure checks go through a few jitted
helpers that evaluate several maps in one compilation and are reused across parameter
draws (the parameters are traced, not baked in).
"""

import itertools
import math
import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import _helpers
import geomlearn
from geomlearn import (
    PositionalEncoding,
    VolumePreservingAttention,
    VolumePreservingFeedForward,
    VolumePreservingLowerLayer,
    VolumePreservingTransformer,
    VolumePreservingUpperLayer,
    positional_encoding,
)
from geomlearn.geometry import jacobian, volume_residual
from geomlearn.layers import _linalg, _vp_attention
from geomlearn.models import AbstractFeedForwardIntegrator, AbstractTransformerIntegrator

from _helpers import draw

WINDOW_LENGTHS = (1, 2, 3, 5, 8)
DIMS = (2, 3, 4, 6)
F32_STRUCTURE = 1e-4  # the float32 bound for |det J - 1|
LAYERS = (VolumePreservingLowerLayer, VolumePreservingUpperLayer)

# Cheaper code generation for the many one-off test programs (the arithmetic is the
# same; only the effort spent optimising the generated code is reduced). The default
# compilation is what the jit-equals-eager tests use.
_FAST_COMPILE = {
    "xla_backend_optimization_level": 0,
    "xla_llvm_disable_expensive_passes": True,
    "xla_cpu_use_fusion_emitters": False,
}


def fast_jit(fn):
    return jax.jit(fn, compiler_options=_FAST_COMPILE)


# ---------------------------------------------------------------------------------------
# helpers


def n_params(module) -> int:
    leaves = jax.tree_util.tree_leaves(eqx.filter(module, eqx.is_inexact_array))
    return sum(int(leaf.size) for leaf in leaves)


def shape_of(cls, *args, **kwargs):
    """The skeleton of `cls(*args, **kwargs)` (shapes only, no initialiser run): what
    `randomize` fills with random parameters."""
    return eqx.filter_eval_shape(cls, *args, **kwargs)


def randomize(module, key, scale=0.5):
    """Redraw every parameter leaf from N(0, scale^2): "random parameters" (NumPy draws
    seeded by `key`; `module` may be a skeleton from `shape_of`)."""
    return _helpers.randomize(module, np.random.default_rng(np.asarray(key).ravel().tolist()), scale)


def with_encoding(model):
    """The same transformer (same parameters) with the encoding in front (`"input"`)."""
    config = {**model.config(), "positional_encoding": "input"}
    skeleton_params, static = eqx.partition(
        shape_of(type(model), **config, key=jax.random.PRNGKey(0)), _helpers.is_parameter
    )
    leaves = jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array))
    treedef = jax.tree_util.tree_structure(skeleton_params)
    return eqx.combine(jax.tree_util.tree_unflatten(treedef, leaves), static)


def structure_tol(dtype, tol):
    return tol(dtype, "structure") if np.dtype(dtype) == np.float64 else F32_STRUCTURE


def random_skew(key, T, scale, dtype=jnp.float64):
    X = np.asarray(draw(key, (T, T), dtype, scale))
    return jnp.asarray(X - X.T)


def other_dtype(dtype):
    return jnp.float64 if np.dtype(dtype) == np.float32 else jnp.float32


def out_dtype(f, *args):
    """The dtype of `f(*args)`, from tracing alone (the output dtype is fixed at trace time)."""
    return eqx.filter_eval_shape(f, *args).dtype


class WithStep(eqx.Module):
    """`x ↦ f(x, h)`: a layer or feed-forward model with its step size bound."""

    f: eqx.Module
    h: jax.Array

    def __call__(self, x):
        return self.f(x, self.h)


@fast_jit
def residuals(maps, x):
    """`volume_residual` of every map in the tuple `maps` at `x`, in one compilation."""
    return jnp.stack([volume_residual(f, x) for f in maps])


call = fast_jit(lambda f, *args: f(*args))
_round_trip = fast_jit(lambda f, x, *h: (f.inverse(f(x, *h), *h), f(f.inverse(x, *h), *h)))


def jit_grad(loss, module):
    """The gradient of `loss(module)` with respect to every parameter, jitted."""
    return fast_jit(lambda m: eqx.filter_grad(loss)(m))(module)


def assert_finite_nonzero_grads(grads, *, all_nonzero=False):
    leaves = jax.tree_util.tree_leaves(eqx.filter(grads, eqx.is_inexact_array))
    leaves = [np.asarray(g) for g in leaves]
    assert leaves and all(bool(np.all(np.isfinite(g))) for g in leaves)
    nonzero = [float(np.max(np.abs(g))) > 0 for g in leaves]
    assert all(nonzero) if all_nonzero else any(nonzero)


# ---------------------------------------------------------------------------------------
# lower / upper layers


_matrices = fast_jit(lambda modules: [m.matrix() for m in modules])


@pytest.mark.parametrize("cls", LAYERS)
def test_triangular_matrix_and_parameter_count(cls, key):
    layers = [randomize(shape_of(cls, d, "tanh", key=key()), key()) for d in (1, 2, 3, 5)]
    for layer, W in zip(layers, _matrices(layers)):
        d = layer.dim
        W = np.asarray(W)
        assert W.shape == (d, d)
        if cls is VolumePreservingLowerLayer:
            np.testing.assert_array_equal(np.triu(W), 0)  # strictly lower
            np.testing.assert_array_equal(W[np.tril_indices(d, -1)], layer.weight)
        else:
            np.testing.assert_array_equal(np.tril(W), 0)  # strictly upper
            np.testing.assert_array_equal(W[np.triu_indices(d, 1)], layer.weight)
        assert n_params(layer) == layer.n_params == d * (d - 1) // 2 + d
        no_bias = randomize(shape_of(cls, d, use_bias=False, key=key()), key())
        assert no_bias.bias is None
        assert n_params(no_bias) == no_bias.n_params == d * (d - 1) // 2


@pytest.mark.parametrize("cls", LAYERS)
def test_layer_formula_and_rows(cls, key):
    d = 4
    layer = randomize(shape_of(cls, d, "tanh", key=key()), key())
    linear = randomize(shape_of(cls, d, key=key()), key())
    x = np.asarray(draw(key(), (d,)))
    W, b = np.asarray(layer.matrix()), np.asarray(layer.bias)
    np.testing.assert_allclose(layer(jnp.asarray(x)), x + np.tanh(W @ x + b), rtol=0, atol=1e-14)
    np.testing.assert_allclose(
        layer(jnp.asarray(x), 0.3), x + 0.3 * np.tanh(W @ x + b), rtol=0, atol=1e-14
    )
    Wl, bl = np.asarray(linear.matrix()), np.asarray(linear.bias)
    np.testing.assert_allclose(linear(jnp.asarray(x)), x + Wl @ x + bl, rtol=0, atol=1e-14)
    # A window is mapped row by row.
    Z = np.asarray(draw(key(), (5, d)))
    expected = Z + 0.5 * np.tanh(Z @ W.T + b[None, :])
    np.testing.assert_allclose(layer(jnp.asarray(Z), 0.5), expected, rtol=0, atol=1e-14)


def test_layers_preserve_volume(dtype, key, tol):
    bound = structure_tol(dtype, tol)
    dims = (1, 2, 3, 4, 6) if np.dtype(dtype) == np.float64 else (3,)
    h = jnp.asarray(-0.37, dtype)
    for d in dims:
        for _ in range(2):  # several parameter draws and points

            def make(cls, activation):
                layer = shape_of(cls, d, activation, key=key(), dtype=dtype)
                return randomize(layer, key(), scale=1.0)

            maps = (
                make(VolumePreservingLowerLayer, None),
                make(VolumePreservingLowerLayer, "tanh"),
                make(VolumePreservingUpperLayer, None),
                make(VolumePreservingUpperLayer, "tanh"),
                make(VolumePreservingUpperLayer, jax.nn.sigmoid),
                WithStep(make(VolumePreservingLowerLayer, "tanh"), h),
                WithStep(make(VolumePreservingUpperLayer, None), h),
            )
            assert jnp.all(residuals(maps, draw(key(), (d,), dtype)) <= bound)
            if d == 3:  # a window: each row is mapped
                Z = draw(key(), (5, d), dtype)
                assert jnp.all(residuals(maps, Z) <= bound)


def test_dense_shear_is_a_negative_control(key):
    # The same shear with a dense matrix (diagonal and both triangles) is not volume-
    # preserving: the residual test can fail.
    d = 3
    W = draw(key(), (d, d))
    b = draw(key(), (d,))
    x = draw(key(), (d,))
    shear_residual = fast_jit(lambda W, x: volume_residual(lambda v: v + jnp.tanh(W @ v + b), x))
    assert shear_residual(W, x) > 1e-3
    # ... while keeping only the strict lower triangle restores it.
    assert shear_residual(jnp.tril(W, -1), x) <= 1e-14


@fast_jit
def _layer_round_trips(layers, x, h):
    return [(f.inverse(f(x, h), h), f(f.inverse(x, h), h), f(x, h)) for f in layers]


def test_layer_inverse_round_trip(dtype, key):
    close = 1e-13 if np.dtype(dtype) == np.float64 else 1e-5
    cases = [(1, 1), (6, 2)] if np.dtype(dtype) == np.float64 else [(3, 4)]
    for d, T in cases:
        layers = tuple(
            randomize(shape_of(cls, d, act, key=key(), dtype=dtype), key(), scale=1.0)
            for cls in LAYERS
            for act in (None, "tanh")
        )
        shape = (d,) if T == 1 else (T, d)
        x = draw(key(), shape, dtype)
        for h in (1.0, -0.8):
            for back, forth, y in _layer_round_trips(layers, x, jnp.asarray(h, dtype)):
                assert back.dtype == dtype and back.shape == x.shape
                np.testing.assert_allclose(back, x, rtol=0, atol=close)
                np.testing.assert_allclose(forth, x, rtol=0, atol=close)
                if d > 1:
                    gap = np.asarray(y) - np.asarray(x)
                    assert float(np.max(np.abs(gap))) > 1e-3  # not the identity
    # Eagerly with h=None, and (jitted) the fori_loop path of a large layer.
    layer = randomize(shape_of(VolumePreservingUpperLayer, 3, "tanh", key=key(), dtype=dtype), key())
    x = draw(key(), (2, 3), dtype)
    np.testing.assert_allclose(layer.inverse(layer(x)), x, rtol=0, atol=close)
    if np.dtype(dtype) == np.float64:
        layer = randomize(shape_of(VolumePreservingLowerLayer, 20, "tanh", key=key()), key())
        x = draw(key(), (2, 20))
        for back in _round_trip(layer, x):
            np.testing.assert_allclose(back, x, rtol=0, atol=10 * close)


@pytest.mark.parametrize("cls", LAYERS)
def test_layer_jit_vmap_grad_dtype(cls, dtype, key, tol):
    layer = randomize(shape_of(cls, 4, "tanh", key=key(), dtype=dtype), key())
    X = draw(key(), (5, 4), dtype)
    eager = jnp.stack([layer(jnp.asarray(x)) for x in np.asarray(X)])  # rows sliced on the host
    assert eager.dtype == dtype
    np.testing.assert_allclose(eqx.filter_jit(layer)(X[0]), eager[0], rtol=0, atol=tol(dtype))
    np.testing.assert_allclose(jax.vmap(layer)(X), eager, rtol=0, atol=tol(dtype))
    grads = jit_grad(lambda m: jnp.sum(jax.vmap(m)(X) ** 2), layer)
    assert_finite_nonzero_grads(grads, all_nonzero=True)
    # dtype follows the input, whatever the parameter dtype.
    other = other_dtype(dtype)
    assert out_dtype(layer, X.astype(other)) == other
    assert out_dtype(lambda x: layer.inverse(x, 0.5), X[0].astype(other)) == other
    assert layer.weight.dtype == dtype


def test_layer_errors(key):
    layer = VolumePreservingLowerLayer(3, "tanh", key=key())
    with pytest.raises(ValueError, match="last dimension 3"):
        layer(jnp.ones(4))
    with pytest.raises(ValueError, match="1-d or 2-d"):
        layer(jnp.ones((2, 2, 3)))
    with pytest.raises(TypeError, match="floating"):
        layer(jnp.ones(3, dtype=jnp.int32))
    with pytest.raises(ValueError, match="scalar"):
        layer(jnp.ones(3), jnp.ones(2))
    with pytest.raises(ValueError, match="unknown activation"):
        VolumePreservingUpperLayer(3, "nope", key=key())
    with pytest.raises(TypeError, match="use_bias"):
        VolumePreservingUpperLayer(3, use_bias=1, key=key())
    with pytest.raises(ValueError, match="dim must be >= 1"):
        VolumePreservingUpperLayer(0, key=key())
    with pytest.raises(TypeError, match="floating dtype"):
        VolumePreservingUpperLayer(3, key=key(), dtype=jnp.int32)


# ---------------------------------------------------------------------------------------
# the Cayley transform

_cayley = jax.jit(_linalg.cayley, static_argnums=1)
_cayley_apply = jax.jit(_linalg.cayley_apply, static_argnames=("transpose", "method"))


CAYLEY_METHODS = ("closed_form", "solve", "auto")


@fast_jit
def _cayley_both_ways(C, Z):
    applied = [
        [_linalg.cayley_apply(C, Z, transpose=t, method=m) for m in CAYLEY_METHODS]
        for t in (True, False)
    ]
    return _linalg.cayley(C, "closed_form"), _linalg.cayley(C, "solve"), applied


def test_cayley_closed_form_matches_solve(key):
    for T in (1, 2, 3):
        for scale in (1e-3, 0.3, 1.0, 5.0, 100.0):
            C = random_skew(key(), T, scale)
            Z = draw(key(), (T, 3))
            closed, solved, applied = jax.tree_util.tree_map(np.asarray, _cayley_both_ways(C, Z))
            np.testing.assert_allclose(closed, solved, rtol=0, atol=1e-13)
            # The closed form is orthogonal to rounding for every size of C.
            np.testing.assert_allclose(closed.T @ closed, np.eye(T), rtol=0, atol=1e-14)
            for transpose, results in zip((True, False), applied):
                expected = (closed.T if transpose else closed) @ Z
                for result in results:
                    np.testing.assert_allclose(result, expected, rtol=0, atol=1e-13)


def test_cayley_closed_form_gradient_matches_solve(key):
    for T in (2, 3):
        C0 = random_skew(key(), T, 0.7)
        R = draw(key(), (T, T))

        def loss(X, method):
            return jnp.sum(_linalg.cayley(X - X.T, method) * R)

        grad = jax.jit(jax.grad(loss), static_argnums=1)
        g_closed, g_solve = np.asarray(grad(C0, "closed_form")), np.asarray(grad(C0, "solve"))
        assert float(np.max(np.abs(g_solve))) > 1e-3
        np.testing.assert_allclose(g_closed, g_solve, rtol=0, atol=1e-12)


def test_cayley_two_by_two_is_a_rotation():
    # C = [[0, c], [-c, 0]] → Λ = ((1 - c²) I - 2C) / (1 + c²), the rotation by 2·atan(c).
    for c in (0.0, 0.2, -1.3, 7.0):
        C = jnp.array([[0.0, c], [-c, 0.0]])
        theta = 2 * math.atan(c)
        R = np.array([[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]])
        for method in ("closed_form", "solve"):
            np.testing.assert_allclose(_cayley(C, method), R, rtol=0, atol=1e-15)


def test_cayley_argument_errors():
    C = jnp.zeros((4, 4))
    with pytest.raises(ValueError, match="T <= 3"):
        _linalg.cayley(C, "closed_form")
    with pytest.raises(ValueError, match="method"):
        _linalg.cayley(C, "lu")


# ---------------------------------------------------------------------------------------
# attention


@pytest.mark.parametrize("weighting", ["skew", "arbitrary"])
def test_attention_parameters(weighting, key):
    atts = [
        randomize(shape_of(VolumePreservingAttention, d, weighting=weighting, key=key()), key())
        for d in (1, 2, 3, 6)
    ]
    for d, att, A in zip((1, 2, 3, 6), atts, _matrices(atts)):
        expected = d * (d - 1) // 2 if weighting == "skew" else d * d
        assert n_params(att) == att.n_params == expected
        A = np.asarray(A)
        assert A.shape == (d, d)
        if weighting == "skew":
            np.testing.assert_array_equal(A, -A.T)


_attention_parts = fast_jit(
    lambda atts, Z: [(att.correlation(Z), att.weights(Z), att(Z)) for att in atts]
)


def test_lambda_is_orthogonal_with_det_one(key):
    for T in (1, 2, 3, 4, 6):  # closed form up to 3, solve above
        atts = tuple(
            randomize(shape_of(VolumePreservingAttention, 3, weighting=w, key=key()), key(), 1.0)
            for w in ("skew", "arbitrary")
        )
        Z = draw(key(), (T, 3))
        for C, lam, out in jax.tree_util.tree_map(np.asarray, _attention_parts(atts, Z)):
            np.testing.assert_array_equal(C, -C.T)  # exactly skew
            np.testing.assert_allclose(lam.T @ lam, np.eye(T), rtol=0, atol=1e-13)
            np.testing.assert_allclose(np.linalg.det(np.asarray(lam)), 1.0, rtol=0, atol=1e-13)
            np.testing.assert_allclose(out, lam.T @ Z, rtol=0, atol=1e-13)


def test_correlation_formulas(key):
    d, T = 3, 4
    Z = np.asarray(draw(key(), (T, d)))
    skew = randomize(shape_of(VolumePreservingAttention, d, key=key()), key(), 1.0)
    A = np.asarray(skew.matrix())
    np.testing.assert_allclose(skew.correlation(jnp.asarray(Z)), Z @ A @ Z.T, atol=1e-14)
    arb = randomize(shape_of(VolumePreservingAttention, d, weighting="arbitrary", key=key()), key(), 1.0)
    A = np.asarray(arb.weight)
    C = np.zeros((T, T))
    for i in range(T):
        for j in range(i):
            C[i, j] = Z[i] @ A @ Z[j] / math.sqrt(d)
            C[j, i] = -C[i, j]
    np.testing.assert_allclose(arb.correlation(jnp.asarray(Z)), C, rtol=0, atol=1e-14)


def test_attention_preserves_volume(dtype, key, tol):
    """Every window shape `(T, d)` of the grid, several parameter draws."""
    bound = structure_tol(dtype, tol)
    if np.dtype(dtype) == np.float64:
        shapes = itertools.product(WINDOW_LENGTHS, DIMS)
    else:
        shapes = [(1, 2), (3, 3), (8, 6)]
    for T, d in shapes:
        for _ in range(2):
            att = shape_of(VolumePreservingAttention, d, key=key(), dtype=dtype)
            maps = (randomize(att, key(), 0.7),)
            res = residuals(maps, draw(key(), (T, d), dtype))
            assert res.dtype == dtype
            assert res[0] <= bound, (T, d, res)


# Every T and every d of the grid, each with and without positional encoding.
# (The attention test above runs the full product of T and d; the transformer adds
# row-wise shears and a translation to it, which cannot depend on the pairing.)
TRANSFORMER_SHAPES = [
    (1, 2, False), (1, 6, True), (2, 3, True), (2, 4, False), (3, 2, True),
    (3, 6, False), (5, 3, False), (5, 4, True), (8, 2, False), (8, 6, True),
]


def test_transformer_preserves_volume(dtype, key, tol):
    bound = structure_tol(dtype, tol)
    shapes = TRANSFORMER_SHAPES if np.dtype(dtype) == np.float64 else TRANSFORMER_SHAPES[4:6]
    for T, d, positional in shapes:
        for _ in range(2):  # several parameter draws and windows
            model = shape_of(
                VolumePreservingTransformer, d, positional_encoding=positional, key=key(), dtype=dtype
            )
            maps = (randomize(model, key(), 0.5),)
            res = residuals(maps, draw(key(), (T, d), dtype))
            assert res[0] <= bound, (T, d, positional, res)


def test_arbitrary_weighting_does_not_preserve_volume(key):
    """The negative control, GeometricMachineLearning.jl's default (skew_sym=false): every
    T >= 2 of the grid (T = 1 has C = 0), every d, every draw."""
    for T, d in [(2, 2), (3, 3), (5, 4), (8, 6)]:
        for _ in range(2):
            att = shape_of(VolumePreservingAttention, d, weighting="arbitrary", key=key())
            maps = (randomize(att, key(), 1.0),)
            assert residuals(maps, draw(key(), (T, d)))[0] > 1e-3, (T, d)


_correlations = fast_jit(lambda atts, Z: [(a.correlation(a(Z)), a.correlation(Z)) for a in atts])


def test_correlation_is_invariant_only_for_skew(key):
    # The key step of the volume-preservation proof: C(Λᵀ Z) = C(Z).
    Z = draw(key(), (5, 3))
    skew = randomize(shape_of(VolumePreservingAttention, 3, key=key()), key(), 1.0)
    arb = randomize(shape_of(VolumePreservingAttention, 3, weighting="arbitrary", key=key()), key(), 1.0)
    (skew_after, skew_before), (arb_after, arb_before) = _correlations((skew, arb), Z)
    np.testing.assert_allclose(skew_after, skew_before, atol=1e-13)
    diff = np.max(np.abs(np.asarray(arb_after) - np.asarray(arb_before)))
    assert float(diff) > 1e-3


_attention_round_trip = fast_jit(lambda att, Z: (att.inverse(att(Z)), att(att.inverse(Z))))


def test_attention_inverse(dtype, key):
    close = 1e-12 if np.dtype(dtype) == np.float64 else 1e-5
    for T in (1, 3, 6):
        att = randomize(shape_of(VolumePreservingAttention, 3, key=key(), dtype=dtype), key(), 0.7)
        Z = draw(key(), (T, 3), dtype)
        back, forth = _attention_round_trip(att, Z)
        np.testing.assert_allclose(back, Z, rtol=0, atol=close)
        np.testing.assert_allclose(forth, Z, rtol=0, atol=close)
    arb = VolumePreservingAttention(3, weighting="arbitrary", key=key())
    with pytest.raises(NotImplementedError, match="arbitrary"):
        arb.inverse(Z)


def test_skew_attention_is_permutation_equivariant(key):
    att = randomize(shape_of(VolumePreservingAttention, 3, key=key()), key(), 1.0)
    for T in (3, 5):
        Z = np.asarray(draw(key(), (T, 3)))
        perm = np.random.default_rng(np.asarray(key()).ravel().tolist()).permutation(T)
        np.testing.assert_allclose(
            call(att, Z[perm]), np.asarray(call(att, Z))[perm], rtol=0, atol=1e-13
        )


def test_attention_jit_vmap_grad_dtype(dtype, key, tol):
    att = randomize(shape_of(VolumePreservingAttention, 3, key=key(), dtype=dtype), key(), 0.7)
    Zs = draw(key(), (2, 3, 3), dtype)
    eager = jnp.stack([att(jnp.asarray(Z)) for Z in np.asarray(Zs)])
    assert eager.dtype == dtype
    atol = 10 * tol(dtype)
    jitted, batched = eqx.filter_jit(lambda att, Zs: (att(Zs[0]), jax.vmap(att)(Zs)))(att, Zs)
    np.testing.assert_allclose(jitted, eager[0], rtol=0, atol=atol)
    np.testing.assert_allclose(batched, eager, rtol=0, atol=atol)
    loss = fast_jit(lambda m, Zs: [eqx.filter_grad(lambda f: jnp.sum(jnp.sin(f(Z))))(m) for Z in Zs])
    # the closed form and the solve path
    for grads in loss(att, [draw(key(), (T, 3), dtype) for T in (3, 4)]):
        assert_finite_nonzero_grads(grads)
    other = other_dtype(dtype)
    assert out_dtype(att, Zs[0].astype(other)) == other


def test_attention_errors(key):
    att = VolumePreservingAttention(3, key=key())
    with pytest.raises(ValueError, match="2-d"):
        att(jnp.ones(3))
    with pytest.raises(ValueError, match="last dimension 3"):
        att(jnp.ones((4, 2)))
    with pytest.raises(ValueError, match="T >= 1"):
        att(jnp.ones((0, 3)))
    with pytest.raises(TypeError, match="floating"):
        att(jnp.ones((2, 3), dtype=jnp.int32))
    with pytest.raises(ValueError, match="weighting"):
        VolumePreservingAttention(3, weighting="symmetric", key=key())


@pytest.mark.parametrize(
    "weighting, cls",
    [("skew", _vp_attention.SkewWeighting), ("arbitrary", _vp_attention.ArbitraryWeighting)],
)
def test_weighting_is_an_object_chosen_once(weighting, cls, key):
    k = key()
    by_name = VolumePreservingAttention(3, weighting=weighting, key=k)
    by_object = VolumePreservingAttention(3, weighting=cls(), key=k)
    assert isinstance(by_name.scheme, cls) and isinstance(by_name.scheme, _vp_attention.AbstractWeighting)
    assert by_name.weighting == by_object.weighting == weighting
    assert by_name.scheme == by_object.scheme and hash(by_name.scheme) == hash(by_object.scheme)
    np.testing.assert_array_equal(by_name.weight, by_object.weight)
    Z = draw(key(), (4, 3))
    np.testing.assert_array_equal(by_name(Z), by_object(Z))
    model = VolumePreservingTransformer(3, weighting=weighting, key=k)
    assert isinstance(model.scheme, cls) and model.weighting == weighting
    assert model.config()["weighting"] == weighting  # a string, as saved files store it
    assert model.structure == cls.structure == ("volume" if weighting == "skew" else "none")


def test_wrong_weighting_is_refused_naming_the_choices(key):
    expected = r"weighting must be one of \('skew', 'arbitrary'\), got "
    for bad in ("symmetric", "Skew", None, 3):
        with pytest.raises(ValueError, match=expected + re.escape(repr(bad))):
            VolumePreservingAttention(3, weighting=bad, key=key())
        with pytest.raises(ValueError, match=expected + re.escape(repr(bad))):
            VolumePreservingTransformer(3, weighting=bad, key=key())


def test_cayley_method_is_looked_up_and_a_wrong_one_names_the_choices():
    C = jnp.zeros((2, 2))
    assert set(_linalg.CAYLEY_METHODS) == {"auto", "closed_form", "solve"}
    with pytest.raises(ValueError, match=r"one of \('auto', 'closed_form', 'solve'\), got 'lu'"):
        _linalg.cayley(C, "lu")


# ---------------------------------------------------------------------------------------
# the feed-forward network


def ff_count(d, n_blocks, n_linear):
    m = d * (d - 1) // 2
    return n_blocks * (2 * n_linear * m + d + 2 * (m + d)) + 2 * m + d


def test_feedforward_parameter_count_of_the_paper(key):
    model = shape_of(VolumePreservingFeedForward, 3, n_blocks=6, key=key())
    assert _helpers.n_params(model) == 135
    for d, n_blocks, n_linear in [(2, 1, 1), (3, 2, 3), (4, 3, 2), (5, 1, 2)]:
        model = shape_of(VolumePreservingFeedForward, d, n_blocks=n_blocks, n_linear=n_linear, key=key())
        assert _helpers.n_params(model) == ff_count(d, n_blocks, n_linear)


@pytest.mark.parametrize("init_upper", [False, True])
def test_feedforward_layer_sequence(init_upper, key):
    model = VolumePreservingFeedForward(
        3, n_blocks=2, n_linear=2, activation="sin", init_upper=init_upper, key=key()
    )
    first, second = LAYERS[::-1] if init_upper else LAYERS
    block = [
        (first, None, False),
        (second, None, False),
        (first, None, False),
        (second, None, True),
        (first, "sin", True),
        (second, "sin", True),
    ]
    expected = 2 * block + [(first, None, False), (second, None, True)]
    got = [(type(layer), layer.activation, layer.use_bias) for layer in model.layers]
    assert got == expected


def test_feedforward_preserves_volume(dtype, key, tol):
    bound = structure_tol(dtype, tol)
    dims = (1, 2, 3, 4, 6) if np.dtype(dtype) == np.float64 else (3,)
    for d in dims:
        for _ in range(2):

            def make(**kwargs):
                model = shape_of(VolumePreservingFeedForward, d, key=key(), dtype=dtype, **kwargs)
                # Scale 0.5: with larger random weights the 14 shears of dim 6 reach
                # Jacobian condition numbers of 1e5 and more, and the rounding of the
                # computed Jacobian alone then moves its determinant by more than 1e-12.
                return randomize(model, key(), 0.5)

            model = make(n_blocks=2, n_linear=2)
            maps = (model, WithStep(model, jnp.asarray(0.25, dtype)), make(init_upper=True))
            assert jnp.all(residuals(maps, draw(key(), (d,), dtype)) <= bound)
            if d == 3:  # a window: each row is mapped
                Z = draw(key(), (3, d), dtype)
                assert jnp.all(residuals(maps, Z) <= bound)


def test_feedforward_equals_its_layers(key):
    # The call composes runs of linear layers into one affine map; same function.
    model = randomize(shape_of(VolumePreservingFeedForward, 4, n_blocks=2, n_linear=3, key=key()), key())
    for shape, h in [((4,), None), ((4,), 0.3), ((5, 4), None)]:
        x = draw(key(), shape)
        y = x
        for layer in model.layers:
            y = layer(y, h)
        np.testing.assert_allclose(model(x, h), y, rtol=0, atol=1e-13)


def test_feedforward_step_size(key):
    model = randomize(shape_of(VolumePreservingFeedForward, 3, n_blocks=2, key=key()), key())
    z = draw(key(), (3,))
    np.testing.assert_array_equal(model(z, 0.0), z)  # h = 0 is the identity
    np.testing.assert_allclose(model(z, 1.0), model(z), rtol=0, atol=1e-15)
    assert float(jnp.max(jnp.abs(model(z, 0.5) - model(z)))) > 1e-3
    with pytest.raises(ValueError, match="scalar"):
        model(z, jnp.ones(3))


def test_feedforward_inverse(dtype, key):
    close = 1e-12 if np.dtype(dtype) == np.float64 else 1e-5
    model = randomize(shape_of(VolumePreservingFeedForward, 3, n_blocks=3, key=key(), dtype=dtype), key())
    Z = draw(key(), (4, 3), dtype)  # a window, row by row
    for h in (jnp.asarray(1.0, dtype), jnp.asarray(0.4, dtype)):
        back, forth = _round_trip(model, Z, h)
        np.testing.assert_allclose(back, Z, rtol=0, atol=close)
        np.testing.assert_allclose(forth, Z, rtol=0, atol=close)
    z = Z[0]  # a point, h=None, eagerly
    np.testing.assert_allclose(model.inverse(model(z)), z, rtol=0, atol=close)


def test_feedforward_is_an_integrator_with_config(key):
    model = VolumePreservingFeedForward(
        3, n_blocks=2, n_linear=2, activation="sigmoid", init_upper=True, key=key(),
        dtype=jnp.float32,
    )
    assert isinstance(model, AbstractFeedForwardIntegrator)
    assert VolumePreservingFeedForward.structure == model.structure == "volume"
    config = model.config()
    assert config == {
        "dim": 3,
        "n_blocks": 2,
        "n_linear": 2,
        "activation": "sigmoid",
        "init_upper": True,
        "dtype": np.dtype(np.float32),
    }
    rebuilt = VolumePreservingFeedForward(**config, key=key())
    assert jax.tree_util.tree_structure(rebuilt) == jax.tree_util.tree_structure(model)
    assert n_params(rebuilt) == n_params(model)


def test_feedforward_jit_vmap_grad_dtype(dtype, key, tol):
    model = randomize(shape_of(VolumePreservingFeedForward, 3, n_blocks=2, key=key(), dtype=dtype), key())
    X = draw(key(), (3, 3), dtype)
    hs = jnp.linspace(0.1, 1.0, 3, dtype=dtype)
    # a Python loop, eagerly (rows sliced on the host)
    eager = jnp.stack([model(jnp.asarray(x), jnp.asarray(h)) for x, h in zip(np.asarray(X), np.asarray(hs))])
    assert eager.dtype == dtype
    atol = 10 * tol(dtype)
    # jit and vmap at once, against the eager loop.
    np.testing.assert_allclose(eqx.filter_jit(jax.vmap(model))(X, hs), eager, rtol=0, atol=atol)
    grads = jit_grad(lambda m: jnp.sum(jax.vmap(m)(X, hs) ** 2), model)
    assert_finite_nonzero_grads(grads, all_nonzero=True)
    assert out_dtype(model, X[0].astype(other_dtype(dtype))) == other_dtype(dtype)


def test_feedforward_errors(key):
    with pytest.raises(ValueError, match="n_blocks must be >= 1"):
        VolumePreservingFeedForward(3, n_blocks=0, key=key())
    with pytest.raises(ValueError, match="n_linear must be >= 1"):
        VolumePreservingFeedForward(3, n_linear=0, key=key())
    with pytest.raises(TypeError, match="init_upper"):
        VolumePreservingFeedForward(3, init_upper="yes", key=key())
    with pytest.raises(TypeError, match="activation"):
        VolumePreservingFeedForward(3, activation=None, key=key())
    model = VolumePreservingFeedForward(3, key=key())
    with pytest.raises(ValueError, match="last dimension 3"):
        model(jnp.ones(2))
    with pytest.raises(ValueError, match="1-d or 2-d"):
        model(jnp.ones((1, 2, 3)))


# ---------------------------------------------------------------------------------------
# the transformer


def test_transformer_parameter_counts_of_the_paper(key):
    skew = shape_of(VolumePreservingTransformer, 3, n_blocks=2, L=3, key=key())
    arbitrary = shape_of(VolumePreservingTransformer, 3, n_blocks=2, L=3, weighting="arbitrary", key=key())
    assert _helpers.n_params(skew) == 162
    assert _helpers.n_params(arbitrary) == 180
    # Positional encoding has no parameters.
    with_pe = shape_of(
        VolumePreservingTransformer, 3, n_blocks=2, L=3, positional_encoding="input", key=key()
    )
    assert _helpers.n_params(with_pe) == 162
    for d, n_blocks, n_linear, L in [(2, 1, 1, 1), (4, 2, 2, 2)]:
        model = shape_of(
            VolumePreservingTransformer, d, n_blocks=n_blocks, n_linear=n_linear, L=L, key=key()
        )
        assert _helpers.n_params(model) == L * (d * (d - 1) // 2 + ff_count(d, n_blocks, n_linear))


def test_transformer_is_the_composition_of_its_units(key):
    model = randomize(shape_of(VolumePreservingTransformer, 3, n_blocks=1, L=2, key=key()), key())
    assert len(model.attention) == len(model.feedforward) == 2
    Z = draw(key(), (4, 3))

    def by_hand(m, Z):
        for att, ff in zip(m.attention, m.feedforward):
            Z = ff(att(Z))
        return Z

    np.testing.assert_allclose(call(model, Z), fast_jit(by_hand)(model, Z), rtol=0, atol=1e-14)
    encoded = with_encoding(model)
    np.testing.assert_allclose(
        call(encoded, Z), call(model, PositionalEncoding(3)(Z)), rtol=0, atol=1e-14
    )


def test_deep_transformer_preserves_volume(dtype, key, tol):
    bound = structure_tol(dtype, tol)
    for _ in range(2):

        def make(**kwargs):
            model = shape_of(
                VolumePreservingTransformer, 3, n_blocks=2, n_linear=2, L=3, key=key(), dtype=dtype, **kwargs
            )
            # Scale 0.25: 39 layers with larger random weights give Jacobian condition
            # numbers beyond 1e5, and the rounding of the computed Jacobian alone then
            # moves its determinant by more than 1e-12 (see the feed-forward test).
            return randomize(model, key(), 0.25)

        if np.dtype(dtype) == np.float64:
            maps = (make(), make(positional_encoding=True, init_upper=True))
        else:
            maps = (make(positional_encoding=True),)
        # States of unit size, as in the rigid-body data (|z| = 1).
        Z = 0.5 * draw(key(), (3, 3), dtype)
        assert jnp.all(residuals(maps, Z) <= bound)


def test_transformer_arbitrary_weighting_is_a_negative_control(key):
    for T, d in [(3, 3), (8, 4)]:
        model = shape_of(VolumePreservingTransformer, d, n_blocks=1, L=2, weighting="arbitrary", key=key())
        maps = (randomize(model, key(), 0.5),)
        assert residuals(maps, draw(key(), (T, d)))[0] > 1e-3


@fast_jit
def _translation_check(plain, encoded, Z, P):
    return (
        jacobian(encoded, Z),
        jacobian(plain, Z + P),
        volume_residual(encoded, Z),
        volume_residual(plain, Z + P),
        encoded(Z) - plain(Z),
    )


def test_positional_encoding_is_a_translation(key, tol):
    # PE adds a constant: the Jacobian of the encoded model at Z is the Jacobian of the
    # plain model at Z + P, so the volume residual is unchanged.
    plain = randomize(shape_of(VolumePreservingTransformer, 3, n_blocks=1, L=2, key=key()), key())
    encoded = with_encoding(plain)
    Z = draw(key(), (4, 3))
    P = positional_encoding(4, 3, dtype=jnp.float64)
    J_enc, J_plain, r_enc, r_plain, diff = _translation_check(plain, encoded, Z, P)
    np.testing.assert_allclose(J_enc, J_plain, rtol=0, atol=tol(jnp.float64))
    assert r_enc <= tol(jnp.float64, "structure") and r_plain <= tol(jnp.float64, "structure")
    np.testing.assert_allclose(r_enc, r_plain, rtol=0, atol=1e-14)
    assert float(jnp.max(jnp.abs(diff))) > 1e-3  # but the map itself changes


def test_order_is_visible_only_with_positional_encoding(key):
    """Without PE the skew transformer is permutation-equivariant along time; with PE it
    is not — which is why the positional encoding exists."""
    plain = randomize(shape_of(VolumePreservingTransformer, 3, L=2, key=key()), key())
    encoded = with_encoding(plain)
    for T in (3, 5):
        Z = np.asarray(draw(key(), (T, 3)))
        perm = np.roll(np.arange(T), 1)  # a cyclic shift: moves every row
        np.testing.assert_allclose(
            call(plain, Z[perm]), np.asarray(call(plain, Z))[perm], rtol=0, atol=1e-12
        )
        gap = np.asarray(call(encoded, Z[perm])) - np.asarray(call(encoded, Z))[perm]
        assert float(np.max(np.abs(gap))) > 1e-3
    # The arbitrary weighting reads the order through its lower triangle.
    arbitrary = shape_of(VolumePreservingTransformer, 3, L=1, weighting="arbitrary", key=key())
    arbitrary = randomize(arbitrary, key(), 1.0)
    Z = np.asarray(draw(key(), (5, 3)))
    perm = np.roll(np.arange(5), 1)
    gap = np.asarray(call(arbitrary, Z[perm])) - np.asarray(call(arbitrary, Z))[perm]
    assert float(np.max(np.abs(gap))) > 1e-3


def test_transformer_inverse(dtype, key, tol):
    close = 10 * tol(dtype)
    cases = [(3, False), (6, True)] if np.dtype(dtype) == np.float64 else [(4, True)]
    for T, positional in cases:  # the closed form and the solve path
        model = shape_of(
            VolumePreservingTransformer, 3, L=2, positional_encoding=positional, key=key(), dtype=dtype
        )
        model = randomize(model, key(), 0.3)
        Z = draw(key(), (T, 3), dtype)
        back, forth = _round_trip(model, Z)
        np.testing.assert_allclose(back, Z, rtol=0, atol=close)
        np.testing.assert_allclose(forth, Z, rtol=0, atol=close)
    arbitrary = VolumePreservingTransformer(3, weighting="arbitrary", key=key())
    with pytest.raises(NotImplementedError):
        arbitrary.inverse(Z)


def test_transformer_is_an_integrator_with_config(key):
    model = VolumePreservingTransformer(
        3, n_blocks=2, n_linear=2, L=3, activation="tanh", init_upper=True,
        weighting="arbitrary", positional_encoding=True, key=key(),
    )
    assert isinstance(model, AbstractTransformerIntegrator)
    assert model.seq_length is None
    assert VolumePreservingTransformer.structure == "volume"
    assert model.structure == "none"  # the arbitrary weighting does not preserve volume
    assert VolumePreservingTransformer(3, key=key()).structure == "volume"
    config = model.config()
    assert config == {
        "dim": 3,
        "n_blocks": 2,
        "n_linear": 2,
        "L": 3,
        "activation": "tanh",
        "init_upper": True,
        "weighting": "arbitrary",
        "positional_encoding": "split-amplitude",  # True, resolved to the family's default
        "dtype": np.dtype(np.float64),
    }
    rebuilt = VolumePreservingTransformer(**config, key=key())
    assert jax.tree_util.tree_structure(rebuilt) == jax.tree_util.tree_structure(model)


def test_transformer_jit_vmap_grad_dtype(dtype, key, tol):
    model = shape_of(VolumePreservingTransformer, 3, positional_encoding=True, key=key(), dtype=dtype)
    model = randomize(model, key(), 0.5)
    Zs = draw(key(), (2, 4, 3), dtype)
    eager = jnp.stack([model(jnp.asarray(Z)) for Z in np.asarray(Zs)])  # a Python loop, eagerly
    assert eager.dtype == dtype
    atol = 10 * tol(dtype)
    # jit and vmap at once, against the eager loop.
    np.testing.assert_allclose(eqx.filter_jit(jax.vmap(model))(Zs), eager, rtol=0, atol=atol)
    grads = jit_grad(lambda m: jnp.sum(jax.vmap(m)(Zs) ** 2), model)
    assert_finite_nonzero_grads(grads, all_nonzero=True)
    assert out_dtype(model, Zs[0].astype(other_dtype(dtype))) == other_dtype(dtype)


def test_transformer_errors(key):
    with pytest.raises(ValueError, match="weighting"):
        VolumePreservingTransformer(3, weighting="full", key=key())
    with pytest.raises(ValueError, match="L must be >= 1"):
        VolumePreservingTransformer(3, L=0, key=key())
    with pytest.raises(TypeError, match="positional_encoding"):
        VolumePreservingTransformer(3, positional_encoding=1, key=key())
    model = VolumePreservingTransformer(3, key=key())
    with pytest.raises(ValueError, match="2-d"):
        model(jnp.ones(3))
    with pytest.raises(ValueError, match="last dimension 3"):
        model(jnp.ones((3, 4)))


def test_public_names():
    for name in ("VolumePreservingLowerLayer", "VolumePreservingUpperLayer",
                 "VolumePreservingAttention"):
        assert getattr(geomlearn, name) is getattr(geomlearn.layers, name)
    for name in ("VolumePreservingFeedForward", "VolumePreservingTransformer"):
        assert getattr(geomlearn, name) is getattr(geomlearn.models, name)


# --------------------------------------------------------------------------------------
# Inference forms (issue 16): the same map, parameter work done once


def _random_params(model, key, scale=0.7):
    """Every inexact leaf replaced by N(0, scale^2) values (no special structure)."""
    return randomize(model, key, scale)


@fast_jit
def _form_check(form, model, z):
    """The inference form and the model at `z`, the form's volume residual there and its
    `step` without a step size, in one compiled program."""
    return form(z), model(z), volume_residual(form, z), form.step(z, None)


@pytest.mark.parametrize("dim, n_blocks, n_linear, init_upper", [(3, 2, 1, False), (4, 3, 2, True), (1, 1, 1, False), (6, 1, 3, False)])
def test_feedforward_inference_form_equals_model_and_keeps_volume(dim, n_blocks, n_linear, init_upper, key):
    model = shape_of(
        VolumePreservingFeedForward, dim, n_blocks=n_blocks, n_linear=n_linear, init_upper=init_upper, key=key(), dtype=jnp.float64
    )
    model = _random_params(model, key(), scale=1 / math.sqrt(dim))
    form = model.inference_form()
    assert type(form) is not type(model)
    for _ in range(3):  # one compiled check, three points
        z = draw(key(), (dim,), jnp.float64)
        out, expected, res, stepped = _form_check(form, model, z)
        np.testing.assert_allclose(out, expected, rtol=1e-13, atol=1e-13)
        assert float(res) <= 1e-12
        np.testing.assert_array_equal(stepped, out)
    Z = draw(key(), (5, dim), jnp.float64)  # a window: every row mapped
    np.testing.assert_allclose(form(Z), call(model, Z), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(eqx.filter_jit(form)(Z), form(Z), rtol=1e-13, atol=1e-13)


def test_inference_form_checks_can_fail(key):
    """Negative controls: the equality check tells a different network apart, and the
    volume check rejects a fused form whose composed affine map lost its unit diagonal."""
    model = _random_params(shape_of(VolumePreservingFeedForward, 3, n_blocks=2, key=key(), dtype=jnp.float64), key())
    other = _random_params(model, key())
    z = draw(key(), (3,), jnp.float64)
    assert not np.allclose(other.inference_form()(z), model(z), rtol=1e-13, atol=1e-13)
    form = model.inference_form()
    Mt, c = form.final
    broken = eqx.tree_at(lambda f: f.final, form, (Mt.at[0, 0].multiply(1.01), c))
    assert float(volume_residual(broken, z)) > 1e-3
    assert float(volume_residual(form, z)) <= 1e-12


@pytest.mark.parametrize("T", [1, 2, 3, 5])
@pytest.mark.parametrize("positional_encoding", [False, "input", "conjugate", "bias"])
def test_transformer_inference_form_equals_model_and_keeps_volume(T, positional_encoding, key):
    model = shape_of(
        VolumePreservingTransformer, 3, n_blocks=2, L=3, positional_encoding=positional_encoding, key=key(), dtype=jnp.float64
    )
    # Scale 0.25 as in the structure tests above: the "bias" placement adds position gains
    # to 18 layers, and larger random weights make the Jacobian ill-conditioned enough
    # that rounding alone moves its determinant past 1e-12.
    model = _random_params(model, key(), scale=0.25)
    form = model.inference_form()
    Z = draw(key(), (T, 3), jnp.float64)
    np.testing.assert_allclose(form(Z), model(Z), rtol=1e-12, atol=1e-12)
    assert float(volume_residual(form, Z)) <= 1e-12


def test_transformer_inference_form_float32_and_arbitrary_weighting(key):
    model = VolumePreservingTransformer(3, n_blocks=2, L=2, key=key(), dtype=jnp.float32)
    Z = draw(key(), (3, 3), jnp.float32)
    form = model.inference_form()
    out = form(Z)
    assert out.dtype == jnp.float32
    np.testing.assert_allclose(out, model(Z), rtol=2e-5, atol=2e-5)
    arbitrary = VolumePreservingTransformer(3, L=2, weighting="arbitrary", key=key(), dtype=jnp.float64)
    Z64 = Z.astype(jnp.float64)
    np.testing.assert_allclose(arbitrary.inference_form()(Z64), arbitrary(Z64), rtol=1e-13, atol=1e-13)


def test_iterate_rollout_equals_model_iteration(key):
    """`iterate` (which rolls out the inference form) gives the model's own iterates."""
    model = VolumePreservingTransformer(3, n_blocks=2, L=3, key=key(), dtype=jnp.float64)
    Z = 0.3 * draw(key(), (3, 3), jnp.float64)
    # few steps: a random network amplifies round-off differences quickly
    traj = geomlearn.iterate(model, Z, 3 + 3 * 5)
    window, expected = Z, [Z]
    for _ in range(5):
        window = model(window)
        expected.append(window)
    np.testing.assert_allclose(traj, jnp.concatenate(expected), rtol=1e-11, atol=1e-11)
    ff = VolumePreservingFeedForward(3, n_blocks=3, key=key(), dtype=jnp.float64)
    z = jnp.array([0.1, 0.2, 0.97])
    traj = geomlearn.iterate(ff, z, 10)
    zs = [z]
    for _ in range(9):
        zs.append(ff(zs[-1]))
    np.testing.assert_allclose(traj, jnp.stack(zs), rtol=1e-11, atol=1e-11)
