"""The setup of `evaluate`'s long horizon: its options checked before any rollout, the
data's radius, and the states it starts from (the evaluation's, independent ones, or a
stored reference)."""

from __future__ import annotations

import numpy as np

from .._validation import check_int
from ..integrators import as_integrator
from ._frame import (
    clock_components,
    data_centre,
    data_radius,
    frame_projection,
    particle_dimension,
)
from ._long_horizon import long_horizon
from ._states import reference_states

__all__ = ["checked_horizon", "horizon_start", "long_horizon_of"]


def _bound(states, centre, clock, bound, particles=0) -> float:
    """The data's radius: `bound` if given, else the largest distance of a state of
    `states` from `centre`, the clock components left out (in the centre-of-mass frame
    of `particles`)."""
    if bound is None:
        return data_radius(states, centre, clock, particles)
    if not (isinstance(bound, (int, float)) and np.isfinite(bound) and bound > 0):
        raise ValueError(f"bound must be a finite number > 0, got {bound!r}")
    return float(bound)


def checked_horizon(system, states, horizon, horizon_method, particles) -> int | None:
    """`horizon` checked, with the options of the long horizon (before any rollout)."""
    if horizon is None:
        return None
    horizon = check_int("horizon", horizon, minimum=1)
    as_integrator(horizon_method)
    if particles:  # refused before any rollout when the state is not such particles
        frame_projection(states.shape[-1], clock_components(system, states),
                         check_int("particles", particles, minimum=0))
    return horizon


def long_horizon_of(model, system, states, task, dt, *, horizon, keep_states, method, bound,
                  invariants, scales, particles=None, start=None):
    """The `LongHorizon` of `evaluate(..., horizon=...)`: escapes about the reference's
    centre, norms without the system's clock, `invariants` (learned ones over their
    `scales`); from `start = (states, stored)` of `horizon_start` where given."""
    clock = clock_components(system, states)
    particles = particle_dimension(system) if particles is None else particles
    centre = data_centre(states, clock, particles)
    bound = _bound(states, centre, clock, bound, particles)
    starts, stored = (states, False) if start is None else start
    return long_horizon(
        model, task, starts, horizon=horizon, invariants=invariants, bound=bound,
        system=None if stored else system, integrator=None if stored else as_integrator(method),
        dt=dt, keep_states=keep_states, centre=centre, time_components=clock,
        particles=particles, scales=scales, stored_reference=stored)


def horizon_start(states, dt, horizon, horizon_data, horizon_reference):
    """`(states, stored)` the long horizon starts from: `horizon_data` (the reference
    integrated from the system) or `horizon_reference` (itself the reference), checked
    against the evaluation's `states` and `dt`; `None` for the evaluation's own states."""
    if horizon_data is None and horizon_reference is None:
        return None
    if horizon_data is not None and horizon_reference is not None:
        raise ValueError("give horizon_data or horizon_reference, not both")
    if horizon is None:
        raise ValueError("horizon_data and horizon_reference are for the long horizon: "
                         "give horizon=N too")
    name, given = (("horizon_data", horizon_data) if horizon_data is not None
                   else ("horizon_reference", horizon_reference))
    starts, given_dt = reference_states(given, None)
    if starts.shape[-1] != states.shape[-1]:
        raise ValueError(f"{name} has states of dimension {starts.shape[-1]}; the evaluation's "
                         f"have {states.shape[-1]}")
    if given_dt is not None and dt is not None and not np.isclose(given_dt, dt, rtol=1e-9):
        raise ValueError(f"{name} has the time step {given_dt:g}; the evaluation's is {dt:g}")
    return starts.astype(states.dtype), horizon_reference is not None
