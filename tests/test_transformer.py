"""Transformer integrators: Transformer, LinearSymplecticTransformer, SymplecticTransformer."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_attention import n_params, run_compiled, window

from _helpers import random_module

import geomlearn
from geomlearn import (
    GradientLayerP,
    GradientLayerQ,
    LinearSymplecticAttentionP,
    LinearSymplecticAttentionQ,
    LinearSymplecticTransformer,
    MultiHeadAttention,
    PositionalEncoding,
    ResNetLayer,
    SymplecticAttentionP,
    SymplecticAttentionQ,
    SymplecticTransformer,
    Transformer,
)
from geomlearn.geometry import symplecticity_residual
from geomlearn.models import AbstractTransformerIntegrator

SEQ_LENGTHS = (1, 2, 4, 7)
HALF_DIMS = (1, 2)


@pytest.fixture
def rng():
    return np.random.default_rng(20261201)


def with_pe(model, key):
    """The same model (same parameters) with the encoding in front (`"input"`): the
    twin's skeleton (no initialiser run) filled with the model's parameters."""
    config = model.config()
    config["positional_encoding"] = "input"
    skeleton = eqx.filter_eval_shape(lambda: type(model)(**config, key=key))
    is_param = lambda x: isinstance(x, jax.ShapeDtypeStruct)  # noqa: E731
    slots, static = eqx.partition(skeleton, is_param)
    leaves = jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array))
    twin = eqx.combine(jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(slots), leaves), static)
    return eqx.tree_at(lambda m: m.layers, twin, model.layers)


def build(name, dim, T, key, dtype=None, **kwargs):
    if name == "linear":
        return LinearSymplecticTransformer(dim, T, key=key, dtype=dtype, **kwargs)
    if name == "nonlinear":
        return SymplecticTransformer(dim, key=key, dtype=dtype, **kwargs)
    return Transformer(dim, key=key, dtype=dtype, **kwargs)


def shape_of(build_model):
    """The skeleton of `build_model()`: its constructor run abstractly (shapes, dtypes and
    structure; no initialiser compiled)."""
    return eqx.filter_eval_shape(build_model)


# --------------------------------------------------------------------------------------
# Parameter counts (the counts of the reference designs)


def test_parameter_counts(key):
    assert n_params(shape_of(lambda: Transformer(4, n_heads=2, L=1, n_blocks=2, key=key()))) == 108
    assert n_params(shape_of(
        lambda: LinearSymplecticTransformer(4, 4, n_sympnet=2, width=4, L=1, key=key()))) == 84
    assert n_params(shape_of(lambda: SymplecticTransformer(4, n_sympnet=2, width=4, L=4, key=key()))) == 280


@pytest.mark.parametrize(
    "dim, n_heads, L, n_blocks, D", [(4, 2, 1, 2, None), (3, 1, 2, 1, None), (4, 3, 1, 1, 6)]
)
def test_transformer_parameter_formula(dim, n_heads, L, n_blocks, D, key):
    model = shape_of(lambda: Transformer(
        dim, n_heads=n_heads, L=L, n_blocks=n_blocks, transformer_dim=D, key=key()))
    Dm = dim if D is None else D
    lift = 0 if D is None else 2 * dim * Dm + dim + Dm
    assert n_params(model) == lift + L * (3 * Dm**2 + (n_blocks + 1) * (Dm**2 + Dm))


@pytest.mark.parametrize("n, T, n_sympnet, width, L", [(1, 3, 1, 5, 2), (2, 2, 3, 4, 1)])
def test_symplectic_parameter_formulas(n, T, n_sympnet, width, L, key):
    gradient = 2 * n_sympnet * width * (n + 2)
    lst = shape_of(lambda: LinearSymplecticTransformer(
        2 * n, T, n_sympnet=n_sympnet, width=width, L=L, key=key()))
    assert n_params(lst) == L * (T * (T + 1) + gradient)
    st = shape_of(lambda: SymplecticTransformer(2 * n, n_sympnet=n_sympnet, width=width, L=L, key=key()))
    assert n_params(st) == L * (n * (n + 1) + gradient)


# --------------------------------------------------------------------------------------
# Architecture


def test_transformer_architecture(key):
    model = shape_of(lambda: Transformer(4, n_heads=2, L=2, n_blocks=2, activation="sigmoid", key=key()))
    kinds = [type(layer) for layer in model.layers]
    assert kinds == [MultiHeadAttention, ResNetLayer, ResNetLayer, ResNetLayer] * 2
    assert [layer.activation for layer in model.layers if isinstance(layer, ResNetLayer)] == [
        "sigmoid",
        "sigmoid",
        "identity",
    ] * 2
    assert all(layer.n_heads == 2 for layer in model.layers[::4])
    assert model.lift is None and model.project is None and model.encoder is None
    lifted = shape_of(lambda: Transformer(2, n_heads=3, transformer_dim=6, L=1, key=key()))
    assert lifted.lift.weight.shape == (6, 2) and lifted.project.weight.shape == (2, 6)
    assert lifted.layers[0].dim == 6


@pytest.mark.parametrize("init_upper", [True, False])
def test_symplectic_architectures(init_upper, key):
    first, second = (GradientLayerQ, GradientLayerP) if init_upper else (GradientLayerP, GradientLayerQ)
    block = [first, second, first]
    lst = shape_of(lambda: LinearSymplecticTransformer(
        4, 3, n_sympnet=3, L=2, init_upper=init_upper, key=key()))
    unit = [LinearSymplecticAttentionQ, *block, LinearSymplecticAttentionP, *block]
    assert [type(layer) for layer in lst.layers] == unit * 2
    st = shape_of(lambda: SymplecticTransformer(4, n_sympnet=3, L=2, init_upper=init_upper, key=key()))
    unit = [SymplecticAttentionQ, *block, SymplecticAttentionP, *block]
    assert [type(layer) for layer in st.layers] == unit * 2
    assert all(layer.width == 4 for layer in st.layers if isinstance(layer, GradientLayerQ))


def test_transformer_is_the_composition_of_its_layers(key, rng):
    """The model applies lift, [MHA, ResNet layers]×L, projection, in that order."""
    model = random_module(lambda: Transformer(2, n_heads=2, L=2, transformer_dim=4, key=key()), rng, 0.5)
    Z = window(rng, 5, 2)

    def both(model, Z):
        expected = model.lift(Z)
        for layer in model.layers:
            expected = layer(expected)
        return model(Z), model.project(expected)

    out, expected = run_compiled(both, model, Z)
    np.testing.assert_allclose(out, expected, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("name", ["transformer", "linear", "nonlinear"])
def test_positional_encoding_goes_in_front(name, key, rng):
    k = key()
    model = random_module(lambda: build(name, 4, 5, k, L=1), rng, 0.3)
    pe_model = with_pe(model, key())
    assert isinstance(pe_model.encoder, PositionalEncoding) and model.encoder is None
    Z = window(rng, 5, 4)
    encoded, shifted, plain = run_compiled(
        lambda pe_model, model, Z: (pe_model(Z), model(PositionalEncoding(4)(Z)), model(Z)),
        pe_model, model, Z,
    )
    np.testing.assert_allclose(encoded, shifted, rtol=1e-13, atol=1e-13)
    assert float(np.max(np.abs(encoded - plain))) > 1e-3


# --------------------------------------------------------------------------------------
# Structure


def _residuals(models, Z):
    return jnp.stack([symplecticity_residual(m, Z) for m in models])


@pytest.mark.parametrize("name", ["linear", "nonlinear"])
def test_symplectic_on_product_space(name, dtype, key, rng, tol):
    """Random parameters, T ∈ {1, 2, 4, 7}, n ∈ {1, 2}, with and without positional
    encoding; all configurations in one compiled program."""
    configs = [(T, n) for T in SEQ_LENGTHS for n in HALF_DIMS]
    cases = []
    for T, n in configs:
        # Parameters ~ N(0, 0.3²): Jacobian norms up to ~20. (The residual is absolute in
        # the Jacobian, so float32 round-off grows like ε‖M‖²; 0.5 gives norms ~100.)
        # One gradient layer per group (Q-layers for n = 1, P-layers for n = 2) keeps the
        # 16 Jacobians cheap to compile; deeper stacks are checked below.
        k = key()
        model = random_module(
            lambda: build(name, 2 * n, T, k, dtype, n_sympnet=1, init_upper=n == 1), rng, 0.3
        )
        cases.append(((model, with_pe(model, key())), window(rng, T, 2 * n, dtype)))

    def program(cases):
        (last, _), Z = cases[-1]
        return [_residuals(*case) for case in cases], last(Z)

    results, last_out = run_compiled(program, cases)
    for (T, n), res, ((model, _), Z) in zip(configs, results, cases):
        assert res.dtype == dtype
        assert bool(np.all(np.isfinite(res)))
        assert float(np.max(res)) <= tol(dtype, "structure"), (T, n, res)
    # The maps are far from the identity (a no-op would pass trivially).
    assert float(np.max(np.abs(last_out - cases[-1][1]))) > 1e-2


def test_transformer_is_not_symplectic(key, rng):
    """Negative control: the standard transformer fails the same check, with or without
    positional encoding."""
    cases = []
    for T, n in [(4, 1), (7, 2)]:
        k = key()
        model = random_module(lambda: Transformer(2 * n, n_heads=2, L=1, n_blocks=2, key=k), rng, 0.5)
        cases.append(((model, with_pe(model, key())), window(rng, T, 2 * n)))
    results = run_compiled(lambda cases: [_residuals(*case) for case in cases], cases)
    for res in results:
        assert float(jnp.min(res)) > 1e-3, res


def test_default_initialisation_is_symplectic_and_moderate(key, rng):
    """Freshly built models (no randomisation) at a bigger size: symplectic, and a
    moderate perturbation of the identity rather than an explosive map."""
    T, n = 6, 2
    models = (
        LinearSymplecticTransformer(2 * n, T, L=2, key=key()),
        SymplecticTransformer(2 * n, L=4, positional_encoding=True, key=key()),
    )
    Z = window(rng, T, 2 * n)
    res, outputs = run_compiled(lambda ms, Z: (_residuals(ms, Z), [m(Z) for m in ms]), models, Z)
    assert float(jnp.max(res)) <= 1e-12, res
    for out in outputs:
        assert 0 < float(jnp.max(jnp.abs(out - Z))) < 3.0


# --------------------------------------------------------------------------------------
# Order

PERM = np.array([3, 0, 5, 1, 4, 2])


def _order_gaps(models, Z):
    return jnp.stack([jnp.max(jnp.abs(m(Z[PERM]) - m(Z)[PERM])) for m in models])


def test_symplectic_transformer_order(key, rng):
    """Permutation-equivariant along time without positional encoding; not with it."""
    model = random_module(lambda: SymplecticTransformer(4, L=2, key=key()), rng, 0.5)
    gaps = run_compiled(_order_gaps, (model, with_pe(model, key())), window(rng, 6, 4))
    assert float(gaps[0]) <= 1e-12
    assert float(gaps[1]) > 1e-3


def test_standard_transformer_order(key, rng):
    model = random_module(lambda: Transformer(4, n_heads=2, key=key()), rng, 0.5)
    gaps = run_compiled(_order_gaps, (model, with_pe(model, key())), window(rng, 6, 4))
    assert float(gaps[0]) <= 1e-12
    assert float(gaps[1]) > 1e-3


def test_linear_symplectic_transformer_is_order_aware(key, rng):
    """Its attention matrices are indexed by position: no encoding needed to see order."""
    model = random_module(lambda: LinearSymplecticTransformer(4, 6, key=key()), rng, 0.5)
    gaps = run_compiled(_order_gaps, (model,), window(rng, 6, 4))
    assert float(gaps[0]) > 1e-3


# --------------------------------------------------------------------------------------
# Transformations, dtypes, config

MODELS = [
    ("transformer-lift-pe", lambda k, dt: Transformer(
        4, n_heads=3, L=1, transformer_dim=6, positional_encoding=True, key=k, dtype=dt)),
    ("linear", lambda k, dt: LinearSymplecticTransformer(4, 3, key=k, dtype=dt)),
    ("nonlinear-pe", lambda k, dt: SymplecticTransformer(
        4, positional_encoding=True, init_upper=False, key=k, dtype=dt)),
]
MODEL_IDS = [name for name, _ in MODELS]
MODEL_MAKERS = [make for _, make in MODELS]


@pytest.mark.parametrize("make", MODEL_MAKERS, ids=MODEL_IDS)
def test_jit_vmap_grad_dtype(make, dtype, key, rng, tol):
    k = key()
    model = random_module(lambda: make(k, dtype), rng, 0.3)
    Zs = jnp.asarray(rng.standard_normal((3, 3, 4)), dtype)
    out = model(Zs[0])
    assert out.shape == Zs[0].shape and out.dtype == dtype
    close = dict(rtol=tol(dtype), atol=tol(dtype))

    def loss(m):
        return jnp.mean(jax.vmap(m)(Zs) ** 2)

    def program(m, Zs):
        grads = eqx.filter_grad(loss)(m)
        return m(Zs[0]), jax.vmap(m)(Zs), jnp.stack([m(Z) for Z in Zs]), grads

    jitted, batched, looped, grads = run_compiled(program, model, Zs)
    np.testing.assert_allclose(jitted, out, **close)  # jit == eager
    np.testing.assert_allclose(batched, looped, **close)
    leaves = [leaf for leaf in jax.tree_util.tree_leaves(grads) if eqx.is_inexact_array(leaf)]
    assert len(leaves) == len(jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array)))
    assert all(leaf.dtype == dtype for leaf in leaves)
    assert all(bool(np.all(np.isfinite(leaf))) for leaf in leaves)
    assert all(float(np.max(np.abs(leaf))) > 0 for leaf in leaves)


@pytest.mark.parametrize("make", MODEL_MAKERS, ids=MODEL_IDS)
def test_mixed_parameter_and_input_dtypes(make, key, rng):
    Z = window(rng, 3, 4, jnp.float32)
    k64, k32 = key(), key()
    assert random_module(lambda: make(k64, jnp.float64), rng, 0.3)(Z).dtype == jnp.float32
    assert random_module(lambda: make(k32, jnp.float32), rng, 0.3)(Z.astype(jnp.float64)).dtype == jnp.float64


@pytest.mark.parametrize("make", MODEL_MAKERS, ids=MODEL_IDS)
def test_config_rebuilds_the_model(make, key, rng):
    k, k_twin = key(), key()
    model = random_module(lambda: make(k, jnp.float32), rng)
    assert isinstance(model, AbstractTransformerIntegrator)
    config = model.config()
    assert config["dtype"] == jnp.float32
    twin = random_module(lambda: type(model)(**config, key=k_twin), rng)
    assert jax.tree_util.tree_structure(twin) == jax.tree_util.tree_structure(model)
    assert [(x.shape, x.dtype) for x in jax.tree_util.tree_leaves(twin)] == [
        (x.shape, x.dtype) for x in jax.tree_util.tree_leaves(model)
    ]
    assert twin.config() == config


def test_class_attributes(key):
    assert Transformer.structure == "none"
    assert LinearSymplecticTransformer.structure == "symplectic"
    assert SymplecticTransformer.structure == "symplectic"
    assert shape_of(lambda: Transformer(4, key=key())).seq_length is None
    assert shape_of(lambda: SymplecticTransformer(4, key=key())).seq_length is None
    assert shape_of(lambda: LinearSymplecticTransformer(4, 5, key=key())).seq_length == 5
    assert shape_of(lambda: Transformer(4, transformer_dim=4, key=key())).config()["transformer_dim"] == 4
    assert shape_of(lambda: SymplecticTransformer(6, key=key())).width == 6  # width defaults to dim
    for name in ("Transformer", "LinearSymplecticTransformer", "SymplecticTransformer"):
        assert getattr(geomlearn, name) is getattr(geomlearn.models, name)


@pytest.mark.parametrize("activation", ["sigmoid", jax.nn.relu, jnp.sin])
def test_any_activation(activation, key, rng):
    model = random_module(
        lambda: LinearSymplecticTransformer(2, 3, activation=activation, key=key()), rng, 0.5
    )
    assert model.activation is activation
    res = run_compiled(symplecticity_residual, model, window(rng, 3, 2))
    assert float(res) <= 1e-12


# --------------------------------------------------------------------------------------
# Errors


def test_linear_symplectic_transformer_rejects_wrong_length(key, rng):
    model = random_module(lambda: LinearSymplecticTransformer(4, 4, key=key()), rng)
    with pytest.raises(ValueError, match=r"seq_length=4.*length 6"):
        model(jnp.ones((6, 4)))
    with pytest.raises(ValueError, match=r"seq_length=4.*length 3"):
        with_pe(model, key())(jnp.ones((3, 4)))


@pytest.mark.parametrize("make", MODEL_MAKERS, ids=MODEL_IDS)
def test_bad_windows(make, key, rng):
    k = key()
    model = random_module(lambda: make(k, None), rng)
    with pytest.raises(ValueError, match=r"\(T, 4\)"):
        model(jnp.ones((3, 2)))
    with pytest.raises(ValueError, match=r"\(T, 4\)"):
        model(jnp.ones(4))
    with pytest.raises(ValueError, match=r"jax.vmap"):
        model(jnp.ones((2, 3, 4)))
    with pytest.raises(TypeError, match="floating"):
        model(jnp.ones((3, 4), dtype=jnp.int32))


def test_constructor_errors(key):
    with pytest.raises(ValueError, match=r"transformer_dim=6, n_heads=4"):
        Transformer(6, n_heads=4, key=key())
    with pytest.raises(ValueError, match=r"transformer_dim=5, n_heads=2"):
        Transformer(4, n_heads=2, transformer_dim=5, key=key())
    with pytest.raises(ValueError, match="even"):
        SymplecticTransformer(3, key=key())
    with pytest.raises(ValueError, match="even"):
        LinearSymplecticTransformer(5, 3, key=key())
    with pytest.raises(ValueError, match="seq_length must be >= 1"):
        LinearSymplecticTransformer(4, 0, key=key())
    with pytest.raises(ValueError, match="L must be >= 1"):
        SymplecticTransformer(4, L=0, key=key())
    with pytest.raises(TypeError, match="positional_encoding must be a bool"):
        SymplecticTransformer(4, positional_encoding=1, key=key())
    with pytest.raises(TypeError, match="width must be an integer"):
        LinearSymplecticTransformer(4, 3, width=2.0, key=key())
    with pytest.raises(ValueError, match="unknown activation"):
        Transformer(4, activation="swoosh", key=key())
