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
