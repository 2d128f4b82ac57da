r"""The unconstrained baseline: a residual network with no geometric structure."""

from __future__ import annotations

from typing import Callable, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from .._activations import resolve_activation
from .._nn import OUTPUT_INIT_SCALE, check_point, glorot_normal, scale_by_step
from .._typing import Array, Float, PRNGKeyArray
from .._validation import check_int, float_dtype, step_size
from ._integrators import AbstractFeedForwardIntegrator
from ._stack import scan_stack, stack_modules

__all__ = ["ResNet"]


class _ResidualBlock(eqx.Module):
    """One block `x ← x + h·W₂ σ(W₁ x + b)` (see `ResNet`)."""

    W1: Float[Array, "width dim"]
    b: Float[Array, " width"]
    W2: Float[Array, "dim width"]
    activation: Callable | str = eqx.field(static=True)

    def __init__(self, dim: int, width: int, activation, *, key, dtype):
        k1, k2 = jax.random.split(key)
        self.W1 = glorot_normal(k1, (width, dim), dtype)
        self.b = jnp.zeros((width,), dtype)
        # W2 at a fraction of Glorot scale: a fresh network is a moderate perturbation of
        # the identity (and still visibly not symplectic).
        self.W2 = OUTPUT_INIT_SCALE * glorot_normal(k2, (dim, width), dtype)
        self.activation = activation

    def __call__(self, x, h):
        dtype = x.dtype
        sigma = resolve_activation(self.activation)
        hidden = sigma(self.W1.astype(dtype) @ x + self.b.astype(dtype))
        return x + scale_by_step(self.W2.astype(dtype) @ hidden, h)


class ResNet(AbstractFeedForwardIntegrator):
    r"""A residual network, the unconstrained baseline for the SympNets.

    $$x \leftarrow x + h\,W_2^{(i)}\,\sigma\big(W_1^{(i)} x + b^{(i)}\big),
      \qquad i = 1, \dots, \text{depth},$$

    with $W_1^{(i)} \in \mathbb{R}^{w \times d}$, $b^{(i)} \in \mathbb{R}^w$,
    $W_2^{(i)} \in \mathbb{R}^{d \times w}$ (He, Zhang, Ren, Sun, *Deep residual learning
    for image recognition*, CVPR 2016). Nothing constrains the Jacobian, so the map is
    **not symplectic** and does not preserve volume: it is the network a SympNet is
    compared against (Jin et al., *SympNets*, 2020, use the same kind of baseline).
    Its `structure` is `"none"`, and it has no closed-form inverse.

    `h` (optional scalar; one per sample under `vmap`) multiplies every residual update;
    $h \to 0$ gives the identity. (This two-matrix block differs from the single-matrix
    [`ResNetLayer`][geomlearn.layers.ResNetLayer].)

    The blocks are identical in shape: their parameters are stacked along a leading axis
    of length `depth` (the field `blocks`) and run as one `lax.scan`.

    **Parameters** (`dim = d`, `width = w`): $\text{depth}\cdot(2dw + w)$.

    **Initialisation:** $W_1$ Glorot normal, $b = 0$, $W_2$ Glorot normal times $0.1$.

    **Arguments:**

    - `dim`: the state dimension `d ≥ 1` (odd allowed: no phase-space structure needed).
    - `width`: the hidden width `w ≥ 1` of each block.
    - `depth`: the number of residual blocks, `≥ 1`.
    - `activation`: a callable or a name (default `jnp.tanh`).
    - `key`: a JAX PRNG key (keyword-only); `dtype`: the parameter dtype.

    **Call:** `model(z, h=None)` on one point `(dim,)`; returns `z`'s shape and dtype.

    ```python
    model = ResNet(2, width=16, depth=3, key=jax.random.PRNGKey(0))
    model(jnp.array([1.0, 0.0]), 0.1)
    ```
    """

    structure: ClassVar[str] = "none"

    blocks: _ResidualBlock
    dim: int = eqx.field(static=True)
    width: int = eqx.field(static=True)
    depth: int = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)

    def __init__(
        self,
        dim: int,
        *,
        width: int,
        depth: int,
        activation: Callable | str = jnp.tanh,
        key: PRNGKeyArray,
        dtype=None,
    ):
        self.dim = check_int("dim", dim, minimum=1)
        self.width = check_int("width", width, minimum=1)
        self.depth = check_int("depth", depth, minimum=1)
        resolve_activation(activation)
        self.activation = activation
        dtype = float_dtype(dtype)
        keys = jax.random.split(key, self.depth)
        self.blocks = stack_modules(
            [_ResidualBlock(self.dim, self.width, activation, key=k, dtype=dtype) for k in keys]
        )

    def __call__(self, z: Float[Array, " dim"], h=None) -> Float[Array, " dim"]:
        check_point(type(self).__name__, z, self.dim)
        h = step_size(h, z.dtype)
        return scan_stack(self.blocks, z, h, False)

