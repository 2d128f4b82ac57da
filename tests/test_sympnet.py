"""SympNet and Hénon-network models: GSympNet, LASympNet, HenonNet (geomlearn.models.sympnet)."""

import pathlib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn
from geomlearn import io as gio
from geomlearn.geometry import symplecticity_residual
from geomlearn.layers import (
    ActivationLayerP,
    ActivationLayerQ,
    GradientLayerP,
    GradientLayerQ,
    HenonLayer,
    LinearLayerP,
    LinearLayerQ,
)
from geomlearn.models import AbstractFeedForwardIntegrator, GSympNet, HenonNet, LASympNet

from _helpers import n_params, normal, randomize

RNG_SEED = 1729  # the `rng` fixture's seed (tests/conftest.py)


shapes_only = eqx.filter_eval_shape


@eqx.filter_jit
def residuals(models, Zs, H):
    """symplecticity_residual of `v ↦ model(v, h)` at every (z, h) pair, for each model in
    the tuple `models` (with its points in `Zs`): shape (len(models), len(H)). One compile
    for all models and dimensions."""

    def one(model, Z):
        return jax.vmap(lambda z, h: symplecticity_residual(lambda v: model(v, h), z))(Z, H)

    return jnp.stack([one(model, Z) for model, Z in zip(models, Zs)])


# One hidden width throughout: every distinct parameter shape costs a compilation of the
# random initialiser, which dominates these tests' run time.
WIDTH = 5

# Random parameters of this scale keep a 10-layer map's Jacobian moderate (norm ≲ 10), as
# for a trained one-step integrator; the residual's round-off grows like ‖Jacobian‖².
MODELS = {
    "GSympNet": (lambda d, L, **kw: GSympNet(d, n_layers=L, width=WIDTH, **kw), 0.5),
    # L // 2 + 1 linear modules of two shears each, with L // 2 activation layers between
    # them: at least L symplectic sublayers.
    "LASympNet": (lambda d, L, **kw: LASympNet(d, n_layers=L // 2 + 1, n_linear=2, **kw), 0.3),
    "HenonNet": (lambda d, L, **kw: HenonNet(d, n_layers=L, width=WIDTH, **kw), 0.5),
}


def build(name, dim, n_layers, key, rng=None, dtype=None):
    """A model with random parameters drawn from `rng` (its initial ones if `rng` is None)."""
    factory, scale = MODELS[name]
    model = factory(dim, n_layers, key=key(), dtype=dtype)
    return model if rng is None else randomize(model, rng, scale)


# --------------------------------------------------------------------------- structure


def test_symplectic_for_random_parameters_and_steps(rng, key, tol, dtype):
    """Every model, two random parameter draws, n ∈ {1, 2, 3}, up to 10 layers, four
    points and four step sizes (h = None is exactly h = 1, see test_step_size; it is also
    checked once here)."""
    configs = [(1, 10), (2, 2), (3, 6)] if dtype == jnp.float64 else [(2, 6)]
    cases = [(name, n, n_layers) for n, n_layers in configs for name in MODELS]
    H = jnp.asarray([1.0, 0.3, -0.7, 1.6], dtype)
    for _ in range(2):
        models = tuple(build(name, 2 * n, L, key, rng, dtype) for name, n, L in cases)
        assert all(model.structure == "symplectic" for model in models)
        Zs = tuple(normal(rng, (4, 2 * n), dtype) for _, n, _ in cases)
        res = residuals(models, Zs, H)
        assert res.shape == (len(cases), 4) and res.dtype == dtype
        worst = np.max(res, axis=1)
        assert np.max(worst) <= tol(dtype, "structure"), dict(zip(map(str, cases), worst))
    for model, Z in zip(models[-len(MODELS):], Zs[-len(MODELS):]):
        assert symplecticity_residual(model, Z[0]) <= tol(dtype, "structure")  # h=None


@pytest.mark.parametrize("name", list(MODELS))
def test_inverse_round_trip(rng, key, name):
    for n, n_layers, steps in ((1, 10, (None, 0.4, -1.2)), (3, 6, (0.4, -1.2))):
        model = build(name, 2 * n, n_layers, key, rng)
        z = normal(rng, (2 * n,))
        for h in steps:
            out = model(z, h)
            assert np.max(np.abs(out - z)) > 1e-3  # the map does something
            np.testing.assert_allclose(model.inverse(out, h), z, rtol=0, atol=1e-12)
            np.testing.assert_allclose(model(model.inverse(z, h), h), z, rtol=0, atol=1e-12)


# --------------------------------------------------------------------------- the step h


@pytest.mark.parametrize("name", list(MODELS))
def test_step_size(rng, key, name):
    model = build(name, 4, 2, key, rng)
    z = normal(rng, (4,))
    np.testing.assert_array_equal(model(z), model(z, 1.0))
    np.testing.assert_array_equal(model(z, jnp.asarray(0.3)), model(z, 0.3))
    np.testing.assert_allclose(model(z, 0.0), z, rtol=0, atol=1e-14)
    # h → 0 tends to the identity linearly: ‖model(z, h) − z − h v‖ = O(h²), v = ∂_h at 0.
    v = jax.jacfwd(lambda s: model(z, s))(0.0)
    assert np.max(np.abs(v)) > 1e-3
    for h in (1e-2, 1e-3, 1e-4):
        step = model(z, h) - z
        assert np.max(np.abs(step)) <= 2 * h * np.max(np.abs(v))
        assert np.max(np.abs(step - h * v)) <= 1e3 * h**2
    # and h really changes the map
    assert np.max(np.abs(model(z, 0.5) - model(z))) > 1e-3


# --------------------------------------------------------------------------- transformations


@pytest.mark.parametrize("name", list(MODELS))
def test_jit_vmap_grad(rng, key, name):
    model = build(name, 4, 2, key, rng)
    Z = normal(rng, (6, 4))
    hs = jnp.asarray(rng.uniform(0.05, 1.5, 6))
    # (h = None is exactly h = 1, see test_step_size, so the array-h path covers it.)
    jitted = eqx.filter_jit(lambda m, z, h: m(z, h))(model, Z[0], hs[0])
    np.testing.assert_allclose(jitted, model(Z[0], hs[0]), rtol=0, atol=1e-13)
    jitted_inv = eqx.filter_jit(lambda m, z, h: m.inverse(z, h))(model, Z[0], hs[0])
    np.testing.assert_allclose(jitted_inv, model.inverse(Z[0], hs[0]), rtol=0, atol=1e-13)
    batched = jax.vmap(model)(Z, hs)  # one step size per sample
    looped = jnp.stack([model(z, h) for z, h in zip(Z, hs)])
    np.testing.assert_allclose(batched, looped, rtol=0, atol=1e-13)

    def loss(m):
        return jnp.mean((jax.vmap(m)(Z, hs) - jnp.roll(Z, 1, axis=1)) ** 2)

    grads = eqx.filter_jit(eqx.filter_grad(loss))(model)
    leaves = jax.tree_util.tree_leaves(grads)
    assert len(leaves) == len(jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_array)))
    assert all(np.all(np.isfinite(g)) for g in leaves)
    assert all(np.max(np.abs(g)) > 0 for g in leaves)  # every parameter is used


