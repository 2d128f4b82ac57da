r"""Reference datasets from the papers geomlearn reproduces, each built from its source.

Every dataset is integrated here, in a second or two, rather than downloaded; the
settings are those of the original experiments.

| function | system | trajectories | steps | `dt` | integrator |
|---|---|---|---|---|---|
| `pendulum_sympnets()` | `Pendulum()` | 1 train + 1 test | 40 + 100 | 0.1 | `"yoshida6"`, 10 substeps |
| `rigid_body_vpt()` | `RigidBody()` | 1238 | 100 | 0.2 | `"implicit_midpoint"` |
| `coupled_oscillator_lst(key)` | `CoupledHarmonicOscillator()` | 5 | 333 | 0.3 | `"implicit_midpoint"` |

All arrays have JAX's default float dtype unless `dtype` is given (float64 needs
`jax_enable_x64`).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from ._typing import Array, Float, PRNGKeyArray
from ._validation import float_dtype
from .data import TrajectoryData
from .integrators import integrate
from .systems import CoupledHarmonicOscillator, Pendulum, RigidBody

__all__ = [
    "pendulum_sympnets",
    "rigid_body_vpt",
    "rigid_body_vpt_initial_conditions",
    "rigid_body_vpt_validation",
    "coupled_oscillator_lst",
]


def pendulum_sympnets(*, dtype=None) -> tuple[TrajectoryData, TrajectoryData]:
    r"""The pendulum experiment of the SympNets paper: `(train, test)`.

    System: `Pendulum()`, $H = p^2/2 - \cos q$. One trajectory from $(q, p) = (1, 0)$
    with step $h = 0.1$, computed by the 6th-order composition `"yoshida6"` with 10
    substeps (the paper's reference solver is a 6th-order symplectic composition of
    Störmer–Verlet with 10 substeps).

    - `train`: 1 trajectory, 40 steps (41 states, $t \in [0, 4]$) — the 40 training
      pairs.
    - `test`: 1 trajectory, 100 steps (101 states, $t \in [4, 14]$) continuing from the
      last training state, as in the paper (its test flow starts at the final
      training target) — the 100 test pairs.

    `train.states[0, -1]` equals `test.states[0, 0]`.

    Source: P. Jin, Z. Zhang, A. Zhu, Y. Tang, G. E. Karniadakis, *SympNets: Intrinsic
    structure-preserving symplectic networks for identifying Hamiltonian systems*,
    Neural Networks 132 (2020), section on the pendulum (their state order is $(p, q)$,
    initial value $(0, 1)$).

    ```python
    >>> train, test = pendulum_sympnets()
    >>> train.states.shape, test.states.shape
    ((1, 41, 2), (1, 101, 2))
    ```
    """
    z0 = jnp.asarray(np.array([1.0, 0.0]), dtype=float_dtype(dtype))
    n_train, n_test = 40, 100
    states = integrate(Pendulum(), z0, 0.1, n_train + n_test, method="yoshida6", substeps=10)
    train = TrajectoryData(states[None, : n_train + 1], 0.1)
    test = TrajectoryData(states[None, n_train:], 0.1)
    return train, test


def rigid_body_vpt_initial_conditions(*, dtype=None) -> Float[Array, "1238 3"]:
    r"""The 1238 training initial conditions of the volume-preserving transformer paper.

    $(\sin v, 0, \cos v)$ for $v = 0.1, 0.11, \dots, 6.28$ (619 values, the grid
    $0.1 + 0.01k \le 2\pi$), followed by $(0, \sin v, \cos v)$ for the same $v$. All lie
    on the unit sphere (Casimir $|z|^2 = 1$).
    """
    count = math.floor((2.0 * math.pi - 0.1) / 0.01 + 1e-9) + 1  # 619
    v = 0.1 + 0.01 * np.arange(count, dtype=np.float64)
    zero = np.zeros_like(v)
    first = np.stack([np.sin(v), zero, np.cos(v)], axis=1)
    second = np.stack([zero, np.sin(v), np.cos(v)], axis=1)
    return jnp.asarray(np.concatenate([first, second]), dtype=float_dtype(dtype))


def rigid_body_vpt(*, dtype=None) -> TrajectoryData:
    r"""The rigid-body training data of the volume-preserving transformer paper.

    System: `RigidBody()` (inertia $(2, 1, 2/3)$, i.e. $\dot z = (z_2 z_3/2,\,
    -z_1 z_3,\, z_1 z_2/2)$). 1238 trajectories from
    `rigid_body_vpt_initial_conditions()`, $t \in [0, 20]$ with $\Delta t = 0.2$
    (100 steps, 101 states each), integrated with the implicit midpoint rule.

    Source: B. Brantner, G. de Romemont, M. Kraus, Z. Li, *Volume-preserving transformers
    for learning time series data with structure*, arXiv:2312.11166 (rigid-body
    experiment); validation initial conditions in `rigid_body_vpt_validation()`.

    ```python
    >>> data = rigid_body_vpt()
    >>> data.n_trajectories, data.n_steps, data.dt
    (1238, 100, 0.2)
    ```
    """
    z0 = rigid_body_vpt_initial_conditions(dtype=dtype)
    return TrajectoryData.from_system(RigidBody(), z0, 0.2, 100, method="implicit_midpoint")


def rigid_body_vpt_validation(*, dtype=None) -> Float[Array, "2 3"]:
    r"""The validation initial conditions of the volume-preserving transformer paper.

    $(\sin 1.1, 0, \cos 1.1)$ and $(0, \sin 1.1, \cos 1.1)$, shape `(2, 3)`. Note that
    $v = 1.1$ is also a point of the training grid, so over the training horizon these
    trajectories coincide (to round-off) with two training trajectories; they are
    informative when integrated further than $t = 20$. Integrate them with

    ```python
    >>> val = TrajectoryData.from_system(RigidBody(), rigid_body_vpt_validation(), 0.2, 100)
    ```
    """
    s, c = math.sin(1.1), math.cos(1.1)
    return jnp.asarray(np.array([[s, 0.0, c], [0.0, s, c]]), dtype=float_dtype(dtype))


def coupled_oscillator_lst(key: PRNGKeyArray, *, dtype=None) -> TrajectoryData:
    r"""The coupled-oscillator data of the linear symplectic transformer tutorial.

    System: `CoupledHarmonicOscillator()` (masses 2, 1; springs 1.5, 0.3; coupling 1).
    5 initial conditions drawn uniformly from $[0, 1)^4$ (layout
    `(q1, q2, p1, p2)`) with `key`; $\Delta t = 0.3$ on $t \in [0, 100]$, i.e. 333 steps
    (334 states, the last at $t = 99.9$, the grid points inside the interval);
    implicit midpoint rule.

    Source: the linear symplectic transformer tutorial of the Julia package
    GeometricMachineLearning.jl (B. Brantner, M. Kraus et al.), whose data come from
    the coupled harmonic oscillator of GeometricProblems.jl.

    ```python
    >>> data = coupled_oscillator_lst(jax.random.PRNGKey(0))
    >>> data.states.shape
    (5, 334, 4)
    ```
    """
    dtype = float_dtype(dtype)
    z0 = jax.random.uniform(key, (5, 4), dtype=dtype)
    n_steps = math.floor(100.0 / 0.3 + 1e-9)  # 333
    return TrajectoryData.from_system(
        CoupledHarmonicOscillator(), z0, 0.3, n_steps, method="implicit_midpoint"
    )
