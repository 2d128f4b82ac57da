"""Symmetries of `HamiltonianNeuralNetwork` and `CorrectedIntegrator`: the momentum map
conserved to round-off along rollouts with random parameters (float32 and float64),
each against the same model without the symmetry (the negative control); the learned
energy invariant and the step equivariant; the system's invariance checked; save/load,
the files written without a symmetry, and one-line errors."""

import math
import pathlib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn import symmetries
from geomlearn.integrators import ImplicitMidpoint, StormerVerlet

from _helpers import random_module

MODELS = pathlib.Path(__file__).parent / "data" / "models"
N_STEPS = 1000
DT = 0.1
#: The stage solve stops at changes of 128·eps of the state's size (geomlearn.integrators):
#: per step the momentum map moves by round-off of that order, a random walk over the steps.
SOLVE_EPS = 128

# (symmetry, dim, a group element for `act`, the scale of the random parameters: orbits
# of random networks of the features stay bounded over the rollout at this scale)
HNN_CASES = [
    (symmetries.Rotation(plane=(0, 1)), 4, 0.7, 0.3),
    (symmetries.Translation(axes=1), 4, [0.8], 0.3),
    (symmetries.Rotation3(), 6, [0.3, -0.5, 0.9], 0.3),
    (symmetries.Particles(2, 2), 8, (np.array([[0.6, -0.8], [0.8, 0.6]]), [0.5, -0.3], [1, 0]), 0.1),
]
HNN_IDS = [f"{s.spec}-dim{d}" for s, d, _, _ in HNN_CASES]


def hnn(dim, symmetry, seed=1, dtype=jnp.float64, scale=0.5):
    """A network with random weights and biases (not Glorot's, not zero)."""
    return random_module(lambda: gl.HamiltonianNeuralNetwork(
        dim, width=6, depth=2, symmetry=symmetry, dt=DT, key=jax.random.PRNGKey(0), dtype=dtype),
        np.random.default_rng(seed), scale)


def drift_tolerance(dtype, n_steps=N_STEPS):
    return SOLVE_EPS * float(jnp.finfo(dtype).eps) * math.sqrt(n_steps)


@eqx.filter_jit
def relative_drifts(models, symmetry, z0, n_points):
    """For each model, `max_t |μ(z_t) − μ(z_0)|` along its rollout (the model's own
    `rollout`, the map `iterate` scans) relative to the momentum map's scale
    `max_t (1 + |q_t|) |p_t|`, and `max_t |z_t|`."""
    n = z0.shape[0] // 2
    out = []
    for model in models:
        states = model.rollout(z0, n_points, model.rollout_task(z0.shape))
        mu = jax.vmap(symmetry.momentum_map)(states)
        norms = jnp.linalg.norm(states[:, :n], axis=-1), jnp.linalg.norm(states[:, n:], axis=-1)
        scale = jnp.max((1 + norms[0]) * norms[1])
        out.append((jnp.max(jnp.abs(mu - mu[:1])) / scale, jnp.max(jnp.abs(states))))
    return out


# ------------------------------------------------------------------- the HNN


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("symmetry,dim,g,scale", HNN_CASES, ids=HNN_IDS)
def test_hnn_conserves_the_momentum_map(symmetry, dim, g, scale, dtype):
    """Implicit midpoint of an invariant H_θ keeps μ (linear or quadratic; for particles
    the total and the angular momentum) to the solve's round-off over the rollout; the
    plain network drifts by orders of magnitude more."""
    z0 = jnp.asarray(np.random.default_rng(2).uniform(-1, 1, dim), dtype)
    models = [hnn(dim, symmetry, dtype=dtype, scale=scale), hnn(dim, None, dtype=dtype, scale=scale)]
    (drift, size), (plain_drift, _) = relative_drifts(models, symmetry, z0, N_STEPS + 1)
    assert bool(jnp.isfinite(size)) and float(size) < 1e2  # a bounded orbit: a fair test
    tol = drift_tolerance(dtype)
    assert float(drift) <= tol
    assert float(plain_drift) > 100 * tol


