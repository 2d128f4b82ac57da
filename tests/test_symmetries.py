"""Continuous symmetries of `GSympNet` and `HenonNet`: the momentum map conserved to
round-off over 10⁴ steps with random parameters (float32 and float64), the map
equivariant and still symplectic, each against the same network without the symmetry
(the negative control); save/load, the rollout, and one-line errors for bad symmetries."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn import symmetries
from geomlearn.geometry import symplecticity_residual

from _helpers import random_module

N_STEPS = 10_000

# (symmetry, dim, degree of the momentum map in z, a group element for `act`)
CASES = [
    (symmetries.Rotation(plane=(0, 1)), 4, 2, 0.7),
    (symmetries.Rotation(plane=(0, 2)), 6, 2, -1.1),
    (symmetries.Translation(axes=1), 4, 1, [0.8]),
    (symmetries.Translation(axes=0, particle_dim=1), 6, 1, [-0.6]),
    (symmetries.Rotation3(), 6, 2, [0.3, -0.5, 0.9]),
    (symmetries.Rotation3(), 12, 2, [-0.4, 0.2, 0.7]),
]
IDS = [f"{s.spec}-dim{d}" for s, d, _, _ in CASES]
FAMILIES = ["gsympnet", "henonnet"]


def build(family, dim, symmetry, seed, dtype=jnp.float64, symmetric=False):
    """A network with random (non-trivial) parameters whose orbits stay bounded: the
    weights `a` signed so that the potentials are confining (`tanh`: log-cosh
    potentials), offsets and shifts drawn too."""
    rng = np.random.default_rng(seed)
    if family == "gsympnet":
        model = random_module(lambda: gl.GSympNet(dim, n_layers=3, width=6, symmetry=symmetry, symmetric=symmetric,
                                                  key=jax.random.PRNGKey(0), dtype=dtype), rng, 0.4)
        signs = [0.25 if type(layer)._changes_q else -0.25 for layer in model.layers]
        return eqx.tree_at(lambda m: [layer.a for layer in m.layers], model,
                           [s * jnp.abs(layer.a) for s, layer in zip(signs, model.layers)])
    model = random_module(lambda: gl.HenonNet(dim, n_layers=2, width=6, symmetry=symmetry, symmetric=symmetric,
                                              key=jax.random.PRNGKey(0), dtype=dtype), rng, 0.4)
    return eqx.tree_at(lambda m: m.layers.a, model, -0.25 * jnp.abs(model.layers.a))


def relative_drift(model, symmetry, z0, degree):
    """`max_t |μ(z_t) − μ(z_0)|` over `N_STEPS` steps relative to the momentum map's
    scale `max_t |q_t|^(degree − 1) |p_t|`, and `max_t |z_t|`."""
    n = z0.shape[0] // 2

    def body(z, _):
        z = model(z)
        scale = jnp.linalg.norm(z[:n]) ** (degree - 1) * jnp.linalg.norm(z[n:])
        return z, (symmetry.momentum_map(z), scale, jnp.linalg.norm(z))

    _, (mu, scale, size) = jax.lax.scan(body, z0, None, length=N_STEPS)
    return jnp.max(jnp.abs(mu - symmetry.momentum_map(z0)[None])) / jnp.max(scale), jnp.max(size)


@eqx.filter_jit
def drifts(models, symmetry, z0, degree):
    return [relative_drift(m, symmetry, z0, degree) for m in models]


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("symmetry,dim,degree,g", CASES, ids=IDS)
def test_momentum_map_conserved_for_random_parameters(symmetry, dim, degree, g, family, dtype):
    """Round-off drift with the symmetry; the plain network (negative control) drifts by
    orders of magnitude more."""
    kept = build(family, dim, symmetry, 1, dtype)
    plain = build(family, dim, None, 1, dtype)
    z0 = jnp.asarray(np.random.default_rng(2).uniform(-1, 1, dim), dtype)
    (drift, size), (plain_drift, _) = drifts([kept, plain], symmetry, z0, degree)
    assert bool(jnp.isfinite(size)) and float(size) < 1e3  # a bounded orbit: a fair test
    eps = float(jnp.finfo(dtype).eps)
    tol = 1e-12 if dtype == jnp.float64 else 10 * eps * math.sqrt(N_STEPS)
    assert float(drift) <= tol
    assert float(plain_drift) > 100 * tol


def equivariance_and_structure(models, symmetry, z, g, round_trip=False):
    """`max |Φ(g·z) − g·Φ(z)|` of each model and the symplecticity residual of the first
    (and, with `round_trip`, its `Φ⁻¹(Φ(z))`), in one compiled function."""

    @eqx.filter_jit
    def residuals(models, z):
        off = [jnp.max(jnp.abs(m(symmetry.act(z, g)) - symmetry.act(m(z), g))) for m in models]
        out = off, symplecticity_residual(models[0], z)
        return (*out, models[0].inverse(models[0](z))) if round_trip else out

    return residuals(models, z)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("symmetry,dim,degree,g", CASES, ids=IDS)
def test_equivariant_and_symplectic(symmetry, dim, degree, g, family):
    """Φ(g·z) = g·Φ(z) to round-off (the plain network does not commute with g), and the
    symmetric network is still symplectic."""
    z = jnp.asarray(np.random.default_rng(4).uniform(-1, 1, dim))
    models = [build(family, dim, symmetry, 3), build(family, dim, None, 3)]
    (kept_off, plain_off), structure = equivariance_and_structure(models, symmetry, z, g)
    assert float(kept_off) <= 1e-12
    assert float(plain_off) > 1e-4
    assert float(structure) <= 1e-12


@pytest.mark.parametrize("family", FAMILIES)
def test_reversible_composition_keeps_the_symmetry(family):
    """`symmetric=True` with a symmetry: equivariant, symplectic, exactly invertible."""
    symmetry, g = symmetries.Rotation(plane=(0, 1)), 0.4
    z = jnp.asarray(np.random.default_rng(5).uniform(-1, 1, 4))
    model = build(family, 4, symmetry, 3, symmetric=True)
    (off,), structure, round_trip = equivariance_and_structure([model], symmetry, z, g,
                                                               round_trip=True)
    assert float(off) <= 1e-12 and float(structure) <= 1e-12
    assert float(np.max(np.abs(np.asarray(round_trip) - np.asarray(z)))) <= 1e-12


@pytest.mark.parametrize("family", FAMILIES)
def test_rollout_and_save_load(family, tmp_path):
    """The rollout iterates the model map (the fused form steps aside), and a model file
    keeps the symmetry: the same spec, the same group, bit-equal outputs."""
    symmetry = symmetries.Rotation(plane=(0, 1))
    model = build(family, 6, symmetry, 5)
    z0 = jnp.asarray(np.random.default_rng(6).uniform(-1, 1, (2, 6)))
    path = tmp_path / "model.geomlearn"
    gl.save(path, model)
    loaded = gl.load(path)
    assert loaded.symmetry == "rotation:0,1" and loaded.group == symmetry
    assert model.config()["symmetry"] == "rotation:0,1"
    states = gl.iterate(loaded, z0, 20)

    @eqx.filter_jit  # every reference in one compiled program
    def references(model, loaded, z0, states):
        def step(z, _):
            z = jax.vmap(model)(z)
            return z, z

        _, expected = jax.lax.scan(step, z0, None, length=19)
        mu = jax.vmap(jax.vmap(symmetry.momentum_map))(states)
        return loaded(z0[0]), model(z0[0]), expected, mu

    out_loaded, out_model, expected, mu = (
        np.asarray(x) for x in references(model, loaded, z0, states))
    assert bool(np.all(out_loaded == out_model))
    np.testing.assert_allclose(states[:, 1:], np.swapaxes(expected, 0, 1), rtol=0, atol=1e-13)
    assert float(np.max(np.abs(mu - mu[:, :1]))) <= 1e-13


def test_specs_and_defaults():
    """Strings resolve to the same objects; `symmetry=None` is today's network, bit for
    bit, and stores `None`."""
    for text in ["translation:0,2", "translation:0/1", "rotation:0,1", "rotation:0,2/3", "rotation3",
                 "particles:4/2", "permutation:0,1;2,3/2"]:
        assert symmetries.resolve_symmetry(text).spec == text
    assert symmetries.resolve_symmetry("particles:4/2") == symmetries.Particles(4, 2)
    assert symmetries.resolve_symmetry("permutation:0,1/3") == symmetries.Permutation([(0, 1)], particle_dim=3)
    assert symmetries.resolve_symmetry("rotation:1,0/3") == symmetries.Rotation((1, 0), particle_dim=3)
    key = jax.random.PRNGKey(0)
    z = jnp.asarray(np.linspace(-1.0, 1.0, 4))
    # built and called in one compiled program (eagerly, every initialiser compiles alone)
    plain, default, outputs = eqx.filter_jit(lambda key, z: (
        (plain := gl.GSympNet(4, key=key)), (default := gl.GSympNet(4, symmetry=None, key=key)),
        (plain(z), default(z))))(key, z)
    assert plain.config()["symmetry"] is None and plain.group is None
    assert eqx.tree_equal(plain, default)
    assert bool(np.all(np.asarray(outputs[0]) == np.asarray(outputs[1])))
    by_name = eqx.filter_eval_shape(  # its group only: no arrays needed
        lambda: gl.HenonNet(4, n_layers=1, width=3, symmetry="rotation:0,1", key=key))
    assert by_name.group == symmetries.Rotation(plane=(0, 1))


@pytest.mark.parametrize("make,message", [
    (lambda: gl.GSympNet(4, symmetry=symmetries.Rotation(plane=(0, 2)), key=jax.random.PRNGKey(0)),
     "every index must be below 2"),
    (lambda: gl.HenonNet(4, n_layers=1, width=2, symmetry="rotation:1,3", key=jax.random.PRNGKey(0)),
     "every index must be below 2"),
    (lambda: symmetries.Rotation(plane=(1, 1)), "two different indices"),
    (lambda: symmetries.Rotation(plane=(0, 1, 2)), "two indices"),
    (lambda: symmetries.Rotation(plane=(0, -1)), "non-negative"),
    (lambda: symmetries.Translation(axes=()), "at least one"),
    (lambda: symmetries.Translation(axes=3, particle_dim=3), "below particle_dim"),
    (lambda: gl.GSympNet(4, symmetry=symmetries.Rotation3(), key=jax.random.PRNGKey(0)),
     "particles of 3 coordinates"),
    (lambda: gl.HenonNet(6, n_layers=1, width=2, symmetry="translation:0/2", key=jax.random.PRNGKey(0)),
     "whole number of particles"),
    (lambda: gl.GSympNet(4, symmetry="reflection:0", key=jax.random.PRNGKey(0)), "symmetry must be"),
])
def test_bad_symmetries_raise_one_line(make, message):
    with pytest.raises(ValueError, match=message) as info:
        make()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("symmetry", [symmetries.Particles(2, 2),
                                      symmetries.Permutation([(0, 1)], particle_dim=2)])
def test_a_particle_symmetry_saves_and_loads(symmetry, tmp_path):
    """A GSympNet keeping a particle symmetry loads back with it (its spec resolves)."""
    model = random_module(lambda: gl.GSympNet(8, n_layers=2, width=3, symmetry=symmetry,
                                              key=jax.random.PRNGKey(0)),
                          np.random.default_rng(7), 0.5)
    gl.save(tmp_path / "m.geomlearn", model)
    loaded = gl.load(tmp_path / "m.geomlearn")
    z = jnp.asarray(np.linspace(-1.0, 1.0, 8))
    out_loaded, out_model = eqx.filter_jit(lambda a, b, z: (a(z), b(z)))(loaded, model, z)
    assert loaded.kept_symmetry() == symmetry
    assert bool(np.all(np.asarray(out_loaded) == np.asarray(out_model)))


def test_not_a_symmetry():
    with pytest.raises(TypeError, match="symmetry must be"):
        gl.GSympNet(4, symmetry=True, key=jax.random.PRNGKey(0))
