"""Activation functions by name.

Models accept an activation either as a callable or as one of the names below.
Persistence (`geomlearn.save`) stores the *name*, so a model whose activation
is not in this table cannot be saved; the error says which names are known.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

ACTIVATIONS: dict[str, Callable] = {
    "tanh": jnp.tanh,
    "sigmoid": jax.nn.sigmoid,
    "relu": jax.nn.relu,
    "gelu": jax.nn.gelu,
    "silu": jax.nn.silu,
    "softplus": jax.nn.softplus,
    "sin": jnp.sin,
    "identity": lambda x: x,
}


def resolve_activation(activation: str | Callable) -> Callable:
    """Return the callable for `activation` (a callable, or a name from `ACTIVATIONS`)."""
    if callable(activation):
        return activation
    if isinstance(activation, str):
        try:
            return ACTIVATIONS[activation]
        except KeyError:
            raise ValueError(
                f"unknown activation {activation!r}; expected a callable or one of "
                f"{sorted(ACTIVATIONS)}"
            ) from None
    raise TypeError(f"activation must be a callable or a name, got {type(activation).__name__}")


def activation_name(activation: Callable) -> str:
    """The registered name of `activation`; `ValueError` if it has none."""
    if isinstance(activation, str):
        resolve_activation(activation)
        return activation
    for name, fn in ACTIVATIONS.items():
        if fn is activation:
            return name
    raise ValueError(
        f"activation {activation!r} has no registered name, so the model cannot be saved; "
        f"use one of {sorted(ACTIVATIONS)}"
    )
