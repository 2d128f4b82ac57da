"""Time-symmetric (reversible) SympNet compositions: `symmetric=True` on every SympNet
family with an exact inverse."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn.geometry import symplecticity_residual

from _helpers import normal, randomize


@pytest.fixture
def rng():
    return np.random.default_rng(31)


FAMILIES = {
    "GSympNet": lambda d, **kw: gl.GSympNet(d, n_layers=3, width=4, **kw),
    "LASympNet": lambda d, **kw: gl.LASympNet(d, n_layers=2, n_linear=2, **kw),
    "HenonNet": lambda d, **kw: gl.HenonNet(d, n_layers=2, width=4, **kw),
    "PSympNet": lambda d, **kw: gl.PSympNet(d, n_layers=4, max_degree=3, min_degree=1, **kw),
    "RSympNet": lambda d, **kw: gl.RSympNet(d, n_layers=4, width=2, **kw),
}


def flip(z):
    n = z.shape[-1] // 2
    return jnp.concatenate([z[..., :n], -z[..., n:]], axis=-1)


@eqx.filter_jit
def reversibility_and_symplecticity(model, Z, h):
    rev = jax.vmap(lambda z: jnp.max(jnp.abs(flip(model(flip(model(z, h)), h)) - z)))(Z)
    sym = jax.vmap(lambda z: symplecticity_residual(lambda v: model(v, h), z))(Z)
    return rev, sym


@pytest.mark.parametrize("name", list(FAMILIES))
def test_symmetric_map_is_reversible_and_symplectic(name, rng, key, tol, dtype):
    model = randomize(FAMILIES[name](4, symmetric=True, key=key(), dtype=dtype), rng, 0.5)
    assert model.symmetric and model.config()["symmetric"] is True
    Z = normal(rng, (4, 4), dtype)
    for h in (1.0, 0.3):  # one compile: h is a traced scalar
        rev, sym = reversibility_and_symplecticity(model, Z, jnp.asarray(h, dtype))
        assert rev.dtype == dtype
        assert float(jnp.max(rev)) <= 10 * tol(dtype), rev  # R∘Φ∘R∘Φ = id to round-off
        assert float(jnp.max(sym)) <= tol(dtype, "structure"), sym
    out = jax.vmap(model)(Z)
    assert float(jnp.max(jnp.abs(out - Z))) > 1e-3
    if dtype == jnp.float64:
        np.testing.assert_allclose(jax.vmap(model.inverse)(out), Z, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_negative_control_plain_map_is_not_reversible(name, rng, key):
    model = randomize(FAMILIES[name](4, key=key()), rng, 0.5)
    assert not model.symmetric
    rev, sym = reversibility_and_symplecticity(model, normal(rng, (4, 4)), jnp.asarray(1.0))
    assert float(jnp.min(rev)) > 1e-4
    assert float(jnp.max(sym)) <= 1e-12


def test_symmetric_is_half_step_then_flipped_inverse(rng, key):
    """S_h = R ∘ Φ_{h/2}⁻¹ ∘ R ∘ Φ_{h/2}, built from the plain model with the same arrays."""
    sym = randomize(gl.PSympNet(4, n_layers=3, max_degree=3, symmetric=True, key=key()), rng, 0.5)
    plain = eqx.tree_at(
        lambda m: m.layers, gl.PSympNet(4, n_layers=3, max_degree=3, key=key()), sym.layers
    )
    z = normal(rng, (4,))
    for h in (None, 0.8):
        half = 0.5 if h is None else h / 2
        expected = flip(plain.inverse(flip(plain(z, half)), half))
        np.testing.assert_allclose(sym(z, h), expected, rtol=0, atol=1e-15)


def test_symmetric_round_trips_through_save_and_load(key, tmp_path):
    model = gl.HenonNet(2, n_layers=2, width=3, symmetric=True, key=key())
    gl.save(tmp_path / "m", model)
    loaded = gl.load(tmp_path / "m")
    assert loaded.symmetric
    z = jnp.array([0.3, -0.2])
    np.testing.assert_array_equal(loaded(z), model(z))