@pytest.mark.parametrize("name", list(MODELS))
def test_dtype_in_equals_dtype_out(rng, key, dtype, name):
    z = normal(rng, (4,), dtype)
    for param_dtype in (jnp.float32, jnp.float64):  # matching and mixed precision
        model = build(name, 4, 2, key, dtype=param_dtype)
        assert {x.dtype for x in jax.tree_util.tree_leaves(model)} == {np.dtype(param_dtype)}
        assert model(z).dtype == dtype
        assert model.inverse(z, jnp.asarray(0.5, jnp.float64)).dtype == dtype
        assert model.config()["dtype"] == param_dtype


# --------------------------------------------------------------------------- config


@pytest.mark.parametrize("name", list(MODELS))
def test_config_rebuilds_the_same_skeleton(key, name):
    model = build(name, 4, 2, key, dtype=jnp.float32)
    assert isinstance(model, AbstractFeedForwardIntegrator)
    config = model.config()
    rebuilt = type(model)(**config, key=key())
    skeleton = shapes_only(type(model), **config, key=key())
    assert jax.tree_util.tree_structure(skeleton) == jax.tree_util.tree_structure(model)
    assert jax.tree_util.tree_structure(rebuilt) == jax.tree_util.tree_structure(model)
    shapes = lambda m: [(x.shape, x.dtype) for x in jax.tree_util.tree_leaves(m)]  # noqa: E731
    assert shapes(rebuilt) == shapes(model)
    assert rebuilt.config() == config


def test_public_names():
    for cls in (GSympNet, LASympNet, HenonNet):
        assert getattr(geomlearn, cls.__name__) is cls
        assert getattr(geomlearn.models, cls.__name__) is cls


# --------------------------------------------------------------------------- GSympNet


@pytest.mark.parametrize("n", [1, 2, 3])
def test_gsympnet_parameter_count_and_layout(key, n):
    model = shapes_only(GSympNet, 2 * n, n_layers=5, width=7, key=key())
    assert n_params(model) == 5 * 7 * (n + 2)
    assert [type(layer) for layer in model.layers] == [
        GradientLayerQ, GradientLayerP, GradientLayerQ, GradientLayerP, GradientLayerQ
    ]
    lower = shapes_only(GSympNet, 2 * n, n_layers=2, width=3, init_upper=False, key=key())
    assert [type(layer) for layer in lower.layers] == [GradientLayerP, GradientLayerQ]
    default = shapes_only(GSympNet, 2 * n, key=key())  # defaults: 2 layers, width = dim
    assert (default.n_layers, default.width) == (2, 2 * n)
    assert n_params(default) == 2 * (2 * n) * (n + 2)


