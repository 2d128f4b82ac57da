"""Small helpers shared by the layer and model families (one copy each): point checks,
initialisers, step scaling, parameter counts."""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp

from ._validation import check_floating, check_last_dim

__all__ = [
    "OUTPUT_INIT_SCALE",
    "check_point",
    "scale_by_step",
    "glorot_normal",
    "output_weights",
    "potential_parameters",
    "count_parameters",
]

# Scale of the "output" parameters at initialisation (the vector `a` of gradient and
# activation layers, the symmetric matrix of linear layers, the second matrix of a
# residual block): a freshly built layer is a small perturbation of the identity, as a
# one-step map z_t -> z_{t+1} should be.
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


def output_weights(key, width: int, dtype) -> jax.Array:
    r"""The output weights $a \sim \mathcal{N}(0, s^2/w)$, $s$ = `OUTPUT_INIT_SCALE`, of
    `width` $= w$ hidden units summed into one scalar (or one direction)."""
    return (OUTPUT_INIT_SCALE / math.sqrt(width)) * jax.random.normal(key, (width,), dtype)


def potential_parameters(key, width: int, n_in: int, dtype) -> tuple[jax.Array, jax.Array, jax.Array]:
    r"""`(K, a, b)` of a one-hidden-layer scalar function of $x \in \mathbb{R}^{n}$ built
    from $\sigma(Kx + b)$ and the weights $a$ (the gradient and Hénon layers):
    $K \in \mathbb{R}^{w \times n}$ Glorot normal, $a$ as `output_weights`, $b = 0$ —
    so the layer starts as a small perturbation of the identity."""
    k_key, a_key = jax.random.split(key)
    return (glorot_normal(k_key, (width, n_in), dtype), output_weights(a_key, width, dtype),
            jnp.zeros((width,), dtype))


def count_parameters(module) -> int:
    """The number of trainable scalars of `module`: the sizes of its floating arrays."""
    return sum(int(leaf.size) for leaf in jax.tree_util.tree_leaves(eqx.filter(module, eqx.is_inexact_array)))