@eqx.filter_jit
def _invariance(models, symmetry, z, g):
    """`|H(g·z) − H(z)|` and `max |Φ(g·z) − g·Φ(z)|` (one implicit-midpoint step) of each
    model."""
    task = models[0].rollout_task(z.shape)
    gz = symmetry.act(z, g)
    return [(jnp.abs(m.hamiltonian(gz) - m.hamiltonian(z)),
             jnp.max(jnp.abs(m.step(gz, task) - symmetry.act(m.step(z, task), g)))) for m in models]


EQUIVARIANCE_CASES = [c for c in HNN_CASES if not isinstance(c[0], symmetries.Rotation3)]  # expm: slow to compile


@pytest.mark.parametrize("symmetry,dim,g,scale", EQUIVARIANCE_CASES,
                         ids=[f"{s.spec}-dim{d}" for s, d, _, _ in EQUIVARIANCE_CASES])
def test_hnn_energy_invariant_and_step_equivariant(symmetry, dim, g, scale):
    """H_θ(g·z) = H_θ(z) and Φ(g·z) = g·Φ(z) for one implicit-midpoint step, to
    round-off; neither for the plain network."""
    z = jnp.asarray(np.random.default_rng(4).uniform(-1, 1, dim))
    (h_off, step_off), (plain_h_off, plain_step_off) = _invariance(
        [hnn(dim, symmetry, seed=5), hnn(dim, None, seed=5)], symmetry, z, g)
    assert float(h_off) <= 1e-13 and float(step_off) <= 1e-13
    assert float(plain_h_off) > 1e-4 and float(plain_step_off) > 1e-4


def test_hnn_symmetry_is_stored_and_loads(tmp_path):
    """The spec, the group and `kept_symmetry`; inputs are the features; a file keeps
    them and the same energy; `symmetry=None` is the plain network, bit for bit."""
    key = jax.random.PRNGKey(0)
    model = gl.HamiltonianNeuralNetwork(4, width=5, depth=1, symmetry="rotation:0,1", key=key)
    assert model.symmetry == "rotation:0,1" and model.kept_symmetry() == symmetries.Rotation((0, 1))
    assert model.weights[0].shape == (5, 2)  # |q|², |p|²
    gl.save(tmp_path / "hnn.geomlearn", model)
    loaded = gl.load(tmp_path / "hnn.geomlearn")
    z = jnp.linspace(-1.0, 1.0, 4)
    assert loaded.group == model.group and loaded.config()["symmetry"] == "rotation:0,1"
    assert float(loaded.hamiltonian(z)) == float(model.hamiltonian(z))
    plain = gl.HamiltonianNeuralNetwork(4, width=5, depth=1, key=key)
    default = gl.HamiltonianNeuralNetwork(4, width=5, depth=1, symmetry=None, key=key)
    assert plain.symmetry is None and plain.kept_symmetry() is None and plain.weights[0].shape == (5, 4)
    assert float(plain.hamiltonian(z)) == float(default.hamiltonian(z))


# ------------------------------------------------------- the corrected integrator


def corrected(symmetry, dtype=jnp.float64, method=StormerVerlet(), seed=1):
    """Kepler's step between two random GSympNet corrections, each with its own
    parameters (at this seed and scale the orbit from (1, 0, 0, 1) stays bounded)."""
    correction = random_module(lambda: gl.GSympNet(4, n_layers=2, width=4, symmetry=symmetry,
                                                   key=jax.random.PRNGKey(0), dtype=dtype),
                               np.random.default_rng(seed), 0.2)
    model = gl.CorrectedIntegrator(gl.systems.Kepler(), correction, method=method, symmetry=symmetry, dt=0.05)
    after = random_module(lambda: model.after, np.random.default_rng(seed + 1), 0.2)
    return eqx.tree_at(lambda m: m.after, model, after)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64], ids=["float32", "float64"])
def test_corrected_kepler_conserves_angular_momentum(dtype):
    """C_after ∘ Verlet ∘ C_before with rotation:0,1 keeps L to round-off for random
    corrections; the same without the symmetry does not."""
    symmetry = symmetries.Rotation(plane=(0, 1))
    z0 = jnp.asarray([1.0, 0.0, 0.0, 1.0], dtype)
    (drift, size), (plain_drift, _) = relative_drifts(
        [corrected(symmetry, dtype), corrected(None, dtype)], symmetry, z0, N_STEPS + 1)
    assert float(size) < 1e2
    tol = 10 * float(jnp.finfo(dtype).eps) * math.sqrt(N_STEPS)  # explicit steps: no solve
    assert float(drift) <= tol
    assert float(plain_drift) > 100 * tol


