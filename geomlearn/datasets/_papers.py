r"""The data sets of the papers geomlearn reproduces, each built from its source with
the settings of the original experiments (the table is in `geomlearn.datasets`)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from .._typing import Array, Float, PRNGKeyArray
from .._validation import check_int, float_dtype
from ..data import TrajectoryData
from ..integrators import integrate
from ..systems import (
    CoupledHarmonicOscillator,
    ForcedRigidBody,
    ParametricPendulum,
    Pendulum,
    RigidBody,
)

__all__ = [
    "pendulum_sympnets",
    "rigid_body_vpt",
    "rigid_body_vpt_initial_conditions",
    "rigid_body_vpt_validation",
    "coupled_oscillator_lst",
    "parametric_pendulum",
    "forced_rigid_body",
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


def coupled_oscillator_lst(key: PRNGKeyArray, *, n_trajectories: int = 5,
                           dtype=None) -> TrajectoryData:
    r"""The coupled-oscillator data of the linear symplectic transformer tutorial.

    System: `CoupledHarmonicOscillator()` (masses 2, 1; springs 1.5, 0.3; coupling 1).
    `n_trajectories` initial conditions (the tutorial's 5 by default) drawn uniformly
    from $[0, 1)^4$ (layout `(q1, q2, p1, p2)`) with `key`; $\Delta t = 0.3$ on $t \in [0, 100]$, i.e. 333 steps
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
    n = check_int("n_trajectories", n_trajectories, minimum=1)
    z0 = jax.random.uniform(key, (n, 4), dtype=dtype)
    n_steps = math.floor(100.0 / 0.3 + 1e-9)  # 333
    return TrajectoryData.from_system(
        CoupledHarmonicOscillator(), z0, 0.3, n_steps, method="implicit_midpoint"
    )


# ------------------------------------------- order-dependent (non-autonomous) problems


def _aligned(states, seq_length: int, n_periods: int, dt: float, segments: bool):
    """The trajectories `(B, n_periods T + 1, d)`, or their period-aligned segments of
    `2T` rows (one input window and the next), `(B (n_periods - 1), 2T, d)`."""
    T = seq_length
    if not segments:
        return TrajectoryData(states, dt)
    parts = [states[:, k * T : k * T + 2 * T] for k in range(n_periods - 1)]
    return TrajectoryData(jnp.concatenate(parts, axis=0), dt)


def _check_periods(seq_length, n_trajectories, n_periods):
    T = check_int("seq_length", seq_length, minimum=1)
    B = check_int("n_trajectories", n_trajectories, minimum=1)
    P = check_int("n_periods", n_periods, minimum=2)
    return T, B, P


def parametric_pendulum(
    key: PRNGKeyArray,
    *,
    seq_length: int = 4,
    n_trajectories: int = 64,
    n_periods: int = 6,
    segments: bool = True,
    system: ParametricPendulum | None = None,
    dtype=None,
) -> TrajectoryData:
    r"""An order-dependent benchmark: the driven pendulum sampled `seq_length` times per
    drive period, `(q, p)` rows only.

    System: `ParametricPendulum()` ($H = p^2/2 + (1 + 0.5\cos 2t)(1 - \cos q)$, drive
    period $\pi$) unless `system` is given. `n_trajectories` initial states
    $q \sim U(-1, 1)$, $p \sim U(-0.5, 0.5)$ drawn with `key`, all starting at drive phase
    0 ($\tau = 0$); step $\Delta t = P/T$ with $P = 2\pi/\Omega$ the drive period and
    $T$ = `seq_length`; `n_periods` periods; Yoshida's 6th-order method with 10
    substeps. The clock $(\tau, E)$ is dropped: the states are 2-d, so a model does not
    see the drive phase in the state.

    **Alignment.** Row $kT + i$ is at drive phase $2\pi i/T$. With `segments=True`
    (default) the data are the aligned pieces of $2T$ rows (one window and the next,
    starting at multiples of the period), so `data.windows(T, T)` — what `fit` takes from
    a `TrajectoryData` for a transformer with `prediction_window = T` — gives exactly the
    period-aligned pairs: the map from row $i$ of a window to row $i$ of the next is the
    period map at phase $2\pi i/T$, **which depends on $i$**. Windows starting elsewhere
    would mix phases. With `segments=False` the whole trajectories
    `(n_trajectories, n_periods T + 1, 2)` are returned (for rollouts from their first
    window with `prediction_window = T`, which stay aligned).

    ```python
    >>> data = parametric_pendulum(jax.random.PRNGKey(0), seq_length=4)
    >>> data.states.shape        # 64 trajectories x 5 aligned segments of 2T rows
    (320, 8, 2)
    ```
    """
    T, B, P = _check_periods(seq_length, n_trajectories, n_periods)
    system = ParametricPendulum() if system is None else system
    dtype = float_dtype(dtype)
    kq, kp = jax.random.split(key)
    q = jax.random.uniform(kq, (B,), dtype, -1.0, 1.0)
    p = jax.random.uniform(kp, (B,), dtype, -0.5, 0.5)
    zero = jnp.zeros((B,), dtype)
    z0 = jnp.stack([q, zero, p, zero], axis=1)
    dt = system.period / T
    states = integrate(system, z0, dt, P * T, method="yoshida6", substeps=10)
    return _aligned(states[..., ::2], T, P, dt, segments)


def forced_rigid_body(
    key: PRNGKeyArray,
    *,
    seq_length: int = 4,
    n_trajectories: int = 64,
    n_periods: int = 6,
    segments: bool = True,
    system: ForcedRigidBody | None = None,
    dtype=None,
) -> TrajectoryData:
    r"""The volume-preserving analogue of `parametric_pendulum`: the rigid body with
    pulsating inertia, sampled `seq_length` times per pulsation period, 3-d rows.

    System: `ForcedRigidBody(Omega=2.0)` (period $\pi$) unless `system` is given.
    `n_trajectories` initial states uniform on the unit sphere (drawn with `key`), drive
    phase 0; step $P/T$; `n_periods` periods; 6th-order Gauss–Legendre with 2 substeps.
    The clock $(\tau, E)$ is dropped: rows are $z \in \mathbb{R}^3$ (on the sphere, as
    the Casimir is conserved), and the window map is volume-preserving.

    Alignment and `segments` as in `parametric_pendulum`.

    ```python
    >>> forced_rigid_body(jax.random.PRNGKey(0)).states.shape
    (320, 8, 3)
    ```
    """
    T, B, P = _check_periods(seq_length, n_trajectories, n_periods)
    system = ForcedRigidBody(Omega=2.0) if system is None else system
    dtype = float_dtype(dtype)
    m = jax.random.normal(key, (B, 3), dtype)
    m = m / jnp.linalg.norm(m, axis=1, keepdims=True)
    z0 = jnp.concatenate([m, jnp.zeros((B, 2), dtype)], axis=1)
    dt = system.period / T
    states = integrate(system, z0, dt, P * T, method="gauss_legendre6", substeps=2)
    return _aligned(states[..., :3], T, P, dt, segments)
