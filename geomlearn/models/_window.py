"""The input check shared by the window → window transformer integrators."""

from __future__ import annotations

import jax.numpy as jnp

from .._validation import check_floating

__all__ = ["check_model_window"]


def check_model_window(name: str, Z, dim: int) -> None:
    """`TypeError` unless `Z` is floating, `ValueError` unless it is one window `(T, dim)`."""
    check_floating(f"{name} input", Z)
    shape = jnp.shape(Z)
    if len(shape) != 2 or shape[-1] != dim:
        raise ValueError(
            f"{name} expects one window of shape (T, {dim}) (use jax.vmap for a batch), "
            f"got shape {shape}"
        )