def test_gsympnet_is_the_composition_of_its_layers(rng, key):
    model = build("GSympNet", 4, 2, key, rng)
    z = normal(rng, (4,))
    expected = z
    for layer in model.layers:
        expected = layer(expected, 0.3)
    np.testing.assert_array_equal(model(z, 0.3), expected)


def test_gsympnet_lower_start_sigmoid_is_symplectic(rng, key):
    model = GSympNet(4, n_layers=5, width=WIDTH, activation="sigmoid", init_upper=False, key=key())
    model = randomize(model, rng, 0.5)
    assert model.activation == "sigmoid"
    Z = normal(rng, (3, 4))
    assert np.max(residuals((model,), (Z,), jnp.asarray([1.0, -0.4, 2.0]))) <= 1e-12
    np.testing.assert_allclose(model.inverse(model(Z[0], 0.3), 0.3), Z[0], rtol=0, atol=1e-12)


def test_gsympnet_paper_pendulum_size(key):
    # Jin et al.'s pendulum G-SympNet: 5 gradient layers of width 30, sigmoid; each layer
    # has K (30 x 1), a (30) and b (30): 5 * 30 * 3 = 450 parameters.
    model = shapes_only(GSympNet, 2, n_layers=5, width=30, activation="sigmoid", key=key())
    assert n_params(model) == 450


# --------------------------------------------------------------------------- LASympNet


