r"""The frame in which a long horizon measures states: the clock, the data's centre and
the data's radius.

- **Clock components.** A driven system written autonomously carries the time $\tau$
  ($\dot\tau = 1$) as a state component: the last one of a `driven` system, and any
  component whose vector field is exactly $1$ at every data state (a system in extended
  phase space, such as `ParametricPendulum`'s $\tau$). Along every correct rollout
  $\tau$ grows without bound, so the norms of the long horizon leave these components
  out: $\|z\|_\tau$ is the Euclidean norm over the other components.
- **Centre and radius.** The centre $c$ is the mean of the data's states and the radius
  $B = \max_i \|z_i - c\|_\tau$ over the data's states. The escape test bounds
  $\|z_t - c\|_\tau$ by a multiple of $B$: translating the data and the model by a
  constant vector changes neither.
- **Centre-of-mass frame.** When the positions are particles in $k$ dimensions
  ($q = (x_1, …, x_n)$ with $x_i \in \mathbb{R}^k$ in consecutive components, the
  momenta laid out alike) whose forces depend on differences only, the whole cluster
  drifts with its total momentum along every correct rollout. The escape test then
  measures each state in the centre-of-mass frame, $x_i - \bar x$ and $p_i - \bar p$
  with the means over the particles (equal masses): the linear projection $\Pi$ of
  `frame_projection`, applied before the centre and the radius are taken.
"""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np

__all__ = ["clock_components", "kept_components", "frame_projection", "particle_dimension",
           "data_centre", "data_radius"]

_CLOCK_SAMPLE = 64
"""At most this many data states are used to recognise a clock component."""


@eqx.filter_jit
def _fields(system, states):
    """The vector field of `system` at every state `(M, d)`."""
    return jax.vmap(system.vector_field)(states)


def clock_components(system, states) -> tuple[int, ...]:
    """The indices of the clock components of `system` on the data `states` (`(..., d)`):
    the last component of a `driven` system, and every component whose vector field is
    exactly 1 at (up to `_CLOCK_SAMPLE`) data states, at least two of them distinct.
    `()` without a system."""
    if system is None:
        return ()
    flat = np.asarray(states, dtype=np.float64).reshape(-1, np.shape(states)[-1])
    found = {flat.shape[1] - 1} if system.driven else set()
    pick = np.unique(np.linspace(0, len(flat) - 1, min(_CLOCK_SAMPLE, len(flat))).astype(int))
    sample = np.asarray(states).reshape(flat.shape)[pick]
    if len(np.unique(sample, axis=0)) >= 2:
        field = np.asarray(_fields(system, sample), dtype=np.float64)
        found |= {int(j) for j in np.flatnonzero(np.all(field == 1.0, axis=0))}
    return tuple(sorted(found))


def kept_components(d: int, clock) -> np.ndarray:
    """`(d,)` of `1.0` for the components every norm measures and `0.0` for the clock."""
    weights = np.ones(d)
    weights[list(clock)] = 0.0
    return weights


def particle_dimension(system) -> int:
    """The spatial dimension $k$ of the particles of `system` (its class variable
    `particle_dimension`), `0` when its state is not particles or without a system."""
    return 0 if system is None else int(system.particle_dimension)


def frame_projection(d: int, clock=(), particles: int = 0) -> np.ndarray:
    r"""The `(d, d)` projection $\Pi$ onto the components the escape test measures: the
    clock components zeroed and, with `particles` $= k > 0$, each particle's position and
    momentum taken relative to the means over the particles (the centre-of-mass frame of
    equal masses). `ValueError` when the non-clock components are not $2 n k$ numbers."""
    keep = kept_components(d, clock)
    projection = np.diag(keep)
    if not particles:
        return projection
    k = int(particles)
    phase = np.flatnonzero(keep)
    if k < 1 or len(phase) % (2 * k):
        raise ValueError(
            f"particles in {k} dimensions need 2·n·{k} state components besides the clock; "
            f"got {len(phase)} (state dimension {d}, clock components {list(clock)})")
    n = len(phase) // (2 * k)
    # within each half (q, then p): subtract the mean over the n particles, per axis
    block = np.eye(n * k) - np.kron(np.full((n, n), 1.0 / n), np.eye(k))
    inner = np.kron(np.eye(2), block)
    projection[np.ix_(phase, phase)] = inner
    return projection


def _projected(states, clock, particles) -> np.ndarray:
    flat = np.asarray(states, dtype=np.float64).reshape(-1, np.shape(states)[-1])
    return flat @ frame_projection(flat.shape[1], clock, particles).T


def data_centre(states, clock=(), particles: int = 0) -> np.ndarray:
    """The mean of the data's states `(..., d)` over every state, in the frame of
    `frame_projection` (`0` at the clock components), `(d,)` in float64."""
    return np.mean(_projected(states, clock, particles), axis=0)


def data_radius(states, centre, clock=(), particles: int = 0) -> float:
    """$\\max_i \\|\\Pi z_i - c\\|$: the largest distance of a data state from `centre` in
    the frame of `frame_projection` (the clock components left out)."""
    return float(np.max(np.linalg.norm(_projected(states, clock, particles) - centre, axis=-1)))
