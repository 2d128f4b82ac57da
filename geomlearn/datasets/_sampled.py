r"""Data sets of systems for which no paper prescribes one: many initial states drawn
from a stated range, integrated accurately (`reference_data`: a one-step relative error
$\le 10^{-8}$ at the sampling step, checked when the data are made).

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
from ..integrators import GaussLegendre6, Yoshida6
from ..systems import DoublePendulum, HarmonicOscillator, HenonHeiles, Kepler, ThreeBody
from ._reference import numpy_rng, reference_data

__all__ = ["harmonic_oscillator", "henon_heiles", "kepler", "three_body", "double_pendulum"]



def _make(system, z0, *, n_steps, dt, method, substeps, dtype) -> TrajectoryData:
    n_steps = check_int("n_steps", n_steps, minimum=1)
    data, _, _ = reference_data(system, z0, dt, n_steps, method=method, substeps=substeps,
                                dtype=dtype)
    return data


def _count(n_trajectories) -> int:
    return check_int("n_trajectories", n_trajectories, minimum=1)


def harmonic_oscillator(key: PRNGKeyArray, *, n_trajectories: int = 32, n_steps: int = 200,
                        dt: float = 0.1, system: HarmonicOscillator | None = None,
                        dtype=None) -> TrajectoryData:
    r"""Harmonic oscillations of energies $E \sim U(0.05, 0.5)$ and phases
    $\theta \sim U(0, 2\pi)$: $q = \sqrt{2E/k}\cos\theta$, $p = \sqrt{2mE}\sin\theta$.

    `HarmonicOscillator()` unless `system` is given; `dt = 0.1`, 200 steps; Yoshida's
    6th-order method from 2 substeps, doubled until the one-step relative error is
    $\le 10^{-8}$ (`reference_data`).

    ```python
    >>> harmonic_oscillator(jax.random.PRNGKey(0), n_trajectories=4).states.shape
    (4, 201, 2)
    ```
    """
    system = HarmonicOscillator() if system is None else system
    rng, n = numpy_rng(key), _count(n_trajectories)
    energy = rng.uniform(0.05, 0.5, n)
    theta = rng.uniform(0.0, 2 * math.pi, n)
    z0 = np.stack([np.sqrt(2 * energy / system.k) * np.cos(theta),
                   np.sqrt(2 * system.m * energy) * np.sin(theta)], axis=1)
    return _make(system, z0, n_steps=n_steps, dt=dt, method=Yoshida6(), substeps=2, dtype=dtype)


def henon_heiles(key: PRNGKeyArray, *, n_trajectories: int = 32, n_steps: int = 200,
                 dt: float = 0.1, system: HenonHeiles | None = None,
                 dtype=None) -> TrajectoryData:
    r"""Bounded Hénon–Heiles orbits of energies $E \sim U(0.02, 0.12)$ (below the escape
    energy $1/6$ at $\lambda = 1$; regular and chaotic orbits).

    For each $E$: a position $q$ uniform in the disc $|q| < 1.2\sqrt{2E}$ with
    $V(q) < 0.95E$ (rejection), and a momentum of uniform direction with
    $|p|^2 = 2(E - V(q))$. `HenonHeiles()` unless `system` is given; `dt = 0.1`, 200 steps;
    Yoshida's 6th-order method from 2 substeps, doubled until the one-step relative
    error is $\le 10^{-8}$ (`reference_data`).

    ```python
    >>> henon_heiles(jax.random.PRNGKey(0), n_trajectories=4).states.shape
    (4, 201, 4)
    ```
    """
    system = HenonHeiles() if system is None else system
    rng, n = numpy_rng(key), _count(n_trajectories)
    energy = rng.uniform(0.02, 0.12, n)
    q = np.zeros((n, 2))
    todo = np.arange(n)
    while todo.size:
        r = 1.2 * np.sqrt(2 * energy[todo]) * np.sqrt(rng.uniform(0, 1, todo.size))
        phi = rng.uniform(0, 2 * math.pi, todo.size)
        x, y = r * np.cos(phi), r * np.sin(phi)
        potential = 0.5 * (x**2 + y**2) + system.lam * (x**2 * y - y**3 / 3)
        ok = potential < 0.95 * energy[todo]
        q[todo[ok]] = np.stack([x[ok], y[ok]], axis=1)
        todo = todo[~ok]
    x, y = q[:, 0], q[:, 1]
    speed = np.sqrt(2 * (energy - 0.5 * (x**2 + y**2) - system.lam * (x**2 * y - y**3 / 3)))
    phi = rng.uniform(0, 2 * math.pi, n)
    z0 = np.stack([x, y, speed * np.cos(phi), speed * np.sin(phi)], axis=1)
    return _make(system, z0, n_steps=n_steps, dt=dt, method=Yoshida6(), substeps=2, dtype=dtype)


def kepler(key: PRNGKeyArray, *, n_trajectories: int = 32, n_steps: int = 200,
           dt: float = 0.1, system: Kepler | None = None, dtype=None) -> TrajectoryData:
    r"""Elliptic Kepler orbits: semi-major axis $a \sim U(0.8, 1.2)$, eccentricity
    $e \sim U(0, 0.5)$, orientation $\omega \sim U(0, 2\pi)$, starting at the eccentric
    anomaly $E \sim U(0, 2\pi)$ (energy $-k/(2a)$, periods $2\pi a^{3/2}/\sqrt{\mu}$).

    With $\mu = k/m$ and $n = \sqrt{\mu/a^3}$ the start is, in the orbit's frame,
    $q = (a(\cos E - e),\ b\sin E)$, $\dot q = \frac{n}{1 - e\cos E}(-a\sin E,\ b\cos E)$,
    $b = a\sqrt{1 - e^2}$, rotated by $\omega$; $p = m\dot q$. `Kepler()` unless `system`
    is given; `dt = 0.1`, 200 steps (about 3 orbits); Yoshida's 6th-order method from 8
    substeps, doubled until the one-step relative error is $\le 10^{-8}$
    (`reference_data`).

    ```python
    >>> kepler(jax.random.PRNGKey(0), n_trajectories=4).states.shape
    (4, 201, 4)
    ```
    """
    system = Kepler() if system is None else system
    rng, n = numpy_rng(key), _count(n_trajectories)
    a, e = rng.uniform(0.8, 1.2, n), rng.uniform(0.0, 0.5, n)
    omega, anomaly = rng.uniform(0, 2 * math.pi, n), rng.uniform(0, 2 * math.pi, n)
    b, mean_motion = a * np.sqrt(1 - e**2), np.sqrt(system.k / system.m / a**3)
    rate = mean_motion / (1 - e * np.cos(anomaly))
    X, Y = a * (np.cos(anomaly) - e), b * np.sin(anomaly)
    VX, VY = -a * np.sin(anomaly) * rate, b * np.cos(anomaly) * rate
    c, s = np.cos(omega), np.sin(omega)
    z0 = np.stack([c * X - s * Y, s * X + c * Y,
                   system.m * (c * VX - s * VY), system.m * (s * VX + c * VY)], axis=1)
    return _make(system, z0, n_steps=n_steps, dt=dt, method=Yoshida6(), substeps=8, dtype=dtype)


def three_body(key: PRNGKeyArray, *, n_trajectories: int = 32, n_steps: int = 200,
               dt: float = 0.1, system: ThreeBody | None = None,
               dtype=None) -> TrajectoryData:
    r"""Perturbed figure-eight choreographies of three equal masses.

    The figure-eight state (`ThreeBody().default_initial_conditions()[0]`, period
    $\approx 6.33$ at $G = m = 1$) plus a perturbation uniform in $[-0.02, 0.02]$ in every
    component, then shifted to zero total momentum and the centre of mass at the origin.
    `ThreeBody()` unless `system` is given; `dt = 0.1`, 200 steps (about 3 periods);
    Yoshida's 6th-order method from 32 substeps, doubled until the one-step relative
    error is $\le 10^{-8}$ (`reference_data`).

    ```python
    >>> three_body(jax.random.PRNGKey(0), n_trajectories=4).states.shape
    (4, 201, 12)
    ```
    """
    system = ThreeBody() if system is None else system
    rng, n = numpy_rng(key), _count(n_trajectories)
    with jax.enable_x64(True):
        base = np.asarray(system.default_initial_conditions(dtype=np.float64))[0]
    z0 = base[None] + rng.uniform(-0.02, 0.02, (n, 12))
    q, p = z0[:, :6].reshape(n, 3, 2), z0[:, 6:].reshape(n, 3, 2)
    q = q - q.mean(axis=1, keepdims=True)
    p = p - p.mean(axis=1, keepdims=True)
    z0 = np.concatenate([q.reshape(n, 6), p.reshape(n, 6)], axis=1)
    return _make(system, z0, n_steps=n_steps, dt=dt, method=Yoshida6(), substeps=32, dtype=dtype)


def double_pendulum(key: PRNGKeyArray, *, n_trajectories: int = 32, n_steps: int = 200,
                    dt: float = 0.1, system: DoublePendulum | None = None,
                    dtype=None) -> TrajectoryData:
    r"""Double-pendulum swings from angles $\theta_1, \theta_2 \sim U(-1, 1)$ and momenta
    $p_1, p_2 \sim U(-0.5, 0.5)$ (from near-linear to chaotic motion).

    `DoublePendulum()` unless `system` is given; `dt = 0.1`, 200 steps; the 6th-order
    Gauss–Legendre method (the Hamiltonian is not separable) from 4 substeps, doubled
    until the one-step relative error is $\le 10^{-8}$ (`reference_data`).

    ```python
    >>> double_pendulum(jax.random.PRNGKey(0), n_trajectories=4).states.shape
    (4, 201, 4)
    ```
    """
    system = DoublePendulum() if system is None else system
    rng, n = numpy_rng(key), _count(n_trajectories)
    z0 = np.concatenate([rng.uniform(-1, 1, (n, 2)), rng.uniform(-0.5, 0.5, (n, 2))], axis=1)
    return _make(system, z0, n_steps=n_steps, dt=dt, method=GaussLegendre6(), substeps=4,
                 dtype=dtype)
