r"""Data of interacting particles: thermal Lennard-Jones clusters near their close-packed
start (`LennardJonesCluster.thermal_states`), integrated accurately (`reference_data`)."""

from __future__ import annotations

from .._typing import PRNGKeyArray
from .._validation import check_int
from ..data import TrajectoryData
from ..integrators import Yoshida6
from ..systems import LennardJonesCluster
from ._reference import numpy_rng, reference_data

__all__ = ["lennard_jones"]

#: The range of the drawn temperatures $k_B T / \varepsilon$ (the default states' range).
_TEMPERATURES = (0.02, 0.08)


def lennard_jones(key: PRNGKeyArray, *, n_trajectories: int = 32, n_steps: int = 200,
                  dt: float = 0.01, system: LennardJonesCluster | None = None,
                  dtype=None) -> TrajectoryData:
    r"""Thermal Lennard-Jones clusters: temperatures $k_B T/\varepsilon \sim U(0.02, 0.08)$,
    the range of the default initial conditions, each from its own displacement of the
    close-packed sites (up to $0.02\,r_m$ per axis) and momenta (no total and no
    angular momentum); see `LennardJonesCluster.thermal_states`.

    `LennardJonesCluster()` (13 particles in 3-D) unless `system` is given; `dt = 0.01`
    (in units of $\sigma\sqrt{m/\varepsilon}$), 200 steps; Yoshida's 6th-order method
    from 4 substeps, doubled until the one-step relative error is $\le 10^{-8}$
    (`reference_data`).

    ```python
    >>> system = LennardJonesCluster(4, spatial_dim=2)
    >>> lennard_jones(jax.random.PRNGKey(0), n_trajectories=3, system=system).states.shape
    (3, 201, 16)
    ```
    """
    system = LennardJonesCluster() if system is None else system
    rng = numpy_rng(key)
    n = check_int("n_trajectories", n_trajectories, minimum=1)
    n_steps = check_int("n_steps", n_steps, minimum=1)
    temperatures = rng.uniform(*_TEMPERATURES, n)
    z0 = system.thermal_states(temperatures, seed=int(rng.integers(2**31)))
    data, _, _ = reference_data(system, z0, dt, n_steps, method=Yoshida6(), substeps=4,
                                dtype=dtype)
    return data
