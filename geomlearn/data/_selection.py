"""Which trajectories go where: `TrajectoryData.split` and `TrajectoryData.shard`.

Pure index arithmetic on the number of trajectories; the data set selects the rows.
"""

from __future__ import annotations

import numbers

import jax
import numpy as np

from .._validation import check_int


def split_indices(n: int, fraction, key) -> tuple[np.ndarray, np.ndarray]:
    """The trajectories of the two parts of `TrajectoryData.split` (each sorted)."""
    if isinstance(fraction, bool) or not isinstance(fraction, numbers.Real):
        raise TypeError(f"fraction must be a real number, got {fraction!r}")
    fraction = float(fraction)
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    if n < 2:
        raise ValueError(
            f"split needs at least 2 trajectories (it splits by whole trajectories), "
            f"got {n}"
        )
    n_first = min(max(round(fraction * n), 1), n - 1)
    order = np.arange(n) if key is None else np.asarray(jax.random.permutation(key, n))
    return np.sort(order[:n_first]), np.sort(order[n_first:])


def shard_indices(n: int, process_index, process_count) -> np.ndarray:
    """The trajectories of part `process_index` of `process_count`: a contiguous block;
    with `n = q·k + r`, the first `r` parts get `q + 1` trajectories, the others `q`."""
    k = check_int("process_count", process_count, minimum=1)
    i = check_int("process_index", process_index, minimum=0)
    if i >= k:
        raise ValueError(f"process_index must be in 0…{k - 1} (process_count={k}), got {i}")
    if n < k:
        raise ValueError(
            f"cannot shard {n} trajectories over {k} processes (it shards by whole "
            f"trajectories, at least one each); use at most {n} processes")
    q, r = divmod(n, k)
    start = i * q + min(i, r)
    return np.arange(start, start + q + (i < r))
