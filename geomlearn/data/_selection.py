"""Which trajectories go where: `TrajectoryData.split`, `shard` and `head`.

Index arithmetic on the number of trajectories (`split_indices`, `shard_indices`), and
the part of `TrajectoryData` that selects trajectories with their metadata — names, start
times, labels, masses and the times of irregular data go with their trajectories.
"""

from __future__ import annotations

import numbers

import jax
import numpy as np

from .._typing import PRNGKeyArray
from .._validation import check_int

__all__ = ["Selection", "split_indices", "shard_indices"]


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


class Selection:
    """The part of `TrajectoryData` that selects whole trajectories: `split`, `shard`,
    `head`."""

    __slots__ = ()

    def _select(self, index) -> "TrajectoryData":
        """The trajectories `index` (an integer array), with their metadata."""
        index = np.asarray(index, dtype=np.int64)
        names = None if self._names is None else [self._names[i] for i in index]
        if self._names is None and not np.array_equal(index, np.arange(len(index))):
            names = [str(i) for i in index]
        row_times = self.row_times if self.irregular else None
        keep = dict(t0=self._t0[index], labels=self._labels, names=names,
                    times=None if row_times is None else [row_times[i] for i in index])
        if self._states is not None:
            return self._like(None, np.arange(len(index) + 1) * self._states.shape[1],
                              self._states[index], **keep)
        trajs = self.trajectories
        return self._rebuilt([np.asarray(trajs[i]) for i in index], **keep)

    def head(self, n_states: int | None = None) -> "TrajectoryData":
        """The first `n_states` states of every trajectory (default: the length of the
        shortest), as rectangular data with `states` (irregular data keep those rows'
        times).

        **Raises:** `ValueError` naming a trajectory shorter than `n_states`.
        """
        lengths = self.lengths
        n = min(lengths) if n_states is None else check_int("n_states", n_states, minimum=2)
        short = next((i for i, m in enumerate(lengths) if m < n), None)
        if short is not None:
            raise ValueError(f"{self._where}{self._who(short)} has {lengths[short]} states; "
                             f"head needs {n}")
        arrays = [np.asarray(t[:n]) for t in self.trajectories]
        times = None if self._times is None else [t[:n] for t in self.row_times]
        return self._rebuilt(arrays, t0=self._t0, labels=self._labels, names=self._names,
                             times=times)

    def split(
        self, fraction: float, *, key: PRNGKeyArray | None
    ) -> tuple["TrajectoryData", "TrajectoryData"]:
        r"""Split by whole trajectories into `(first, second)` — typically `(train, val)`.

        The first part gets `round(fraction · n_trajectories)` trajectories, clamped to
        `1 … n_trajectories - 1` so that neither part is empty; the second the rest. With a
        PRNG `key` the trajectories are assigned at random (each part keeps the original
        order among its trajectories); with `key=None` the first part is the leading
        trajectories. Names, start times, labels (and the row times of irregular data) go
        with their trajectories.

        **Arguments:**

        - `fraction`: the share of trajectories for the first part, `0 < fraction < 1`.
        - `key`: a JAX PRNG key, or `None` for an ordered split (keyword-only, required).

        **Raises:** `ValueError` for a fraction outside `(0, 1)` or a dataset with fewer
        than two trajectories.
        """
        first, second = split_indices(self.n_trajectories, fraction, key)
        return self._select(first), self._select(second)

    def shard(self, process_index: int, process_count: int) -> "TrajectoryData":
        r"""Part `process_index` of `process_count` by whole trajectories, for
        `geomlearn.fit(..., per_process=True)`: a contiguous block of trajectories in their
        order. With $N = qk + r$ trajectories and $k$ parts, parts $0 \dots r-1$ get
        $q + 1$ trajectories and the others $q$; part $i$ starts at trajectory
        $iq + \min(i, r)$. The parts cover every trajectory once; names, start times, labels
        (and the row times of irregular data) go with their trajectories.

        **Raises:** `ValueError` for `process_index` outside `0 … process_count - 1` or
        fewer trajectories than parts.
        """
        return self._select(shard_indices(self.n_trajectories, process_index, process_count))
