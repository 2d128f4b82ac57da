r"""Data sets, each integrated here in a second or two rather than downloaded.

**From papers** — the settings of the original experiments:

| function | system | trajectories | steps | `dt` | integrator |
|---|---|---|---|---|---|
| `pendulum_sympnets()` | `Pendulum()` | 1 train + 1 test | 40 + 100 | 0.1 | `"yoshida6"`, 10 substeps |
| `rigid_body_vpt()` | `RigidBody()` | 1238 | 100 | 0.2 | `"implicit_midpoint"` |
| `coupled_oscillator_lst(key)` | `CoupledHarmonicOscillator()` | 5 | 333 | 0.3 | `"implicit_midpoint"` |
| `parametric_pendulum(key)` | `ParametricPendulum()` | 64, in period-aligned segments | 6 periods of $T$ | $\pi/T$ | `"yoshida6"`, 10 substeps |
| `forced_rigid_body(key)` | `ForcedRigidBody(Omega=2)` | 64, in period-aligned segments | 6 periods of $T$ | $\pi/T$ | `"gauss_legendre6"`, 2 substeps |

**Where no paper prescribes one** — initial states drawn from a stated range, and a
reference accurate to a relative $10^{-8}$ per stored step (`reference_data`; the
substeps are doubled from the stated start until the halving test passes):

| function | system | initial states | steps | `dt` | integrator |
|---|---|---|---|---|---|
| `harmonic_oscillator(key)` | `HarmonicOscillator()` | $E \in [0.05, 0.5]$ | 200 | 0.1 | Yoshida 6, from 2 substeps |
| `henon_heiles(key)` | `HenonHeiles()` | $E \in [0.02, 0.12]$ | 200 | 0.1 | Yoshida 6, from 2 substeps |
| `kepler(key)` | `Kepler()` | $a \in [0.8, 1.2]$, $e \in [0, 0.5]$ | 200 | 0.1 | Yoshida 6, from 8 substeps |
| `three_body(key)` | `ThreeBody()` | figure-eight $\pm 0.02$ | 200 | 0.1 | Yoshida 6, from 32 substeps |
| `lennard_jones(key)` | `LennardJonesCluster()` | $k_B T/\varepsilon \in [0.02, 0.08]$, close-packed start | 200 | 0.01 | Yoshida 6, from 4 substeps |
| `double_pendulum(key)` | `DoublePendulum()` | $\theta \in [-1, 1]^2$, $p \in [-0.5, 0.5]^2$ | 200 | 0.1 | Gauss–Legendre 6, from 4 substeps |
| `damped_pendulum(key)` | `DampedPendulum()` | $q \in [-2, 2]$, $p \in [-1, 1]$ | 200 | 0.1 | Gauss–Legendre 6, from 2 substeps |
| `duffing(key)` | `Duffing()` (Desai et al. 2021) | $(q, p) \in [-2.5, 2.5]^2$, $\tau = 0$ | 1000 | 0.01 | Gauss–Legendre 6, from 2 substeps |
| `forced_mass_spring(key)` | `ForcedMassSpring()` | $\lvert(q, p)\rvert^2 \in [1, 4.5]$, $\tau = 0$ | 500 | 0.02 | Gauss–Legendre 6, from 2 substeps |

(32 trajectories by default.) All arrays have JAX's default float dtype unless `dtype`
is given (float64 needs `jax_enable_x64`).

**At irregular times** — `irregular_trajectories(system, initial_conditions, dt,
n_steps, jitter=0.5, seed=0)`: any system from given initial states, each step drawn
from $[(1 - j)\,\Delta t, (1 + j)\,\Delta t]$ and integrated with a fixed number of
substeps; the data are irregular (`TrajectoryData.from_times`).
"""

from ._dissipative import damped_pendulum, duffing, forced_mass_spring
from ._irregular import irregular_trajectories
from ._papers import (
    coupled_oscillator_lst,
    forced_rigid_body,
    parametric_pendulum,
    pendulum_sympnets,
    rigid_body_vpt,
    rigid_body_vpt_initial_conditions,
    rigid_body_vpt_validation,
)
from ._particles import lennard_jones
from ._reference import MAX_SUBSTEPS, REFERENCE_TOLERANCE, one_step_error, reference_data
from ._sampled import double_pendulum, harmonic_oscillator, henon_heiles, kepler, three_body

__all__ = [
    "pendulum_sympnets",
    "rigid_body_vpt",
    "rigid_body_vpt_initial_conditions",
    "rigid_body_vpt_validation",
    "coupled_oscillator_lst",
    "parametric_pendulum",
    "forced_rigid_body",
    "reference_data",
    "one_step_error",
    "REFERENCE_TOLERANCE",
    "MAX_SUBSTEPS",
    "harmonic_oscillator",
    "henon_heiles",
    "kepler",
    "three_body",
    "lennard_jones",
    "double_pendulum",
    "damped_pendulum",
    "duffing",
    "forced_mass_spring",
    "irregular_trajectories",
]
