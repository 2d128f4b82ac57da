r"""Data sets of damped and driven systems (`geomlearn.systems.DampedPendulum`,
`Duffing`, `ForcedMassSpring`): initial states drawn from a stated range, integrated by
the 6th-order Gauss–Legendre method to a relative $10^{-8}$ per stored step
(`reference_data`). Driven systems start at the time $\tau = 0$.

Each function takes a PRNG `key` (the same key gives the same data), `n_trajectories`,
`n_steps`, `dt`, optionally the `system` (default: the class's defaults) and `dtype`.
"""

from __future__ import annotations

import math

import jax
import numpy as np

from .._typing import PRNGKeyArray
from .._validation import check_int
from ..data import TrajectoryData
from ..integrators import GaussLegendre6
from ..systems import DampedPendulum, Duffing, ForcedMassSpring
from ._reference import numpy_rng, reference_data

__all__ = ["damped_pendulum", "duffing", "forced_mass_spring"]


def _rng(key: PRNGKeyArray) -> np.random.Generator:
    return np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel().tolist())


def _make(system, z0, *, n_steps, dt, dtype) -> TrajectoryData:
    n_steps = check_int("n_steps", n_steps, minimum=1)
    data, _, _ = reference_data(system, z0, dt, n_steps, method=GaussLegendre6(), substeps=2,
                                dtype=dtype)
    return data


def damped_pendulum(key: PRNGKeyArray, *, n_trajectories: int = 32, n_steps: int = 200,
                    dt: float = 0.1, system: DampedPendulum | None = None,
                    dtype=None) -> TrajectoryData:
    r"""Damped pendulum trajectories from $q_0 \sim U(-2, 2)$, $p_0 \sim U(-1, 1)$ (below
    the separatrix at the defaults).

    `DampedPendulum()` ($\gamma = 0.1$) unless `system` is given; `dt = 0.1`, 200 steps.

    ```python
    >>> damped_pendulum(jax.random.PRNGKey(0), n_trajectories=4).states.shape
    (4, 201, 2)
    ```
    """
    system = DampedPendulum() if system is None else system
    rng = numpy_rng(key)
    n = check_int("n_trajectories", n_trajectories, minimum=1)
    z0 = np.stack([rng.uniform(-2.0, 2.0, n), rng.uniform(-1.0, 1.0, n)], axis=1)
    return _make(system, z0, n_steps=n_steps, dt=dt, dtype=dtype)


def duffing(key: PRNGKeyArray, *, n_trajectories: int = 10, n_steps: int = 1000,
            dt: float = 0.01, system: Duffing | None = None, dtype=None) -> TrajectoryData:
    r"""The forced Duffing data of Desai et al. (Phys. Rev. E 104, 034312, 2021): initial
    $(q_0, p_0) \sim U(-2.5, 2.5)^2$ at $\tau = 0$, $t \in [0, 10]$ sampled at
    `dt = 0.01` (1000 steps), 10 trajectories (they test on 25 more).

    `Duffing()` ($\alpha = -1$, $\beta = 1$, $\delta = 0.3$, $\gamma = 0.2$,
    $\omega = 1.2$) unless `system` is given.

    ```python
    >>> duffing(jax.random.PRNGKey(0), n_trajectories=2, n_steps=10).states.shape
    (2, 11, 3)
    ```
    """
    system = Duffing() if system is None else system
    rng = numpy_rng(key)
    n = check_int("n_trajectories", n_trajectories, minimum=1)
    z0 = np.concatenate([rng.uniform(-2.5, 2.5, (n, 2)), np.zeros((n, 1))], axis=1)
    return _make(system, z0, n_steps=n_steps, dt=dt, dtype=dtype)


def forced_mass_spring(key: PRNGKeyArray, *, n_trajectories: int = 32, n_steps: int = 500,
                       dt: float = 0.02, system: ForcedMassSpring | None = None,
                       dtype=None) -> TrajectoryData:
    r"""Forced, damped mass-spring trajectories from initial states of uniform direction
    and radius $|(q_0, p_0)| = \sqrt{U(1, 4.5)}$ (the range of Desai et al.) at
    $\tau = 0$.

    `ForcedMassSpring()` unless `system` is given; `dt = 0.02`, 500 steps ($t \in [0,
    10]$; the drive's period is $2\pi/3$, and a second-order learned integrator needs the
    small step).

    ```python
    >>> forced_mass_spring(jax.random.PRNGKey(0), n_trajectories=4).states.shape
    (4, 501, 3)
    ```
    """
    system = ForcedMassSpring() if system is None else system
    rng = numpy_rng(key)
    n = check_int("n_trajectories", n_trajectories, minimum=1)
    angle = rng.uniform(0.0, 2.0 * math.pi, n)
    radius = np.sqrt(rng.uniform(1.0, 4.5, n))
    z0 = np.stack([radius * np.cos(angle), radius * np.sin(angle), np.zeros(n)], axis=1)
    return _make(system, z0, n_steps=n_steps, dt=dt, dtype=dtype)
