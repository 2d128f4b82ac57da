import math

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import ellipj, ellipk

from geomlearn.data import TrajectoryData
from geomlearn.datasets import (
    coupled_oscillator_lst,
    pendulum_sympnets,
    rigid_body_vpt,
    rigid_body_vpt_initial_conditions,
    rigid_body_vpt_validation,
)
from geomlearn.integrators import integrate
from geomlearn.systems import CoupledHarmonicOscillator, Pendulum, RigidBody


def pendulum_exact(q0, t):
    """H = p²/2 - cos q from (q0, 0): sin(q/2) = k sn(K - t | k²), p = -2k cn(K - t | k²)."""
    k = np.sin(q0 / 2)
    sn, cn, _, _ = ellipj(ellipk(k * k) - t, k * k)
    return np.stack([2 * np.arcsin(k * sn), -2 * k * cn], axis=-1)


def test_pendulum_sympnets():
    train, test = pendulum_sympnets()
    assert isinstance(train, TrajectoryData) and isinstance(test, TrajectoryData)
    assert train.states.shape == (1, 41, 2) and test.states.shape == (1, 101, 2)
    assert train.dt == test.dt == 0.1
    np.testing.assert_array_equal(train.states[0, 0], [1.0, 0.0])
    np.testing.assert_array_equal(train.states[0, -1], test.states[0, 0])  # test continues
    x, _ = train.pairs()
    assert x.shape == (40, 2) and test.pairs()[0].shape == (100, 2)
    # The reference solution is accurate: against the exact (elliptic) solution.
    t = 0.1 * np.arange(141)
    full = np.concatenate([np.asarray(train.states[0]), np.asarray(test.states[0, 1:])])
    np.testing.assert_allclose(full, pendulum_exact(1.0, t), atol=1e-9)
    # ... which a coarse, low-order solution would not be (the check can fail).
    coarse = integrate(Pendulum(), jnp.array([1.0, 0.0]), 0.1, 140, method="stormer_verlet")
    assert np.abs(np.asarray(coarse) - pendulum_exact(1.0, t)).max() > 1e-4
    # dtype option
    train32, _ = pendulum_sympnets(dtype=jnp.float32)
    assert train32.states.dtype == jnp.float32


def test_rigid_body_vpt():
    z0 = np.asarray(rigid_body_vpt_initial_conditions())
    assert z0.shape == (1238, 3)
    v = 0.1 + 0.01 * np.arange(619)
    assert v[-1] <= 2 * math.pi < v[-1] + 0.01
    zero = np.zeros_like(v)
    np.testing.assert_allclose(z0[:619], np.stack([np.sin(v), zero, np.cos(v)], 1), atol=1e-15)
    np.testing.assert_allclose(z0[619:], np.stack([zero, np.sin(v), np.cos(v)], 1), atol=1e-15)

    data = rigid_body_vpt()
    assert (data.n_trajectories, data.n_steps, data.dim, data.dt) == (1238, 100, 3, 0.2)
    np.testing.assert_array_equal(data.states[:, 0], z0)
    # implicit midpoint: the Casimir |z|² = 1 and the energy are kept to round-off.
    states = np.asarray(data.states)
    assert np.abs(np.sum(states**2, axis=-1) - 1.0).max() <= 1e-13
    energy = np.asarray(jax.vmap(jax.vmap(RigidBody().hamiltonian))(data.states))
    assert np.abs(energy - energy[:, :1]).max() <= 1e-13
    # and it is the implicit-midpoint trajectory (not another method's)
    sample = integrate(RigidBody(), z0[::300], 0.2, 100, method="implicit_midpoint")
    np.testing.assert_allclose(states[::300], sample, rtol=0, atol=1e-14)
    other = integrate(RigidBody(), z0[::300], 0.2, 100, method="gauss_legendre4")
    assert np.abs(states[::300] - np.asarray(other)).max() > 1e-4


