r"""`TrajectoryData`: trajectories on a uniform time grid, and the samples training needs.

A dataset is an array of states of shape `(n_trajectories, n_steps + 1, dim)` — row `t`
of trajectory `i` is the state at time $t\,\Delta t$ — and the time step $\Delta t$.
From it come

- one-step pairs $(z_t, z_{t+1})$ for feed-forward integrators (`pairs`), and
- windows for transformer integrators (`windows`): an input window
  $Z_{t..t+T-1}$ and the target $Z_{t+pw..t+pw+T-1}$, the same window shifted by the
  prediction window `pw` (DESIGN.md: the model's output for an input window ends `pw`
  steps later; its last `pw` rows are the prediction).

Samples never straddle two trajectories, and `split` divides by whole trajectories so
that validation trajectories are unseen in training.

```python
>>> from geomlearn.systems import Pendulum
>>> data = TrajectoryData.from_system(Pendulum(), Pendulum().default_initial_conditions(),
...                                   dt=0.1, n_steps=50)
>>> x, y = data.pairs()            # (3 * 50, 2) each
>>> inputs, targets = data.windows(4)   # (3 * 44, 4, 2) each
>>> train, val = data.split(0.67, key=jax.random.PRNGKey(0))
```
"""

from __future__ import annotations

import numbers
import os

import jax
import jax.numpy as jnp
import numpy as np

from ._typing import Array, Float, PRNGKeyArray
from ._validation import check_int
from ._validation import check_time_step
from .integrators import integrate

__all__ = ["TrajectoryData"]

_FORMAT_VERSION = 1


