r"""The time of every row of `TrajectoryData`, and irregularly sampled trajectories.

Regular data sample trajectory $i$ at $t^{(i)}_k = t^{(i)}_0 + k\,\Delta t$, one step
$\Delta t$ for all. **Irregular** data (`TrajectoryData.from_times`, or
`TrajectoryData.read(path, irregular=True)`) keep a time per row instead, finite and
strictly increasing within each trajectory, $t^{(i)}_0 < t^{(i)}_1 < \dots$. Their
`dt` is the nominal step, the mean of all steps:

$$\Delta t = \frac{\sum_i \big(t^{(i)}_{T_i - 1} - t^{(i)}_0\big)}{\sum_i (T_i - 1)}.$$

Either way `row_times` gives the time of every row, and `windows(..., times=True)` and
`pairs(times=True)` the times of every sample, so that a model can be told the real
times of its inputs.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .._typing import Array, Float

__all__ = ["WithTimes", "joined_times"]


def joined_times(times) -> tuple[np.ndarray, float, np.ndarray]:
    """`(flat, dt, t0)` of checked per-trajectory times: all times in one float64 array
    (trajectory after trajectory), the nominal step (the mean of all steps) and the first
    time of each trajectory."""
    times = [np.asarray(t, dtype=np.float64) for t in times]
    span = sum(float(t[-1] - t[0]) for t in times)
    steps = sum(t.shape[0] - 1 for t in times)
    return np.concatenate(times), span / steps, np.array([t[0] for t in times])


class WithTimes:
    """The part of `TrajectoryData` that knows the time of each row: `from_times`,
    `irregular`, `row_times`, `times`, and the times of samples."""

    __slots__ = ()

    @classmethod
    def from_times(cls, arrays, times, *, labels=None, names=None):
        r"""Irregularly sampled trajectories: one state array `(T_i, d)` and one time array
        `(T_i,)` per trajectory.

        The data are irregular (`irregular` is `True`): `row_times` gives the times
        given here (as float64), `t0` the first of each trajectory, and `dt` the nominal
        step, the mean of all steps $\sum_i (t^{(i)}_{T_i-1} - t^{(i)}_0) / \sum_i
        (T_i - 1)$. Times that happen to be uniform still make irregular data.

        **Arguments:**

        - `arrays`: a sequence of arrays `(T_i, d)` with floating dtypes, `T_i ≥ 2`, one
          `d` for all (as for `from_arrays`).
        - `times`: a sequence of as many arrays `(T_i,)` of real times, finite and
          strictly increasing within each trajectory.
        - `labels`, `names`: as for the constructor.

        **Returns:** an irregular `TrajectoryData`; rectangular (with `states`) when all
        `T_i` are equal.

        **Raises:** `ValueError` naming the trajectory for a state array as `from_arrays`
        refuses it, for another number of time arrays than trajectories, for a time
        array whose length is not the trajectory's number of states (both named), for a
        non-finite time or for times that do not increase strictly (naming the row and
        the two times).

        ```python
        >>> data = TrajectoryData.from_times([np.zeros((3, 2))], [np.array([0., .1, .3])])
        >>> data.irregular, data.dt
        (True, 0.15)
        ```
        """
        return cls._build(arrays, None, times=times, labels=labels, names=names)

    @property
    def irregular(self) -> bool:
        """Whether each row has its own time (`from_times`, `read(..., irregular=True)`);
        `False` for data on the grid $t_0 + k\\,\\Delta t$."""
        return self._times is not None

    @property
    def row_times(self) -> tuple[np.ndarray, ...]:
        r"""The time of each row, one float64 array `(T_i,)` per trajectory (copies): the
        stored times of irregular data, $t^{(i)}_0 + k\,\Delta t$ for regular data."""
        flat, o = self._flat_times(), self._offsets
        return tuple(flat[o[i] : o[i + 1]].copy() for i in range(len(o) - 1))

    @property
    def times(self) -> Float[Array, " T"]:
        r"""The time grid $0, \Delta t, \dots, n_\text{steps}\Delta t$ since the start of
        each trajectory, in `states`' dtype; `ValueError` for ragged or irregular data
        (whose times are `row_times`)."""
        if self._times is not None:
            raise ValueError("times is the common grid of regularly sampled data, but these "
                             "data are irregular (a time per row); use row_times")
        t = np.arange(self.n_steps + 1, dtype=np.float64) * self._dt
        return jnp.asarray(t, dtype=self.dtype)

    def _flat_times(self) -> np.ndarray:
        """The time of every row, trajectory after trajectory, float64 `(sum T_i,)`."""
        if self._times is not None:
            return self._times
        lengths = np.diff(self._offsets)
        k = np.arange(self._offsets[-1]) - np.repeat(self._offsets[:-1], lengths)
        return np.repeat(self._t0, lengths) + self._dt * k

    def _pair_rows(self) -> np.ndarray:
        """The rows (of all rows, trajectory after trajectory) that have a next row."""
        o = self._offsets
        return np.concatenate([np.arange(o[i], o[i + 1] - 1) for i in range(len(o) - 1)])

    def _times_at(self, index, shift: int) -> tuple[np.ndarray, np.ndarray]:
        """The times of the rows `index` and of the rows `shift` later (float64)."""
        flat = self._flat_times()
        return flat[index], flat[index + shift]
