"""The data states at which the command line takes a system's fastest frequency."""

from __future__ import annotations

import numpy as np

__all__ = ["FREQUENCY_STATES", "frequency_states"]

FREQUENCY_STATES = 256
"""The most states of the data at which `fastest_frequency` is taken."""


def frequency_states(data) -> np.ndarray:
    """At most `FREQUENCY_STATES` states of `data` (a `TrajectoryData`), evenly spread
    over its rows (ragged trajectories too)."""
    states = np.concatenate([np.asarray(z) for z in data.trajectories])
    return states[np.unique(np.linspace(0, len(states) - 1, FREQUENCY_STATES).round().astype(int))]
