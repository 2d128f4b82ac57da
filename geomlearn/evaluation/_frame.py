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
"""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np

__all__ = ["clock_components", "kept_components", "data_centre", "data_radius"]

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


def data_centre(states, clock=()) -> np.ndarray:
    """The mean of the data's states `(..., d)` over every state, `0` at the clock
    components, `(d,)` in float64."""
    flat = np.asarray(states, dtype=np.float64).reshape(-1, np.shape(states)[-1])
    return np.mean(flat, axis=0) * kept_components(flat.shape[1], clock)


def data_radius(states, centre, clock=()) -> float:
    """$\\max_i \\|z_i - c\\|_\\tau$: the largest distance of a data state from `centre`,
    the clock components left out."""
    flat = np.asarray(states, dtype=np.float64).reshape(-1, np.shape(states)[-1])
    weights = kept_components(flat.shape[1], clock)
    return float(np.max(np.linalg.norm((flat - centre) * weights, axis=-1)))