def test_rigid_body_vpt_validation():
    z = np.asarray(rigid_body_vpt_validation())
    s, c = math.sin(1.1), math.cos(1.1)
    np.testing.assert_array_equal(z, [[s, 0.0, c], [0.0, s, c]])
    assert rigid_body_vpt_validation(dtype=jnp.float32).dtype == jnp.float32


def test_coupled_oscillator_lst(key):
    k = key()
    data = coupled_oscillator_lst(k)
    assert data.states.shape == (5, 334, 4) and data.dt == 0.3
    assert 0.3 * data.n_steps <= 100.0 < 0.3 * (data.n_steps + 1)
    z0 = np.asarray(data.states[:, 0])
    assert np.all((z0 >= 0) & (z0 < 1))
    np.testing.assert_array_equal(z0, jax.random.uniform(k, (5, 4), dtype=jnp.float64))
    expected = integrate(CoupledHarmonicOscillator(), z0, 0.3, 333, method="implicit_midpoint")
    np.testing.assert_array_equal(data.states, expected)
    # deterministic in the key, different across keys
    np.testing.assert_array_equal(coupled_oscillator_lst(k).states[:, 0], z0)
    assert not np.allclose(coupled_oscillator_lst(key()).states[:, 0], z0)


# ------------------------------------------------- sampled data sets, accurate references

import pytest  # noqa: E402

from geomlearn import datasets  # noqa: E402
from geomlearn.cli._recipes import MAX_TRAJECTORIES, RECIPES  # noqa: E402
from geomlearn.integrators import GaussLegendre6, ImplicitMidpoint, Yoshida6  # noqa: E402
from geomlearn.systems import (  # noqa: E402
    DoublePendulum,
    HarmonicOscillator,
    HenonHeiles,
    Kepler,
    ThreeBody,
)

#: function, system, method and first substeps as stated in each docstring.
SAMPLED = {
    "harmonic_oscillator": (datasets.harmonic_oscillator, HarmonicOscillator(), Yoshida6(), 2),
    "henon_heiles": (datasets.henon_heiles, HenonHeiles(), Yoshida6(), 2),
    "kepler": (datasets.kepler, Kepler(), Yoshida6(), 8),
    "three_body": (datasets.three_body, ThreeBody(), Yoshida6(), 32),
    "double_pendulum": (datasets.double_pendulum, DoublePendulum(), GaussLegendre6(), 4),
}


#: what each docstring states about the initial states (checked on the first states).
def _in_range(name, z0):
    if name == "harmonic_oscillator":
        energy = np.asarray(jax.vmap(HarmonicOscillator().hamiltonian)(z0))
        return np.all((energy >= 0.05) & (energy <= 0.5))
    if name == "henon_heiles":
        energy = np.asarray(jax.vmap(HenonHeiles().hamiltonian)(z0))
        return np.all((energy >= 0.02) & (energy <= 0.12))
    if name == "kepler":  # H = -1/(2a), a in [0.8, 1.2]
        energy = np.asarray(jax.vmap(Kepler().hamiltonian)(z0))
        return np.all((energy >= -1 / 1.6 - 1e-12) & (energy <= -1 / 2.4 + 1e-12))
    if name == "three_body":  # zero total momentum, centre of mass at the origin
        z0 = np.asarray(z0)
        return (np.abs(z0.reshape(-1, 2, 3, 2).sum(2)).max() < 1e-14
                and np.abs(z0 - np.asarray(ThreeBody().default_initial_conditions())[0]).max() < 0.1)
    z0 = np.asarray(z0)  # double pendulum: a box
    return np.all(np.abs(z0[:, :2]) <= 1) and np.all(np.abs(z0[:, 2:]) <= 0.5)