def test_corrected_with_an_implicit_method_conserves_angular_momentum():
    """Implicit midpoint as the classical step keeps the quadratic L as well."""
    symmetry = symmetries.Rotation(plane=(0, 1))
    z0 = jnp.asarray([1.0, 0.0, 0.0, 1.0])
    (drift, size), = relative_drifts([corrected(symmetry, method=ImplicitMidpoint())], symmetry, z0, 301)
    assert float(size) < 1e2 and float(drift) <= drift_tolerance(jnp.float64, 300)


def test_the_default_correction_keeps_the_symmetry():
    """`correction=None` builds identity-initialised corrections that keep the group:
    the untrained model is the classical step."""
    model = gl.CorrectedIntegrator(gl.systems.Kepler(), symmetry="rotation:0,1", dt=0.05,
                                   key=jax.random.PRNGKey(0))
    assert model.kept_symmetry() == symmetries.Rotation((0, 1)) and model.symmetry == "rotation:0,1"
    assert model.before.kept_symmetry() == model.after.kept_symmetry() == model.group
    z = jnp.asarray([1.0, 0.2, -0.1, 0.9])
    classical, _ = StormerVerlet().step(gl.systems.Kepler(), z, jnp.asarray(0.05))
    assert bool(jnp.all(model(z) == classical))


def test_corrected_symmetry_saves_and_loads(tmp_path):
    model = corrected(symmetries.Rotation(plane=(0, 1)))
    gl.save(tmp_path / "c.geomlearn", model)
    loaded = gl.load(tmp_path / "c.geomlearn")
    assert loaded.symmetry == "rotation:0,1" and loaded.kept_symmetry() == model.group
    z = jnp.asarray([0.9, -0.3, 0.2, 1.1])
    assert bool(jnp.all(loaded(z) == model(z)))


def test_files_without_a_symmetry_load_without_one():
    """Model files written before `symmetry=` existed load as the plain models."""
    for name in ("HamiltonianNeuralNetwork", "CorrectedIntegrator"):
        model = gl.load(MODELS / f"{name}.geomlearn")
        assert model.symmetry is None and model.kept_symmetry() is None


@pytest.mark.parametrize("make,message", [
    (lambda k: gl.CorrectedIntegrator(gl.systems.HenonHeiles(), symmetry="rotation:0,1", key=k),
     "not a symmetry of HenonHeiles"),
    (lambda k: gl.CorrectedIntegrator(gl.systems.Kepler(), symmetry="translation:0", key=k),
     "not a symmetry of Kepler"),
    (lambda k: gl.CorrectedIntegrator(gl.systems.Kepler(), symmetry="permutation:0,1", key=k),
     "no momentum map"),
    (lambda k: gl.CorrectedIntegrator(gl.systems.Kepler(), gl.GSympNet(4, key=k), symmetry="rotation:0,1"),
     "must keep the symmetry 'rotation:0,1'.*keeping none"),
    (lambda k: gl.CorrectedIntegrator(gl.systems.Kepler(), gl.GSympNet(4, symmetry="translation:0", key=k),
                                      symmetry="rotation:0,1"),
     "keeping 'translation:0'"),
    (lambda k: gl.CorrectedIntegrator(gl.systems.Kepler()), "a key to build the default one"),
    (lambda k: gl.CorrectedIntegrator(gl.systems.Kepler(), symmetry="rotation3", key=k),
     "particles of 3 coordinates"),
    (lambda k: gl.HamiltonianNeuralNetwork(4, width=2, depth=1, symmetry="rotation:0,2", key=k),
     "every index must be below 2"),
])
def test_refusals_are_one_line(make, message):
    with pytest.raises(ValueError, match=message) as info:
        make(jax.random.PRNGKey(0))
    assert "\n" not in str(info.value)


def test_a_symmetric_system_is_accepted():
    """The check passes where H is invariant: the three-body problem under the rigid
    motions of the plane (total momentum and angular momentum)."""
    model = gl.CorrectedIntegrator(gl.systems.ThreeBody(), symmetry="particles:3/2", key=jax.random.PRNGKey(0))
    assert model.kept_symmetry() == symmetries.Particles(3, 2)