def test_lasympnet_defaults_are_the_paper_pendulum_network(key):
    model = shapes_only(LASympNet, 2, activation="sigmoid", key=key())
    # ℓ₃ ∘ N₂ ∘ ℓ₂ ∘ N₁ ∘ ℓ₁, every ℓ two symmetric linear shears plus a bias.
    assert (model.n_layers, model.n_linear) == (3, 2)
    assert len(model.linear_layers) == 3 and len(model.activation_layers) == 2
    assert all(
        [type(s) for s in module] == [LinearLayerQ, LinearLayerP] for module in model.linear_layers
    )
    assert [type(a) for a in model.activation_layers] == [ActivationLayerQ, ActivationLayerP]
    assert n_params(model) == 3 * (2 * 1 + 2) + 2 * 1 == 14


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("n_layers,n_linear", [(1, 1), (3, 2), (4, 5)])
def test_lasympnet_parameter_count(key, n, n_layers, n_linear):
    model = shapes_only(LASympNet, 2 * n, n_layers=n_layers, n_linear=n_linear, key=key())
    expected = n_layers * (n_linear * n * (n + 1) // 2 + 2 * n) + (n_layers - 1) * n
    assert n_params(model) == expected


def test_lasympnet_is_not_capped(key):
    model = shapes_only(LASympNet, 2, n_layers=17, n_linear=7, key=key())
    assert len(model.linear_layers) == 17 and len(model.activation_layers) == 16
    assert all(len(module) == 7 for module in model.linear_layers)


def test_lasympnet_matches_hand_composition(rng, key):
    n = 2
    model = build("LASympNet", 2 * n, 2, key, rng)
    z = normal(rng, (2 * n,))
    h = 0.6
    (l1, l2), (l3, l4) = model.linear_layers
    (act,) = model.activation_layers
    assert isinstance(act, ActivationLayerQ) and isinstance(l4, LinearLayerP)
    x = l2(l1(z, h), h) + h * model.biases[0]
    x = act(x, h)
    x = l4(l3(x, h), h) + h * model.biases[1]
    np.testing.assert_allclose(model(z, h), x, rtol=0, atol=1e-14)
    upper = shapes_only(LASympNet, 2 * n, n_layers=2, n_linear=3, init_upper=False, key=key())
    assert [type(s) for s in upper.linear_layers[0]] == [LinearLayerP, LinearLayerQ, LinearLayerP]
    assert isinstance(upper.activation_layers[0], ActivationLayerP)


# --------------------------------------------------------------------------- HenonNet


@pytest.mark.parametrize("n", [1, 2, 3])
def test_henonnet_parameter_count(key, n):
    model = shapes_only(HenonNet, 2 * n, n_layers=4, width=6, key=key())
    assert n_params(model) == 4 * (6 * (n + 2) + n)


def test_henonnet_is_the_composition_of_its_layers(rng, key):
    model = build("HenonNet", 4, 3, key, rng)
    z = normal(rng, (4,))
    expected = z
    for i in range(3):
        layer = model.layer(i)
        assert isinstance(layer, HenonLayer) and layer.K.shape == (WIDTH, 2)
        expected = layer(expected, 0.8)
    np.testing.assert_allclose(model(z, 0.8), expected, rtol=0, atol=1e-14)
    np.testing.assert_array_equal(model.layer(-1).eta, model.layers.eta[2])
    with pytest.raises(IndexError):
        model.layer(3)


# --------------------------------------------------------------------------- identity start


@eqx.filter_jit
def forward_and_back(model, Z, H):
    return jax.vmap(model)(Z, H), jax.vmap(model.inverse)(Z, H)


@pytest.mark.parametrize("name", list(MODELS))
def test_identity_init_is_exactly_the_identity_and_trains(rng, key, name):
    factory, _ = MODELS[name]
    Z = normal(rng, (4, 2))
    H = jnp.asarray([1.0, 0.3, -0.7, 1.6])

    def loss(m):
        return jnp.mean((jax.vmap(m)(Z, H) - jnp.roll(Z, 1, axis=1)) ** 2)

    for symmetric in (False, True):
        for _ in range(3):  # several keys: the parameters other than the output ones are drawn
            model = factory(2, 2, identity_init=True, symmetric=symmetric, key=key())
            assert model.identity_init and model.config()["identity_init"] is True
            out, back = forward_and_back(model, Z, H)
            np.testing.assert_array_equal(out, Z)  # exactly, not to round-off
            np.testing.assert_array_equal(back, Z)
        grads = eqx.filter_jit(eqx.filter_grad(loss))(model)
        leaves = [np.asarray(g) for g in jax.tree_util.tree_leaves(grads)]
        assert all(np.all(np.isfinite(g)) for g in leaves)
        assert max(np.max(np.abs(g)) for g in leaves) > 1e-3  # it can train from the identity
        moved = eqx.apply_updates(model, jax.tree_util.tree_map(lambda g: -0.5 * g, grads))
        assert np.max(np.abs(forward_and_back(moved, Z, H)[0] - Z)) > 1e-4
        assert np.max(residuals((moved,), (Z,), H)) <= 1e-12  # and stays symplectic
    default = factory(2, 2, key=key())
    assert default.identity_init is False  # the default start (the negative control) moves states
    assert np.max(np.abs(forward_and_back(default, Z, H)[0] - Z)) > 1e-3


def test_files_written_before_identity_init_load_without_it():
    folder = pathlib.Path(__file__).parent / "data" / "models"
    for name in MODELS:
        header, _ = gio._read_container(folder / f"{name}.geomlearn")
        assert "identity_init" not in header["config"]
        assert geomlearn.load(folder / f"{name}.geomlearn").identity_init is False
    # a checkpoint that predates the argument resumes a model with its default, not another
    checkpoint = folder / "GSympNet-checkpoint.geomlearn"
    assert "identity_init" not in gio._read_container(checkpoint)[0]["config"]
    like = dict(n_layers=1, width=2, key=jax.random.PRNGKey(0), dtype=jnp.float32)
    model, _, _ = geomlearn.load_checkpoint(checkpoint, GSympNet(2, **like))
    assert model.identity_init is False
    with pytest.raises(ValueError, match="written for a different model.*'identity_init': True"):
        geomlearn.load_checkpoint(checkpoint, GSympNet(2, identity_init=True, **like))


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("name", list(MODELS))
def test_model_errors(key, name):
    factory, _ = MODELS[name]
    with pytest.raises(ValueError, match="even"):
        factory(3, 2, key=key())
    with pytest.raises(ValueError, match="n_layers"):
        factory(4, -2, key=key())
    model = factory(4, 2, key=key())
    with pytest.raises(ValueError, match="last dimension 4"):
        model(jnp.ones(2))
    with pytest.raises(ValueError, match="1-d"):
        model(jnp.ones((3, 4)))
    with pytest.raises(TypeError, match="floating"):
        model(jnp.ones(4, dtype=jnp.int32))
    with pytest.raises(ValueError, match="scalar"):
        model(jnp.ones(4), jnp.ones(3))


def test_argument_errors(key):
    with pytest.raises(ValueError, match="width"):
        GSympNet(2, width=0, key=key())
    with pytest.raises(TypeError, match="init_upper"):
        GSympNet(2, init_upper=1, key=key())
    for cls in (GSympNet, LASympNet):
        with pytest.raises(TypeError, match="identity_init"):
            cls(2, identity_init=1, key=key())
    with pytest.raises(TypeError, match="identity_init"):
        HenonNet(2, n_layers=1, width=2, identity_init="yes", key=key())
    with pytest.raises(ValueError, match="n_linear"):
        LASympNet(2, n_linear=0, key=key())
    with pytest.raises(ValueError, match="unknown activation"):
        LASympNet(2, activation="softsign!", key=key())
    with pytest.raises(TypeError, match="width"):
        HenonNet(2, n_layers=2, width=None, key=key())