@pytest.mark.parametrize("name", sorted(SAMPLED))
def test_sampled_reference_is_accurate_to_1e8(name):
    """The stated method and substeps, and the substep-halving difference ≤ 1e-8."""
    make, system, method, substeps = SAMPLED[name]
    data = make(jax.random.PRNGKey(3), n_trajectories=8, n_steps=6)
    assert data.states.shape == (8, 7, system.dim) and data.dt == 0.1
    assert data.dtype == jnp.float64  # x64 in the tests: the default float
    z0 = data.states[:, 0]
    assert _in_range(name, z0)
    np.testing.assert_array_equal(
        data.states, integrate(system, z0, 0.1, 6, method=method, substeps=substeps))
    halved = integrate(system, data.states[:, :-1].reshape(-1, system.dim), 0.1, 1,
                       method=method, substeps=2 * substeps)[:, -1]
    step = np.asarray(data.states[:, 1:]).reshape(-1, system.dim)
    relative = np.abs(step - np.asarray(halved)).max(-1) / np.abs(np.asarray(halved)).max(-1)
    assert relative.max() <= 1e-8
    error = datasets.one_step_error(system, data.states, 0.1, method=method, substeps=substeps)
    assert error <= datasets.REFERENCE_TOLERANCE
    # negative control: one state off by a relative 1e-7 is caught
    bad = data.states.at[2, 4].multiply(1 + 1e-7)
    assert datasets.one_step_error(system, bad, 0.1, method=method, substeps=substeps) > 1e-8
    # reproducible in the key, different across keys, float32 is the same data rounded
    again = make(jax.random.PRNGKey(3), n_trajectories=8, n_steps=6)
    np.testing.assert_array_equal(again.states, data.states)
    other = make(jax.random.PRNGKey(4), n_trajectories=8, n_steps=6)
    assert not np.allclose(other.states[:, 0], z0) and _in_range(name, other.states[:, 0])
    single = make(jax.random.PRNGKey(3), n_trajectories=8, n_steps=6, dtype=jnp.float32)
    np.testing.assert_array_equal(single.states, np.asarray(data.states).astype(np.float32))


def test_reference_data_doubles_substeps_until_accurate(monkeypatch):
    system = HarmonicOscillator()
    z0 = np.array([[1.0, 0.0]])
    data, substeps, error = datasets.reference_data(system, z0, 0.1, 4, method=Yoshida6(),
                                                    substeps=1, tol=1e-12)
    assert substeps > 1 and error <= 1e-12
    coarse = integrate(system, z0, 0.1, 4, method=Yoshida6(), substeps=substeps // 2)
    assert datasets.one_step_error(system, coarse, 0.1, method=Yoshida6(),
                                   substeps=substeps // 2) > 1e-12  # the doubling was needed
    monkeypatch.setattr(datasets._reference, "MAX_SUBSTEPS", 2)
    with pytest.raises(ValueError, match="one-step error of .* not 1e-15"):
        datasets.reference_data(system, z0, 0.1, 4, method=Yoshida6(), substeps=1, tol=1e-15)


def test_more_trajectories_than_the_defaults(monkeypatch):
    """The command line's recipes draw as many trajectories as asked (up to a maximum); the
    coupled oscillator draws more of the tutorial's distribution."""
    import geomlearn.cli._recipes as recipes

    monkeypatch.setattr(recipes, "SAMPLED_STEPS", 6)  # the shapes compiled above
    train, held, description = RECIPES["henon_heiles"](
        HenonHeiles(), n_trajectories=8, key=jax.random.PRNGKey(0), dtype=None)
    assert train.n_trajectories == 8 and held is None and "1e-08" in description
    with pytest.raises(ValueError, match=f"between 1 and {MAX_TRAJECTORIES}"):
        RECIPES["henon_heiles"](HenonHeiles(), n_trajectories=MAX_TRAJECTORIES + 1,
                                key=jax.random.PRNGKey(0), dtype=None)
    data, _, _ = RECIPES["coupled_oscillator"](CoupledHarmonicOscillator(), n_trajectories=12,
                                               key=jax.random.PRNGKey(0), dtype=None)
    assert data.states.shape == (12, 334, 4)
    np.testing.assert_array_equal(
        data.states, coupled_oscillator_lst(jax.random.PRNGKey(0), n_trajectories=12).states)
