"""Small helpers shared by the layer and model families (one copy each): point checks,
initialisers, step scaling."""

from __future__ import annotations

import math

import jax

from ._validation import check_floating, check_last_dim

__all__ = ["OUTPUT_INIT_SCALE", "check_point", "scale_by_step", "glorot_normal"]

# Scale of the "output" parameters at initialisation (the vector `a` of gradient and
# activation layers, the symmetric matrix of linear layers): a freshly built layer is a
# small perturbation of the identity, as a one-step map z_t -> z_{t+1} should be.
OUTPUT_INIT_SCALE = 0.1


def check_point(name: str, z, dim: int) -> None:
    """A single phase-space point of shape `(dim,)` with a floating dtype."""
    check_floating(f"{name} input", z)
    check_last_dim(name, z, dim, ndim=(1,))


def scale_by_step(increment: jax.Array, h: jax.Array | None) -> jax.Array:
    return increment if h is None else h * increment


def glorot_normal(key, shape: tuple[int, int], dtype) -> jax.Array:
    """Glorot (Xavier) normal: std = sqrt(2 / (fan_in + fan_out))."""
    std = math.sqrt(2.0 / (shape[0] + shape[1]))
    return std * jax.random.normal(key, shape, dtype)
