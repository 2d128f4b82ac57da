"""The reference states an evaluation reads, and functions evaluated at every state."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..data import TrajectoryData

__all__ = ["reference_states", "reference_times", "rollout_at_times", "values_at",
           "invariant_scale", "ZERO_INVARIANT"]

ZERO_INVARIANT = 1e-3
"""An invariant whose initial values are below this fraction of the size of its terms is
zero by cancellation (see `invariant_scale`)."""


def reference_states(reference, dt):
    """`(states (n_traj, N, d), dt or None)` from a TrajectoryData (of trajectories of
    different lengths: their first states, as many as the shortest has) or an array."""
    if isinstance(reference, TrajectoryData):
        if reference.ragged:
            reference = reference.head()
        states = jnp.asarray(reference.states)
        ref_dt = float(reference.dt)
        if dt is not None and float(dt) != ref_dt and not reference.irregular:
            raise ValueError(f"dt={dt} disagrees with the reference data's dt={ref_dt}")
        dt = ref_dt if dt is None else dt  # irregular data: `dt` is the nominal step
    else:
        states = jnp.asarray(reference)
        if states.ndim == 2:
            states = states[None]
    if states.ndim != 3:
        raise ValueError(
            "reference must be a TrajectoryData or an array of states (n_steps + 1, d) or "
            f"(n_trajectories, n_steps + 1, d), got shape {states.shape}"
        )
    if not jnp.issubdtype(states.dtype, jnp.floating):
        raise TypeError(f"reference states must be floating-point, got {states.dtype}")
    return states, (None if dt is None else float(dt))


@eqx.filter_jit
def values_at(fn, states):
    """`fn` at every state `(B, N, d)`, compiled once per function and shape."""
    return jax.vmap(jax.vmap(fn))(states)


def invariant_scale(fn, z0) -> float:
    r"""The scale $s_I$ that drifts of the invariant `fn` are divided by, from the initial
    states `z0` `(B, d)`: $m = \max_i |I(z^i_0)|$, unless $m$ is below `ZERO_INVARIANT`
    times the size of its terms $g = \max_i \|\nabla I(z^i_0)\|\,\|z^i_0\|$ (for an
    $I$ homogeneous of degree $k$, $\nabla I \cdot z = kI$): then $I$ is zero by
    cancellation (a total momentum of zero, an angular momentum of zero), relative
    drifts of its rounding would be meaningless, and $s_I = g$. A scale of 0 is 1; where
    $\nabla I$ cannot be traced, $s_I = m$."""
    z0 = jnp.asarray(z0)
    m = float(np.max(np.abs(np.asarray(jax.vmap(fn)(z0), dtype=np.float64))))
    try:
        grads = np.asarray(jax.vmap(jax.grad(lambda z: jnp.sum(fn(z))))(z0), dtype=np.float64)
    except Exception:  # noqa: BLE001 - a user's function jax cannot differentiate: keep m
        return m if m > 0 else 1.0
    z = np.asarray(z0, dtype=np.float64)
    g = float(np.max(np.linalg.norm(grads, axis=-1) * np.linalg.norm(z, axis=-1)))
    scale = g if m < ZERO_INVARIANT * g else m
    return scale if scale > 0 else 1.0


def reference_times(reference, n_rows: int):
    """The real times `(n_traj, n_rows)` of the first `n_rows` rows of each trajectory of
    an irregular `TrajectoryData` (float64); `None` for regular data or an array."""
    if not isinstance(reference, TrajectoryData) or not reference.irregular:
        return None
    return np.stack([t[:n_rows] for t in reference.row_times])


def rollout_at_times(model, initial, times, dt: float, task):
    """The rollouts of `model` from each initial state (window) `initial[i]` at the real
    times `times[i]` (`model.rollout_at`), stacked; `ValueError` for a model that does not
    roll out at real times."""
    if not model.reads_times:
        raise ValueError(f"{type(model).__name__} cannot be evaluated on irregularly sampled "
                         "data: feed-forward and transformer integrators can")
    return jnp.stack([model.rollout_at(z, t, dt, task) for z, t in zip(initial, times)])
