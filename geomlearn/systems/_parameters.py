"""Checks of a system's parameters (plain Python numbers) and its initial conditions."""

from __future__ import annotations

import math
import numbers

import jax.numpy as jnp
import numpy as np

from .._typing import Array, Float
from .._validation import float_dtype


def check_real(name: str, value, *, minimum: float | None = None, strict: bool = True) -> float:
    """`value` as a finite Python float; `ValueError` unless `value > minimum` (or `>=`)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if minimum is not None:
        if strict and value <= minimum:
            raise ValueError(f"{name} must be > {minimum}, got {value}")
        if not strict and value < minimum:
            raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def check_positive(name: str, value) -> float:
    """`value` as a finite Python float `> 0`."""
    return check_real(name, value, minimum=0.0, strict=True)


def check_inertia(inertia) -> tuple[float, float, float]:
    """Three principal moments of inertia, each a finite float `> 0`."""
    try:
        values = tuple(inertia)
    except TypeError:
        raise TypeError(f"inertia must be a sequence of three numbers, got {inertia!r}") from None
    if len(values) != 3:
        raise ValueError(f"inertia must have three entries (I1, I2, I3), got {len(values)}")
    return tuple(check_positive(f"inertia[{i}]", v) for i, v in enumerate(values))


def initial_conditions(rows, dtype) -> Float[Array, "B d"]:
    """Rows of initial states, built in NumPy float64 and cast once to `dtype`."""
    return jnp.asarray(np.asarray(rows, dtype=np.float64), dtype=float_dtype(dtype))
