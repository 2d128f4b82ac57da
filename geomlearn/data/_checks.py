"""Checks of trajectory arrays at the API boundary, and the float64 → float32 warning."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import first_not_increasing

__all__ = ["check_states", "check_arrays", "check_finite", "check_times", "names_of",
           "default_labels", "to_device"]

_warned_float32 = False


def _warn_float32(given: str) -> None:
    """Warn, once per process, that float64 input is stored as float32."""
    global _warned_float32
    if _warned_float32:
        return
    _warned_float32 = True
    warnings.warn(
        f"TrajectoryData: {given} states are stored as float32 because JAX's 64-bit mode is "
        "off; to keep float64, call jax.config.update(\"jax_enable_x64\", True) before "
        "creating the data (command line: --x64)", UserWarning, stacklevel=4)


def to_device(arr: np.ndarray):
    """`jnp.asarray(arr)`, warning (once) when float64 becomes float32."""
    out = jnp.asarray(arr)
    if np.dtype(arr.dtype).itemsize > np.dtype(out.dtype).itemsize:
        _warn_float32(np.dtype(arr.dtype).name)
    return out


def default_labels(dim: int) -> tuple[str, ...]:
    """`q1, …, qn, p1, …, pn` for `dim = 2n`, else `z1, …, z_dim`."""
    if dim % 2:
        return tuple(f"z{k + 1}" for k in range(dim))
    n = dim // 2
    return tuple(f"q{k + 1}" for k in range(n)) + tuple(f"p{k + 1}" for k in range(n))


def names_of(value, count: int, what: str) -> tuple[str, ...] | None:
    """`value` as a tuple of `count` strings (`None` stays `None`)."""
    if value is None:
        return None
    value = tuple(str(v) for v in value)
    if len(value) != count:
        raise ValueError(f"{what} must have {count} entries, got {len(value)}")
    return value


def check_finite(arr: np.ndarray, where: str, who: str) -> None:
    """`ValueError` naming the first step and component of `arr` `(T, d)` that is NaN/inf."""
    finite = np.isfinite(arr)
    if not finite.all():
        t, k = (int(v) for v in np.argwhere(~finite)[0])
        raise ValueError(f"{where}states has a non-finite value ({arr[t, k]}) in {who} at "
                         f"step {t} (component {k}); expected finite numbers")


def check_states(states) -> np.ndarray:
    """`states` `(N, T, d)` as a NumPy array, checked: rank, floating dtype, `N, d ≥ 1`,
    `T ≥ 2`, finite."""
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
            f"states must hold at least one trajectory of dimension >= 1, got shape {arr.shape}"
        )
    if n_rows < 2:
        raise ValueError(
            f"each trajectory needs at least 2 states (n_steps >= 1), got shape {arr.shape}"
        )
    finite = np.isfinite(arr)
    if not finite.all():
        i, t, k = (int(v) for v in np.argwhere(~finite)[0])
        raise ValueError(
            f"states has a non-finite value ({arr[i, t, k]}) in trajectory {i} at step {t} "
            f"(component {k})"
        )
    return arr


def check_arrays(arrays, names, where: str) -> list[np.ndarray]:
    """The trajectories `(T_i, d)` as NumPy arrays, checked one by one (rank, floating
    dtype, one width, `T_i ≥ 2`, finite); errors name the trajectory."""
    arrays = list(arrays)
    if not arrays:
        raise ValueError(f"{where}no trajectories; expected at least one (T, d) array")
    checked: list[np.ndarray] = []
    for i, a in enumerate(arrays):
        if isinstance(a, jax.core.Tracer):
            raise TypeError("trajectories must be concrete arrays, not traced values")
        a = np.asarray(a)
        who = _who(names, i)
        if a.ndim != 2:
            raise ValueError(f"{where}{who} has shape {a.shape}; expected (T, d), one row "
                             "per state")
        if not jnp.issubdtype(a.dtype, jnp.floating):
            raise TypeError(f"{where}{who} must have a floating dtype, got {a.dtype}")
        width = checked[0].shape[1] if checked else None
        if a.shape[1] < 1 or (width is not None and a.shape[1] != width):
            raise ValueError(f"{where}{who} has {a.shape[1]} columns; expected "
                             f"{width or '>= 1'} (one state dimension for all trajectories)")
        if a.shape[0] < 2:
            raise ValueError(f"{where}{who} has {a.shape[0]} state(s); expected at least 2 "
                             "per trajectory")
        check_finite(a, where, who)
        checked.append(a)
    return checked


def _who(names, i: int) -> str:
    return f"trajectory {i}" if names is None or names[i] == str(i) else f"trajectory {names[i]!r}"


def check_times(times, lengths, names, where: str) -> list[np.ndarray]:
    """The times of each trajectory as float64 arrays `(T_i,)`, checked: one array per
    trajectory, one time per state, finite and strictly increasing; errors name the
    trajectory (and the row)."""
    if isinstance(times, jax.core.Tracer):
        raise TypeError("times must be concrete arrays, not traced values")
    times = list(times)
    if len(times) != len(lengths):
        raise ValueError(f"{where}times must hold one array per trajectory: {len(lengths)} "
                         f"trajectories, got {len(times)} time arrays")
    checked: list[np.ndarray] = []
    for i, (t, n) in enumerate(zip(times, lengths)):
        if isinstance(t, jax.core.Tracer):
            raise TypeError("times must be concrete arrays, not traced values")
        t = np.asarray(t)
        if t.ndim != 1 or t.shape[0] != n or not (np.issubdtype(t.dtype, np.floating)
                                                  or np.issubdtype(t.dtype, np.integer)):
            raise ValueError(f"{where}{_who(names, i)} has {n} states but times of shape "
                             f"{t.shape} ({t.dtype}); expected {n} real times, one per state")
        t = t.astype(np.float64)
        bad = np.flatnonzero(~np.isfinite(t))
        if bad.size:
            raise ValueError(f"{where}{_who(names, i)}: the time at row {int(bad[0])} is "
                             f"{t[bad[0]]}; expected finite times")
        k = first_not_increasing(t)
        if k is not None:
            raise ValueError(f"{where}{_who(names, i)}: times must increase strictly, but row "
                             f"{k} is at t = {t[k]:.17g} and row {k + 1} at t = "
                             f"{t[k + 1]:.17g} (rows in time order)")
        checked.append(t)
    return checked
