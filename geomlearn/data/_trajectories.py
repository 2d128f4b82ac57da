r"""`TrajectoryData`: trajectories on a uniform time grid, and the samples training needs.

A dataset is a set of trajectories $z^{(i)}_0, \dots, z^{(i)}_{T_i - 1}$ of one system,
row $k$ of trajectory $i$ being the state at time $t^{(i)}_0 + k\,\Delta t$ — one time
step $\Delta t$ for all. The trajectories may have different lengths $T_i$ ("ragged");
when they all have the same length the states form one array
`(n_trajectories, n_steps + 1, dim)` (`states`). From them come

- one-step pairs $(z_k, z_{k+1})$ for feed-forward integrators (`pairs`), and
- windows for transformer integrators (`windows`): an input window
  $Z_{k..k+T-1}$ and the target $Z_{k+pw..k+pw+T-1}$, the same window shifted by the
  prediction window `pw` (DESIGN.md: the model's output for an input window ends `pw`
  steps later; its last `pw` rows are the prediction).

Samples are cut within each trajectory, never across two, and `split` divides by whole
trajectories so that validation trajectories are unseen in training.

```python
>>> from geomlearn.systems import Pendulum
>>> data = TrajectoryData.from_system(Pendulum(), Pendulum().default_initial_conditions(),
...                                   dt=0.1, n_steps=50)
>>> x, y = data.pairs()            # (3 * 50, 2) each
>>> inputs, targets = data.windows(4)   # (3 * 44, 4, 2) each
>>> train, val = data.split(0.67, key=jax.random.PRNGKey(0))
>>> ragged = TrajectoryData.from_arrays([np.zeros((30, 2)), np.ones((12, 2))], dt=0.1)
>>> ragged.lengths
(30, 12)
>>> data.write("pendulum.csv"); TrajectoryData.read("pendulum.csv").n_trajectories
3
```
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np

from .._typing import Array, Float
from .._validation import check_int, check_time_step
from ..integrators import integrate
from ._checks import (check_arrays, check_states, check_times, default_labels, names_of,
                      to_device)
from ._ase import FromASE, read_any
from ._files import Parts, load_states, save_states, write_csv, write_npz
from ._selection import Selection
from ._times import WithTimes, joined_times

__all__ = ["TrajectoryData"]


class TrajectoryData(WithTimes, Selection, FromASE):
    r"""Trajectories of one system on a uniform time grid; possibly of different lengths.

    **Arguments:**

    - `states`: an array `(n_trajectories, n_steps + 1, dim)` with a floating dtype (kept
      as given — except float64 without JAX's 64-bit mode, which becomes float32 with a
      warning, once); `n_trajectories ≥ 1`, `n_steps ≥ 1`, `dim ≥ 1`.
    - `dt`: the time step between consecutive rows, a finite number `> 0`.
    - `t0`, `labels`, `names` (keyword-only, optional): the start time of each
      trajectory (default 0), the names of the `dim` state columns (default
      `q1, …, p1, …` for an even `dim`, else `z1, …`) and of the trajectories (default
      `0, 1, …`); kept by `split` and written by `write`.

    **Raises:** `ValueError` for the wrong rank, too few steps, a non-finite entry (the
    message names the first trajectory and step that has one) or `dt ≤ 0`; `TypeError`
    for a non-floating array.

    Trajectories of different lengths come from `from_arrays` or `read`, atoms' from ASE
    from `from_ase`, irregularly sampled ones (a time per row) from `from_times` or
    `read(..., irregular=True)`. The object is immutable; `dt` is a Python float.
    """

    __slots__ = ("_flat", "_offsets", "_states", "_dt", "_t0", "_labels", "_names", "_source",
                 "_times")

    def __init__(self, states: Float[Array, "N T d"], dt: float, *, t0=None, labels=None,
                 names=None):
        arr = check_states(states)
        n_traj, n_rows, _ = arr.shape
        dt = check_time_step(dt)
        states = states if isinstance(states, jax.Array) else to_device(arr)
        self._set(None, np.arange(n_traj + 1) * n_rows, jnp.asarray(states), dt, t0, labels,
                  names, None)

    def _set(self, flat, offsets, states, dt, t0, labels, names, source, masses=None,
             times=None) -> None:
        n = len(offsets) - 1
        dim = (states if flat is None else flat).shape[-1]
        if times is not None:  # irregular: the nominal step and start times from the times
            times, dt, t0 = joined_times(times)
        self._times = times
        t0 = np.zeros(n) if t0 is None else np.asarray(t0, dtype=np.float64).reshape(-1)
        if t0.shape != (n,) or not np.isfinite(t0).all():
            raise ValueError(f"t0 must hold {n} finite start times, got shape {t0.shape}")
        self._flat, self._offsets, self._states, self._dt = flat, offsets, states, dt
        self._t0 = t0
        self._labels = names_of(labels, dim, "labels") or default_labels(dim)
        self._names = names_of(names, n, "names")
        self._source = source
        self._masses = None if masses is None else np.array(masses, dtype=np.float64)

    @classmethod
    def _build(cls, arrays, dt, *, t0=None, labels=None, names=None, source=None, where=None,
               masses=None, times=None):
        """Check and join per-trajectory arrays (`from_arrays`, `read`), with a time per row
        when `times` is given (then `dt` and `t0` are ignored); `where` prefixes error
        messages (default: the source's path)."""
        if where is None:
            where = "" if source is None else f"{source}: "
        arrays = list(arrays)
        names = names_of(names, len(arrays), "names")
        checked = check_arrays(arrays, names, where)
        lengths = np.array([a.shape[0] for a in checked])
        if times is None:
            dt = check_time_step(dt)
        else:
            times = check_times(times, lengths, names, where)
        dtype = np.result_type(*checked)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        flat = to_device(np.concatenate(checked).astype(dtype, copy=False))
        self = object.__new__(cls)
        states = flat.reshape(len(checked), int(lengths[0]), -1) \
            if (lengths == lengths[0]).all() else None
        self._set(None if states is not None else flat, offsets, states, dt, t0, labels,
                  names, source, masses, times)
        return self

    # --- construction --------------------------------------------------------------

    @classmethod
    def from_arrays(cls, arrays, dt: float, *, t0=None, labels=None,
                    names=None) -> "TrajectoryData":
        r"""Trajectories of any lengths, one array `(T_i, d)` each, sampled every `dt`.

        **Arguments:**

        - `arrays`: a sequence of arrays `(T_i, d)` with floating dtypes, `T_i ≥ 2`, one
          `d` for all (they are joined in their common dtype).
        - `dt`: the time step, a finite number `> 0`.
        - `t0`, `labels`, `names`: as for the constructor.

        **Returns:** a `TrajectoryData`; rectangular (with `states`) when all `T_i` are
        equal.

        **Raises:** `ValueError` naming the trajectory for a wrong rank, a different
        width, fewer than 2 states or a non-finite value.
        """
        return cls._build(arrays, dt, t0=t0, labels=labels, names=names)

    @classmethod
    def from_system(cls, system, initial_conditions: Float[Array, "*B d"], dt: float,
                    n_steps: int, *, method: str = "implicit_midpoint",
                    substeps: int = 1) -> "TrajectoryData":
        """Integrate `system` from each initial condition (see
        `geomlearn.integrators.integrate`, whose arguments these are).

        **Arguments:**

        - `system`: a `geomlearn.systems.AbstractSystem`.
        - `initial_conditions`: `(B, dim)`, or `(dim,)` for one trajectory.
        - `dt`, `n_steps`, `method`, `substeps`: as for `integrate`.

        **Returns:** a `TrajectoryData` with `B` trajectories of `n_steps + 1` states.
        """
        n_steps = check_int("n_steps", n_steps, minimum=1)
        states = integrate(
            system, initial_conditions, dt, n_steps, method=method, substeps=substeps
        )
        if states.ndim == 2:
            states = states[None]
        labels = tuple(system.labels)
        return cls(states, dt, labels=labels if len(labels) == states.shape[-1] else None)

    @classmethod
    def read(cls, path: str | os.PathLike, *, q_columns=None, p_columns=None,
             irregular: bool = False) -> "TrajectoryData":
        r"""Read trajectories from a `.npz`, `.csv` or ASE `.traj` file (by the suffix).

        - `.npz`: `states` `(N, T, d)` and `dt` (as `save` writes), or `traj_0, traj_1,
          …` each `(T_i, d)` with `dt` (a scalar) or `t_0, t_1, …` (each trajectory's
          times); optionally `t0`, `columns`, `trajectories` (as `write` writes). The
          arrays keep their dtype (float64 without 64-bit mode: float32, with a warning).
        - `.csv`: a header and one row per state: a `trajectory` column (any label), a
          `t` column, then the state columns; the rows of a trajectory in time order
          (trajectories ordered by their first row). Values are read in JAX's default
          float dtype.
        - `.traj`: one trajectory of the file's frames, as `from_ase(path)` reads it.

        The time step is the same for all rows of all trajectories, to a relative
        $10^{-6}$; the first time of each trajectory is kept (`t0`). With
        `irregular=True` the times of a file that stores them (the CSV `t` column, an
        `.npz`'s `t_0, t_1, …`; a `.traj` file's frame times) are kept per row instead,
        strictly increasing within a trajectory: the data are irregular (`from_times`)
        even when the steps happen to be uniform. A file that stores only a step (`dt`;
        a `.traj` header) still gives regular data.

        **Arguments:**

        - `path`: the file.
        - `q_columns`, `p_columns`: the state columns, positions then momenta (lists, or
          comma-separated strings); other columns are ignored. Default: the columns but
          `trajectory` and `t` by name, positions first (the rule of the docs' "Your own
          data"; a `ColumnWarning` says when it reorders or leaves out invariants).
        - `irregular`: keep each row's time (default `False`: refuse a non-uniform step).

        **Raises:** `ValueError` (one line, starting with the path and naming the
        trajectory — for CSV the data row — and what was expected) for a missing or
        unreadable file, an empty file, a missing column, names that do not say which
        columns are positions, a non-number, NaN or inf, inconsistent widths, a
        non-uniform time step (without `irregular`; the message says to pass it), times
        that do not increase (with it: naming the row and the two times) or a trajectory
        of one state.
        """
        parts: Parts = read_any(path, q_columns=q_columns, p_columns=p_columns,
                                irregular=irregular)
        arrays = parts.arrays
        if os.path.splitext(os.fspath(path))[1].lower() == ".csv":
            dtype = jnp.zeros(0).dtype  # text has no dtype: JAX's default float
            arrays = [a.astype(dtype) for a in arrays]
        return cls._build(arrays, parts.dt, t0=parts.t0, labels=parts.labels,
                          names=parts.names, source=os.fspath(path), masses=parts.masses,
                          times=parts.times)

    # --- shape -----------------------------------------------------------------------

    def _ragged_error(self, what: str) -> ValueError:
        return ValueError(
            f"{what} needs trajectories of one length, but these have lengths "
            f"{min(self.lengths)} to {max(self.lengths)}; use `trajectories` (one (T_i, d) "
            "array each) or `head(n)` (the first n states of every trajectory)"
        )

    @property
    def ragged(self) -> bool:
        """Whether the trajectories have different lengths."""
        return self._states is None

    @property
    def states(self) -> Float[Array, "N T d"]:
        """The states, `(n_trajectories, n_steps + 1, dim)`; `ValueError` for ragged data."""
        if self._states is None:
            raise self._ragged_error("states")
        return self._states

    @property
    def trajectories(self) -> tuple[Float[Array, "T d"], ...]:
        """The trajectories, one array `(T_i, dim)` each."""
        if self._states is not None:
            return tuple(self._states)
        o = self._offsets
        return tuple(self._flat[o[i] : o[i + 1]] for i in range(len(o) - 1))

    @property
    def lengths(self) -> tuple[int, ...]:
        """The number of states `T_i` of each trajectory."""
        return tuple(int(n) for n in np.diff(self._offsets))

    @property
    def dt(self) -> float:
        """The time step; for irregular data the nominal step, the mean of all steps."""
        return self._dt

    @property
    def t0(self) -> np.ndarray:
        """The start time of each trajectory, `(n_trajectories,)` float64 (a copy)."""
        return self._t0.copy()

    @property
    def labels(self) -> tuple[str, ...]:
        """The names of the `dim` state columns."""
        return self._labels

    @property
    def names(self) -> tuple[str, ...]:
        """The names of the trajectories (default `"0", "1", …`)."""
        return self._names or tuple(str(i) for i in range(self.n_trajectories))

    @property
    def source(self) -> str | None:
        """The file the data were read from, or `None`."""
        return self._source

    @property
    def n_trajectories(self) -> int:
        return len(self._offsets) - 1

    @property
    def n_steps(self) -> int:
        """Steps per trajectory (each has `n_steps + 1` states); `ValueError` for ragged
        data."""
        return self.states.shape[1] - 1

    @property
    def dim(self) -> int:
        return self._data.shape[-1]

    @property
    def dtype(self):
        return self._data.dtype

    @property
    def _data(self):
        return self._flat if self._states is None else self._states

    def __len__(self) -> int:
        return self.n_trajectories

    def __repr__(self) -> str:
        steps = (f"n_steps={self.n_steps}" if not self.ragged else
                 f"lengths={min(self.lengths)}..{max(self.lengths)}")
        step = f"dt≈{self._dt:.6g}, irregular=True" if self.irregular else f"dt={self._dt}"
        return (f"TrajectoryData(n_trajectories={self.n_trajectories}, {steps}, "
                f"dim={self.dim}, {step}, dtype={self.dtype})")

    # --- samples ---------------------------------------------------------------------

    def _flat_states(self):
        return self._flat if self._states is None else self._states.reshape(-1, self.dim)

    def _who(self, i: int) -> str:
        if self._names is None or self._names[i] == str(i):
            return f"trajectory {i}"
        return f"trajectory {self._names[i]!r}"

    @property
    def _where(self) -> str:
        return "" if self._source is None else f"{self._source}: "

    def pairs(self, *, times: bool = False) -> tuple:
        r"""One-step pairs $(z_k, z_{k+1})$ from every trajectory, never across two.

        **Returns:** `(x, y)`, each `(M, dim)` with $M = \sum_i (T_i - 1)$, ordered by
        trajectory, then time; with `times=True` also their times `(tx, ty)`, each
        `(M,)` float64 NumPy (`row_times`: $t_0 + k\,\Delta t$ for regular data).
        """
        index = self._pair_rows()
        if self._states is not None:
            x = self._states[:, :-1].reshape(-1, self.dim)
            y = self._states[:, 1:].reshape(-1, self.dim)
        else:
            x, y = self._flat[index], self._flat[index + 1]
        return (x, y) + self._times_at(index, 1) if times else (x, y)

    def windows(self, seq_length: int, prediction_window: int | None = None, *,
                stride: int = 1, times: bool = False) -> tuple:
        r"""Input and target windows for transformer integrators.

        For each start $k$ (every `stride`-th step) the input is rows $k, \dots, k+T-1$ of
        a trajectory and the target rows $k+pw, \dots, k+pw+T-1$ — the input shifted by
        $pw$, so its last $pw$ rows are the states to predict. Both windows lie entirely
        in one trajectory, so trajectory $i$ gives
        $\lfloor (T_i - T - pw) / \text{stride} \rfloor + 1$ windows.

        **Arguments:**

        - `seq_length`: the window length $T \ge 1$.
        - `prediction_window`: the shift $pw$, $1 \le pw \le T$; `None` means $T$.
        - `stride`: the step between consecutive window starts, `≥ 1` (default 1).
        - `times`: also return the times of the rows (default `False`).

        **Returns:** `(inputs, targets)`, each `(M, T, dim)`, ordered by trajectory, then
        start time; with `times=True` `(inputs, targets, input_times, target_times)`, the
        times `(M, T)` float64 NumPy, from `row_times` ($t_0 + k\,\Delta t$ when regular).

        **Raises:** `ValueError` naming the first trajectory with fewer than $T + pw$
        states, or for out-of-range arguments.
        """
        T = check_int("seq_length", seq_length, minimum=1)
        pw = T if prediction_window is None else check_int(
            "prediction_window", prediction_window, minimum=1
        )
        if pw > T:
            raise ValueError(
                f"prediction_window must be <= seq_length ({T}), got {pw} (the last pw rows "
                f"of the target window are the prediction)"
            )
        stride = check_int("stride", stride, minimum=1)
        lengths = self.lengths
        short = next((i for i, n in enumerate(lengths) if n < T + pw), None)
        if short is not None:
            who = self._who(short) if self.ragged else "each trajectory"
            raise ValueError(
                f"{self._where}an input window of {T} states and its target shifted by {pw} need "
                f"{T + pw} consecutive states (T + pw), but {who} has {lengths[short]}; use "
                "shorter windows or longer trajectories"
            )
        starts = np.concatenate([o + np.arange(0, n - T - pw + 1, stride)
                                 for o, n in zip(self._offsets[:-1], lengths)])
        index = starts[:, None] + np.arange(T)[None, :]  # (M, T)
        flat = self._flat_states()
        out = (flat[index], flat[index + pw])
        return out + self._times_at(index, pw) if times else out

    # --- construction of parts ------------------------------------------------------

    def _like(self, flat, offsets, states, *, t0, labels, names, times) -> "TrajectoryData":
        """A new data set of this class with this one's time step, source and masses (and
        the per-trajectory `times` of irregular data)."""
        new = object.__new__(type(self))
        _set = type(self)._set
        _set(new, flat, offsets, states, self._dt, t0, labels, names, self._source, self._masses,
             times)
        return new

    def _rebuilt(self, arrays, *, t0, labels, names, times) -> "TrajectoryData":
        """`arrays` checked and joined, with this one's time step, source and masses (and
        the per-trajectory `times` of irregular data)."""
        return type(self)._build(arrays, self._dt, t0=t0, labels=labels, names=names,
                                 source=self._source, where="", masses=self._masses,
                                 times=times)

    # --- files -----------------------------------------------------------------------

    def write(self, path: str | os.PathLike) -> None:
        """Write the trajectories to a `.npz` or `.csv` file (chosen by the suffix), in a
        format `read` reads back.

        - `.npz`: `traj_0, traj_1, …` (each `(T_i, dim)`, in the data's dtype), `dt`,
          `t0`, `columns` (the `labels`), `trajectories` (the `names`) and
          `format_version` — NumPy arrays only, no pickle.
        - `.csv`: a header `trajectory,t,<labels>` and one row per state; the time column
          is `t0 + k dt`; values with enough digits to be read back exactly (17
          significant digits for float64, 9 for float32).

        Irregular data are written with their times — `.npz`: `t_0, t_1, …` instead of
        `dt`; `.csv`: the `t` column, to 17 significant digits — and read back by
        `read(path, irregular=True)`.

        **Raises:** `ValueError` for another suffix; `OSError` when the file cannot be
        written.
        """
        suffix = os.path.splitext(os.fspath(path))[1].lower()
        writers = {".npz": write_npz, ".csv": write_csv}
        if suffix not in writers:
            raise ValueError(f"{os.fspath(path)}: unknown file type "
                             f"{suffix or '(no suffix)'!r}; expected .npz or .csv")
        arrays = [np.asarray(t) for t in self.trajectories]
        writers[suffix](path, arrays, self._dt, self._t0, self._labels, self.names,
                        self.row_times if self.irregular else None)

    def save(self, path: str | os.PathLike) -> None:
        """Write rectangular data to an `.npz` file as `states` `(N, T, d)`, `dt` and
        `format_version` (NumPy arrays only, no pickle); `write` takes any data.

        The states are stored in their dtype. `numpy.savez` appends `.npz` to a path
        without that suffix. **Raises:** `ValueError` for ragged or irregular data.
        """
        if self.irregular:
            raise ValueError("save writes regularly sampled data (states and one dt); these "
                             "data are irregular (a time per row): use write(path)")
        save_states(path, np.asarray(self.states), self._dt)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "TrajectoryData":
        """Read a dataset written by `save` (loaded with `allow_pickle=False`).

        **Raises:** `ValueError` when the file lacks the `states`/`dt` entries or was
        written by a newer format version.
        """
        return cls(*load_states(path))
