"""The Lennard-Jones cluster: its potential and force against hand-written formulas, its
invariants along a short Störmer–Verlet run, the symmetries of its energy, its bound
default states, its data set, and the errors for bad arguments."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomlearn import datasets
from geomlearn.integrators import integrate
from geomlearn.symmetries import Particles
from geomlearn.systems import LennardJonesCluster, TodaLattice


def rhs_lennard_jones(z, n, k, epsilon=1.0, sigma=1.0, mass=1.0):
    """The vector field written out by hand in NumPy, pair by pair:
    dV/dr = 4ε(-12σ¹²/r¹³ + 6σ⁶/r⁷), force on i from j = -dV/dr (x_i - x_j)/r."""
    x, p = z[: n * k].reshape(n, k), z[n * k:].reshape(n, k)
    force = np.zeros_like(x)
    for i in range(n):
        for j in range(n):
            if i != j:
                d = x[i] - x[j]
                r = np.linalg.norm(d)
                dvdr = 4 * epsilon * (-12 * sigma**12 / r**13 + 6 * sigma**6 / r**7)
                force[i] -= dvdr * d / r
    return np.concatenate([(p / mass).ravel(), force.ravel()])


def _pair(r, k=3):
    """Two particles a distance `r` apart along the first axis, at rest."""
    q = np.zeros(2 * k)
    q[k] = r
    return jnp.asarray(np.concatenate([q, np.zeros(2 * k)]))


def test_pair_potential_and_its_minimum():
    system = LennardJonesCluster(2, spatial_dim=3, epsilon=1.7, sigma=0.9)
    r_m = 2.0 ** (1.0 / 6.0) * 0.9
    assert system.minimum_distance == pytest.approx(r_m, rel=1e-15)
    energy = lambda r: float(system.hamiltonian(_pair(r)))  # noqa: E731
    for r in (0.8, 1.0, 1.3, 2.5):
        expected = 4 * 1.7 * ((0.9 / r) ** 12 - (0.9 / r) ** 6)
        assert energy(r) == pytest.approx(expected, rel=1e-13)
    assert energy(r_m) == pytest.approx(-1.7, rel=1e-13)
    assert energy(0.9) == pytest.approx(0.0, abs=1e-13)  # V(σ) = 0
    # the minimum: smaller on a fine grid nowhere, zero force there, not elsewhere
    grid = np.linspace(0.9 * r_m, 1.1 * r_m, 201)
    values = [energy(r) for r in grid]
    assert grid[int(np.argmin(values))] == pytest.approx(r_m, abs=grid[1] - grid[0])
    field = system.vector_field(_pair(r_m))
    assert np.max(np.abs(np.asarray(field))) < 1e-12
    assert np.max(np.abs(np.asarray(system.vector_field(_pair(1.05 * r_m))))) > 1e-2


def test_two_particle_force_is_minus_dV_dr():
    system = LennardJonesCluster(2, spatial_dim=2)
    for r in (0.95, 1.12, 1.6):
        dvdr = 4 * (-12 / r**13 + 6 / r**7)
        f = np.asarray(system.vector_field(_pair(r, k=2)))
        # dp/dt of particle 2 (at +r on the x axis) is -dV/dr, particle 1 the opposite
        np.testing.assert_allclose(f[4:], [dvdr, 0.0, -dvdr, 0.0], rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("k", [2, 3])
def test_vector_field_matches_hand_written(k):
    system = LennardJonesCluster(5, spatial_dim=k, epsilon=0.8, sigma=1.1, mass=1.7)
    rng = np.random.default_rng(k)
    zs = np.asarray(system.default_initial_conditions(jnp.float64)) + 0.05 * rng.normal(
        size=(4, system.dim))
    got = np.asarray(jax.vmap(system.vector_field)(jnp.asarray(zs)))
    expected = np.stack([rhs_lennard_jones(z, 5, k, 0.8, 1.1, 1.7) for z in zs])
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    # negative control: another well depth is seen
    other = np.stack([rhs_lennard_jones(z, 5, k, 0.9, 1.1, 1.7) for z in zs])
    assert not np.allclose(got, other, rtol=1e-6)


def test_force_is_minus_the_finite_difference_gradient():
    system = LennardJonesCluster(6, spatial_dim=3)
    q = system.default_initial_conditions(jnp.float64)[1, : system.dim // 2]
    force = -np.asarray(system.grad_potential(q))
    h, fd = 1e-6, np.zeros(q.shape[0])
    for i in range(q.shape[0]):
        e = jnp.zeros_like(q).at[i].set(h)
        fd[i] = -(float(system.potential(q + e)) - float(system.potential(q - e))) / (2 * h)
    np.testing.assert_allclose(force, fd, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("k", [2, 3])
def test_energy_is_invariant_under_translations_and_rotations(k):
    system = LennardJonesCluster(7, spatial_dim=k)
    z = np.asarray(system.default_initial_conditions(jnp.float64)[2])
    n = system.dim // 2
    x, p = z[:n].reshape(7, k), z[n:].reshape(7, k)
    rng = np.random.default_rng(0)
    rotation, _ = np.linalg.qr(rng.normal(size=(k, k)))
    moved = np.concatenate([(x @ rotation.T + rng.normal(size=k)).ravel(),
                            (p @ rotation.T).ravel()])
    H = lambda v: float(system.hamiltonian(jnp.asarray(v)))  # noqa: E731
    assert H(moved) == pytest.approx(H(z), rel=1e-13)
    # negative control: stretching one axis changes it
    stretched = np.concatenate([(x * np.r_[1.05, np.ones(k - 1)]).ravel(), p.ravel()])
    assert abs(H(stretched) - H(z)) > 1e-3 * abs(H(z))


@pytest.mark.parametrize("k", [2, 3])
def test_the_declared_group_keeps_the_energy(k):
    """`group` is `Particles(N, k)`, and its whole action — relabelling, orthogonal map
    and shift together — keeps H; a chain declares none, and relabelling changes its H."""
    system = LennardJonesCluster(7, spatial_dim=k)
    assert system.group == Particles(7, k)
    z = system.default_initial_conditions(jnp.float64)[1]
    rng = np.random.default_rng(1)
    rotation, _ = np.linalg.qr(rng.normal(size=(k, k)))
    g = (jnp.asarray(rotation), jnp.asarray(rng.normal(size=k)), jnp.asarray(rng.permutation(7)))
    moved = system.group.act(z, g)
    assert float(jnp.max(jnp.abs(moved - z))) > 0.1
    assert float(system.hamiltonian(moved)) == pytest.approx(float(system.hamiltonian(z)), rel=1e-13)
    chain = TodaLattice(7)
    assert chain.group is None
    y = jnp.asarray(0.5 * rng.normal(size=chain.dim))
    swapped = Particles(7, 1).act(y, (None, None, jnp.asarray([1, 0, 2, 3, 4, 5, 6])))
    assert abs(float(chain.hamiltonian(swapped) - chain.hamiltonian(y))) > 1e-6


@pytest.mark.parametrize("k, names", [
    (2, ["energy", "momentum_x", "momentum_y", "angular_momentum"]),
    (3, ["energy", "momentum_x", "momentum_y", "momentum_z", "angular_momentum_x",
         "angular_momentum_y", "angular_momentum_z"]),
])
def test_invariants_are_conserved_by_a_short_verlet_run(k, names):
    system = LennardJonesCluster(6, spatial_dim=k)
    assert list(system.invariants) == names and system.particle_dimension == k
    z0 = np.array(system.default_initial_conditions(jnp.float64)[3])
    n = system.dim // 2
    x = z0[:n].reshape(6, k)
    spin = (np.stack([-x[:, 1], x[:, 0]], axis=1) if k == 2
            else np.cross([0.1, 0.2, 0.3], x))
    z0[n:] += 0.1 * spin.ravel() + 0.05  # a spin and a drift: no invariant is zero
    states = integrate(system, jnp.asarray(z0), 1e-3, 2000, method="stormer_verlet")
    values = {name: np.asarray(jax.vmap(f)(states)) for name, f in system.invariants.items()}
    assert np.max(np.abs(values["energy"] - values["energy"][0])) < 1e-5 * abs(values["energy"][0])
    for name in names[1:]:  # exact for Verlet up to round-off
        assert abs(values[name][0]) > 1e-3, name
        np.testing.assert_allclose(values[name], values[name][0], rtol=0, atol=1e-11)
    # the particles did move
    assert np.max(np.abs(np.asarray(states[-1] - states[0]))) > 1e-2


def test_default_states_are_bound_deterministic_and_without_momentum():
    for n, k in ((38, 3), (32, 2)):
        system = LennardJonesCluster(n, spatial_dim=k)
        z0 = np.asarray(system.default_initial_conditions(jnp.float64))
        assert z0.shape == (4, 4 * n * k // 2) and system.dim == 2 * n * k
        np.testing.assert_array_equal(z0, system.default_initial_conditions(jnp.float64))
        energy = np.asarray(jax.vmap(system.hamiltonian)(jnp.asarray(z0)))
        assert np.all(energy < -2.0 * n)  # far below the dissociation energy 0
        for name, f in system.invariants.items():
            if name != "energy":
                assert np.max(np.abs(np.asarray(jax.vmap(f)(jnp.asarray(z0))))) < 1e-12, name
        x = z0[0, : n * k].reshape(n, k)
        gaps = np.linalg.norm(x[:, None] - x[None], axis=-1) + 10 * np.eye(n)
        assert gaps.min() > 0.9 * system.minimum_distance  # no overlapping particles
        # the kinetic energies grow with the documented temperatures
        kinetic = np.sum(z0[:, n * k:] ** 2, axis=1) / 2
        assert np.all(np.diff(kinetic) > 0)
    assert system.labels[:3] == ("x1", "y1", "x2") and system.labels[2 * n] == "px1"


def test_data_set_draws_bound_clusters():
    system = LennardJonesCluster(4, spatial_dim=2)
    data = datasets.lennard_jones(jax.random.PRNGKey(0), n_trajectories=3, n_steps=20,
                                  system=system, dtype=jnp.float64)
    assert data.states.shape == (3, 21, 16) and data.dt == 0.01
    again = datasets.lennard_jones(jax.random.PRNGKey(0), n_trajectories=3, n_steps=20,
                                   system=system, dtype=jnp.float64)
    np.testing.assert_array_equal(data.states, again.states)
    energy = np.asarray(jax.vmap(jax.vmap(system.hamiltonian))(data.states))
    assert np.all(energy < 0) and np.max(np.abs(energy - energy[:, :1])) < 1e-7


@pytest.mark.parametrize("kwargs, error, match", [
    ({"n_particles": 1}, ValueError, "n_particles must be >= 2"),
    ({"n_particles": 2.5}, TypeError, "n_particles must be an integer"),
    ({"spatial_dim": 1}, ValueError, "spatial_dim must be 2 or 3"),
    ({"spatial_dim": 4}, ValueError, "spatial_dim must be 2 or 3"),
    ({"epsilon": 0.0}, ValueError, "epsilon must be > 0"),
    ({"sigma": -1.0}, ValueError, "sigma must be > 0"),
    ({"mass": 0.0}, ValueError, "mass must be > 0"),
    ({"mass": math.inf}, ValueError, "mass must be finite"),
])
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        LennardJonesCluster(**kwargs)


def test_dimension_specific_invariants_say_so():
    with pytest.raises(ValueError, match="3-D"):
        LennardJonesCluster(3, spatial_dim=2).momentum_z(jnp.zeros(12))
    with pytest.raises(ValueError, match="2-D"):
        LennardJonesCluster(3, spatial_dim=3).angular_momentum(jnp.zeros(18))
    with pytest.raises(ValueError, match=r"shape \(12,\)"):
        LennardJonesCluster(3, spatial_dim=2).hamiltonian(jnp.zeros(13))