class TrajectoryData:
    r"""Trajectories of one system on a uniform time grid.

    **Arguments:**

    - `states`: an array `(n_trajectories, n_steps + 1, dim)` with a floating dtype (kept
      as given); `n_trajectories ≥ 1`, `n_steps ≥ 1`, `dim ≥ 1`.
    - `dt`: the time step between consecutive rows, a finite number `> 0`.

    **Raises:** `ValueError` for the wrong rank, too few steps, a non-finite entry (the
    message names the first trajectory and step that has one) or `dt ≤ 0`; `TypeError`
    for a non-floating array.

    The object is immutable; `states` is a JAX array, `dt` a Python float. Build one from
    a system with `TrajectoryData.from_system`.
    """

    __slots__ = ("_states", "_dt")

    def __init__(self, states: Float[Array, "N T d"], dt: float):
        if isinstance(states, jax.core.Tracer):
            raise TypeError("states must be a concrete array, not a traced value")
        arr = np.asarray(states)
        if arr.ndim != 3:
            raise ValueError(
                "states must have shape (n_trajectories, n_steps + 1, dim) (rank 3), got "
                f"shape {arr.shape}; for a single trajectory use states[None]"
            )
        if not jnp.issubdtype(arr.dtype, jnp.floating):  # bfloat16 is not np.floating
            raise TypeError(f"states must have a floating dtype, got {arr.dtype}")
        n_traj, n_rows, dim = arr.shape
        if n_traj < 1 or dim < 1:
            raise ValueError(
                f"states must hold at least one trajectory of dimension >= 1, got shape "
                f"{arr.shape}"
            )
        if n_rows < 2:
            raise ValueError(
                f"each trajectory needs at least 2 states (n_steps >= 1), got shape "
                f"{arr.shape}"
            )
        finite = np.isfinite(arr)
        if not finite.all():
            i, t, k = (int(v) for v in np.argwhere(~finite)[0])
            raise ValueError(
                f"states has a non-finite value ({arr[i, t, k]}) in trajectory {i} at step "
                f"{t} (component {k})"
            )
        self._dt = check_time_step(dt)
        self._states = jnp.asarray(states)

    # --- construction --------------------------------------------------------------

    @classmethod
    def from_system(
        cls,
        system,
        initial_conditions: Float[Array, "*B d"],
        dt: float,
        n_steps: int,
        *,
        method: str = "implicit_midpoint",
        substeps: int = 1,
    ) -> "TrajectoryData":
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
        return cls(states, dt)

    # --- shape -----------------------------------------------------------------------

    @property
    def states(self) -> Float[Array, "N T d"]:
        """The states, `(n_trajectories, n_steps + 1, dim)`."""
        return self._states

    @property
    def dt(self) -> float:
        """The time step."""
        return self._dt

    @property
    def n_trajectories(self) -> int:
        return self._states.shape[0]

    @property
    def n_steps(self) -> int:
        """Steps per trajectory (each has `n_steps + 1` states)."""
        return self._states.shape[1] - 1

    @property
    def dim(self) -> int:
        return self._states.shape[2]

    @property
    def dtype(self):
        return self._states.dtype

    @property
    def times(self) -> Float[Array, " T"]:
        r"""The time grid $0, \Delta t, \dots, n_\text{steps}\Delta t$, in `states`' dtype."""
        t = np.arange(self.n_steps + 1, dtype=np.float64) * self._dt
        return jnp.asarray(t, dtype=self.dtype)

    def __len__(self) -> int:
        return self.n_trajectories

    def __repr__(self) -> str:
        return (
            f"TrajectoryData(n_trajectories={self.n_trajectories}, n_steps={self.n_steps}, "
            f"dim={self.dim}, dt={self._dt}, dtype={self.dtype})"
        )

    # --- samples ---------------------------------------------------------------------

    def pairs(self) -> tuple[Float[Array, "M d"], Float[Array, "M d"]]:
        r"""One-step pairs $(z_t, z_{t+1})$ from every trajectory.

        **Returns:** `(x, y)`, each `(M, dim)` with `M = n_trajectories · n_steps`,
        ordered by trajectory, then time.
        """
        x = self._states[:, :-1].reshape(-1, self.dim)
        y = self._states[:, 1:].reshape(-1, self.dim)
        return x, y

    def windows(
        self, seq_length: int, prediction_window: int | None = None, *, stride: int = 1
    ) -> tuple[Float[Array, "M T d"], Float[Array, "M T d"]]:
        r"""Input and target windows for transformer integrators.

        For each start $t$ (every `stride`-th step) the input is rows $t, \dots, t+T-1$ of
        a trajectory and the target rows $t+pw, \dots, t+pw+T-1$ — the input shifted by
        $pw$, so its last $pw$ rows are the states to predict. Both windows lie entirely
        in one trajectory, so each trajectory gives
        $\lfloor (n_\text{steps} + 1 - T - pw) / \text{stride} \rfloor + 1$ windows.

        **Arguments:**

        - `seq_length`: the window length $T \ge 1$.
        - `prediction_window`: the shift $pw$, $1 \le pw \le T$; `None` means $T$.
        - `stride`: the step between consecutive window starts, `≥ 1` (default 1).

        **Returns:** `(inputs, targets)`, each `(M, T, dim)`, ordered by trajectory, then
        start time.

        **Raises:** `ValueError` when $T + pw$ exceeds the `n_steps + 1` states of a
        trajectory, or for out-of-range arguments.
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
        rows = self.n_steps + 1
        if T + pw > rows:
            raise ValueError(
                f"an input window of {T} states and its target shifted by {pw} need "
                f"{T + pw} consecutive states, but each trajectory has {rows} "
                f"(n_steps = {self.n_steps}); use shorter windows or longer trajectories"
            )
        starts = np.arange(0, rows - T - pw + 1, stride)
        index = starts[:, None] + np.arange(T)[None, :]  # (W, T)
        inputs = self._states[:, index]  # (N, W, T, d)
        targets = self._states[:, index + pw]
        shape = (-1, T, self.dim)
        return inputs.reshape(shape), targets.reshape(shape)

    # --- splitting, persistence ------------------------------------------------------

    def split(
        self, fraction: float, *, key: PRNGKeyArray | None
    ) -> tuple["TrajectoryData", "TrajectoryData"]:
        r"""Split by whole trajectories into `(first, second)` — typically `(train, val)`.

        The first part gets `round(fraction · n_trajectories)` trajectories, clamped to
        `1 … n_trajectories - 1` so that neither part is empty; the second the rest. With a
        PRNG `key` the trajectories are assigned at random (each part keeps the original
        order among its trajectories); with `key=None` the first part is the leading
        trajectories.

        **Arguments:**

        - `fraction`: the share of trajectories for the first part, `0 < fraction < 1`.
        - `key`: a JAX PRNG key, or `None` for an ordered split (keyword-only, required).

        **Raises:** `ValueError` for a fraction outside `(0, 1)` or a dataset with fewer
        than two trajectories.
        """
        if isinstance(fraction, bool) or not isinstance(fraction, numbers.Real):
            raise TypeError(f"fraction must be a real number, got {fraction!r}")
        fraction = float(fraction)
        if not 0.0 < fraction < 1.0:
            raise ValueError(f"fraction must be in (0, 1), got {fraction}")
        n = self.n_trajectories
        if n < 2:
            raise ValueError(
                f"split needs at least 2 trajectories (it splits by whole trajectories), "
                f"got {n}"
            )
        n_first = min(max(int(round(fraction * n)), 1), n - 1)
        if key is None:
            order = np.arange(n)
        else:
            order = np.asarray(jax.random.permutation(key, n))
        first, second = np.sort(order[:n_first]), np.sort(order[n_first:])
        return (
            TrajectoryData(self._states[first], self._dt),
            TrajectoryData(self._states[second], self._dt),
        )

    def save(self, path: str | os.PathLike) -> None:
        """Write the dataset to an `.npz` file (NumPy arrays only, no pickle).

        The states are stored in their dtype. `numpy.savez` appends `.npz` to a path
        without that suffix.
        """
        np.savez(
            path,
            states=np.asarray(self._states),
            dt=np.asarray(self._dt, dtype=np.float64),
            format_version=np.asarray(_FORMAT_VERSION),
        )

    @classmethod
    def load(cls, path: str | os.PathLike) -> "TrajectoryData":
        """Read a dataset written by `save` (loaded with `allow_pickle=False`).

        **Raises:** `ValueError` when the file lacks the `states`/`dt` entries or was
        written by a newer format version.
        """
        with np.load(path, allow_pickle=False) as archive:
            missing = {"states", "dt"} - set(archive.files)
            if missing:
                raise ValueError(
                    f"{os.fspath(path)!r} is not a TrajectoryData file: missing "
                    f"{sorted(missing)} (found {sorted(archive.files)})"
                )
            version = int(archive["format_version"]) if "format_version" in archive.files else 1
            if version > _FORMAT_VERSION:
                raise ValueError(
                    f"{os.fspath(path)!r} has format version {version}; this geomlearn "
                    f"reads up to {_FORMAT_VERSION}"
                )
            states = archive["states"]
            dt = float(archive["dt"])
        return cls(states, dt)
