"""Small argument checks shared by layers and models (errors a user can act on)."""

from __future__ import annotations

import math
import numbers

import jax
import jax.numpy as jnp
import numpy as np


def check_int(name: str, value, *, minimum: int | None = None) -> int:
    """`value` as an `int`, raising `TypeError`/`ValueError` naming `name` otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def check_even(name: str, value: int) -> int:
    """A phase-space dimension `2n`: a positive even integer."""
    value = check_int(name, value, minimum=2)
    if value % 2:
        raise ValueError(
            f"{name} must be even (a canonical phase space z = (q, p) has dimension 2n), "
            f"got {value}"
        )
    return value


def float_dtype(dtype) -> np.dtype:
    """Resolve a parameter dtype: `None` means JAX's default float (float64 under x64)."""
    if dtype is None:
        return jnp.zeros((), dtype=float).dtype
    dtype = np.dtype(dtype)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"dtype must be a floating dtype, got {dtype}")
    return dtype


def check_floating(name: str, x) -> None:
    """Raise `TypeError` unless the array `x` has a floating dtype."""
    dtype = jnp.result_type(x)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"{name} must have a floating dtype, got {dtype}")


def check_last_dim(name: str, x, dim: int, *, ndim: tuple[int, ...]) -> None:
    """Shape check for a layer input: `x.ndim in ndim` and `x.shape[-1] == dim`."""
    shape = jnp.shape(x)
    if len(shape) not in ndim:
        expected = " or ".join(f"{n}-d" for n in ndim)
        raise ValueError(f"{name} expects a {expected} input, got shape {shape}")
    if shape[-1] != dim:
        raise ValueError(f"{name} expects last dimension {dim}, got shape {shape}")


def check_bool(name: str, value) -> bool:
    """A configuration flag: a Python (or NumPy) bool, `TypeError` naming `name` otherwise."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {value!r} ({type(value).__name__})")
    return bool(value)


def check_stored_dt(dt) -> float | None:
    """A model's stored time step: `None` or a finite number `> 0`, as a float."""
    if dt is None:
        return None
    if isinstance(dt, bool) or not isinstance(dt, (int, float)) or not (math.isfinite(dt) and dt > 0):
        raise ValueError(f"dt must be None or a finite number > 0, got {dt!r}")
    return float(dt)


def step_size(h, dtype):
    """A step size `h` as a 0-d array of `dtype`, or `None` (no scaling).

    `h` is one scalar per sample (batches of step sizes go through `jax.vmap`).
    """
    if h is None:
        return None
    shape = jnp.shape(h)
    if shape != ():
        raise ValueError(
            f"the step size h must be a scalar (one per sample; use jax.vmap for a batch), "
            f"got shape {shape}"
        )
    h = jnp.asarray(h)
    if not (jnp.issubdtype(h.dtype, jnp.floating) or jnp.issubdtype(h.dtype, jnp.integer)):
        raise TypeError(f"the step size h must be a real number, got dtype {h.dtype}")
    return h.astype(dtype)


def first_not_increasing(values) -> int | None:
    """The first index `i` with `values[i + 1] <= values[i]` of a 1-D array (`None` when
    the values increase strictly): where a sequence of times stops increasing."""
    down = np.flatnonzero(np.diff(np.asarray(values)) <= 0)
    return int(down[0]) if down.size else None


def check_time_step(dt) -> float:
    """A time step `dt` as a finite Python float `> 0` (concrete, validated eagerly)."""
    if isinstance(dt, jax.core.Tracer):
        raise TypeError("dt must be a concrete number (integrate validates it eagerly)")
    is_number = isinstance(dt, numbers.Real) and not isinstance(dt, bool)
    is_scalar_array = (
        isinstance(dt, (np.ndarray, np.generic, jax.Array))
        and np.ndim(dt) == 0
        and np.dtype(dt.dtype).kind in "fiu"
    )
    if not (is_number or is_scalar_array):
        raise TypeError(f"dt must be a real number, got {dt!r}")
    value = float(dt)
    if not math.isfinite(value) or value <= 0.0:
        raise ValueError(f"dt must be a finite number > 0, got {value}")
    return value


def check_point(name: str, z, size: int) -> None:
    """Single-sample check: ``z`` must be one point of shape ``(size,)``."""
    if z.shape != (size,):
        raise ValueError(
            f"{name}: expected one point of shape ({size},), got {z.shape} (use jax.vmap "
            "for a batch)"
        )
