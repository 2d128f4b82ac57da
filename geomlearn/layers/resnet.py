r"""The unconstrained residual layer $x \leftarrow x + \sigma(Wx + b)$ (He et al., 2016)."""

from __future__ import annotations

from typing import Callable

import equinox as eqx
import jax.numpy as jnp

from .._activations import resolve_activation
from .._typing import Array, Float, PRNGKeyArray
from .._validation import check_floating, check_int, check_last_dim, float_dtype
from .._nn import glorot_normal

__all__ = ["ResNetLayer"]


class ResNetLayer(eqx.Module):
    r"""A residual layer $x \leftarrow x + \sigma(W x + b)$ with a square $W$.

    The residual connection of He, Zhang, Ren and Sun, *Deep residual learning for image
    recognition*, CVPR 2016, in the single-matrix form GeometricMachineLearning.jl calls
    `ResNetLayer`; it is the feed-forward block of the standard transformer. It preserves
    **no** structure: its Jacobian $I + \operatorname{diag}(\sigma'(Wx + b))\,W$ is neither
    symplectic nor of unit determinant in general.

    (The [`ResNet`][geomlearn.models.ResNet] *model* uses a different, two-matrix block
    $x \leftarrow x + W_2\,\sigma(W_1 x + b)$.)

    **Parameters:** $W \in \mathbb{R}^{\dim \times \dim}$ and, with `use_bias`,
    $b \in \mathbb{R}^{\dim}$ — in total $\dim^2 + \dim$ ($\dim^2$ without bias).

    **Initialisation:** $W$ Glorot normal (std $1/\sqrt{\dim}$), $b = 0$.

    **Arguments:**

    - `dim`: the feature dimension (any `dim ≥ 1`).
    - `activation`: a callable or a name; default `jnp.tanh`.
    - `use_bias`: whether to add $b$ (keyword-only, default `True`); without it `bias` is
      `None`.
    - `key`: a JAX PRNG key (keyword-only).
    - `dtype`: the parameter dtype; `None` means JAX's default float.

    **Call:** `layer(x)` with `x` of shape `(dim,)` or a window `(T, dim)`; the map acts on
    the last axis (row by row for a window). Returns `x`'s shape and dtype.

    ```python
    layer = ResNetLayer(3, key=jax.random.PRNGKey(0))
    layer(jnp.ones((5, 3))).shape   # (5, 3)
    ```
    """

    weight: Float[Array, "dim dim"]
    bias: Float[Array, " dim"] | None
    dim: int = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)
    use_bias: bool = eqx.field(static=True)

    def __init__(
        self,
        dim: int,
        activation: Callable | str = jnp.tanh,
        *,
        use_bias: bool = True,
        key: PRNGKeyArray,
        dtype=None,
    ):
        self.dim = check_int("dim", dim, minimum=1)
        resolve_activation(activation)
        self.activation = activation
        if not isinstance(use_bias, bool):
            raise TypeError(f"use_bias must be a bool, got {use_bias!r}")
        self.use_bias = use_bias
        dtype = float_dtype(dtype)
        self.weight = glorot_normal(key, (self.dim, self.dim), dtype)
        self.bias = jnp.zeros((self.dim,), dtype) if use_bias else None

    def __call__(self, x: Float[Array, "*T dim"]) -> Float[Array, "*T dim"]:
        check_floating("ResNetLayer input", x)
        check_last_dim("ResNetLayer", x, self.dim, ndim=(1, 2))
        dtype = x.dtype
        sigma = resolve_activation(self.activation)
        pre = x @ self.weight.astype(dtype).T  # (dim,) or (T, dim): acts on the last axis
        if self.bias is not None:
            bias = self.bias.astype(dtype)
            pre = pre + jnp.reshape(bias, (1,) * (x.ndim - 1) + bias.shape)
        return x + sigma(pre)
