"""The reference states an evaluation reads, and functions evaluated at every state."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from ..data import TrajectoryData

__all__ = ["reference_states", "values_at"]


def reference_states(reference, dt):
    """`(states (n_traj, N, d), dt or None)` from a TrajectoryData (of trajectories of
    different lengths: their first states, as many as the shortest has) or an array."""
    if isinstance(reference, TrajectoryData):
        if reference.ragged:
            reference = reference.head()
        states = jnp.asarray(reference.states)
        ref_dt = float(reference.dt)
        if dt is not None and float(dt) != ref_dt:
            raise ValueError(f"dt={dt} disagrees with the reference data's dt={ref_dt}")
        dt = ref_dt
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
