r"""The Hénon layer: four iterations of a Hénon-like map (Burby, Tang and Maulik, 2020)."""

from __future__ import annotations

from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp

from .._activations import resolve_activation
from .._typing import Array, Float, PRNGKeyArray
from .._nn import check_point, potential_parameters, scale_by_step
from .._validation import check_even, check_int, float_dtype, step_size
from ._symplectic import AbstractSymplecticLayer

__all__ = ["HenonLayer"]


class HenonLayer(AbstractSymplecticLayer):
    r"""Four iterations of the Hénon-like map $H_h[V, \eta]$ with a learned potential $V$.

    With $z = (x, y) = (q, p)$, $x, y \in \mathbb{R}^n$,

    $$H_h[V, \eta](x, y) = \big(y + \eta,\; -x + h\,\nabla V(y)\big),$$

    a one-hidden-layer potential $V(y) = a^\top \sigma(K y + b)$ (differentiated by
    `jax.grad`) and a shift $\eta \in \mathbb{R}^n$; the layer is $H_h^4$. The Jacobian
    $\begin{pmatrix} 0 & I \\ -I & h\nabla^2 V \end{pmatrix}$ of $H_h$ preserves
    $\mathbb{J}$ because $\nabla^2 V$ is symmetric: the layer is symplectic for **every**
    parameter value and every step size $h$ (`h=None`: $h = 1$). $h$ scales $\nabla V$
    only, so at $h = 0$ the four iterations are the identity whatever $\eta$; to first
    order in $h$ the layer is the time-$h$ flow of $-W(p) - W(q - \eta)$ with
    $W(y) = V(y) + V(-y - \eta)$. The inverse applies
    $H_h^{-1}(x', y') = \big(h\nabla V(x' - \eta) - y',\; x' - \eta\big)$ four times.

    Parameters (`width = w`): $K \in \mathbb{R}^{w \times n}$ (Glorot normal),
    $a \sim \mathcal{N}(0, 0.1^2/w)$, $b = 0$, $\eta = 0$ — $w(n + 2) + n$ numbers, close
    to the identity at initialisation.

    **Arguments:**

    - `dim`: the phase-space dimension `2n` (even; odd raises `ValueError`).
    - `width`: the hidden width `w ≥ 1` of $V$.
    - `activation`: $\sigma$, a callable or a name (default `jnp.tanh`); $\nabla V$ uses
      $\sigma'$, so choose a differentiable one.
    - `key`: a JAX PRNG key (keyword-only).
    - `dtype`: the parameter dtype; `None` means JAX's default float.

    **Call:** `layer(z, h=None)` and `layer.inverse(z, h=None)` on one point `(dim,)`;
    returns `z`'s shape and dtype.

    ```python
    layer = HenonLayer(2, 8, key=jax.random.PRNGKey(0))
    layer.inverse(layer(jnp.array([0.1, -0.4])))   # the same point
    ```

    Reference: Burby, Tang and Maulik, *Fast neural Poincaré maps for toroidal magnetic
    fields*, Plasma Phys. Control. Fusion 63 (2020).
    """

    K: Float[Array, "width n"]
    a: Float[Array, " width"]
    b: Float[Array, " width"]
    eta: Float[Array, " n"]
    dim: int = eqx.field(static=True)
    width: int = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)

    def __init__(
        self,
        dim: int,
        width: int,
        activation: Callable | str = jnp.tanh,
        *,
        key: PRNGKeyArray,
        dtype=None,
    ):
        self.dim = check_even("dim", dim)
        self.width = check_int("width", width, minimum=1)
        resolve_activation(activation)
        self.activation = activation
        dtype = float_dtype(dtype)
        n = self.dim // 2
        self.K, self.a, self.b = potential_parameters(key, self.width, n, dtype)
        self.eta = jnp.zeros((n,), dtype)

    def potential(self, y: Float[Array, " n"]) -> Float[Array, ""]:
        r"""The scalar network $V(y) = a^\top \sigma(K y + b)$, in `y`'s dtype."""
        dtype = y.dtype
        sigma = resolve_activation(self.activation)
        pre = self.K.astype(dtype) @ y + self.b.astype(dtype)
        return jnp.dot(self.a.astype(dtype), sigma(pre))

    def _parts(self, z, h):
        check_point(type(self).__name__, z, self.dim)
        n = self.dim // 2
        h = step_size(h, z.dtype)
        return z[:n], z[n:], h, self.eta.astype(z.dtype), jax.grad(self.potential)

    def __call__(self, z: Float[Array, " dim"], h=None) -> Float[Array, " dim"]:
        x, y, h, shift, grad_v = self._parts(z, h)
        for _ in range(4):
            x, y = y + shift, scale_by_step(grad_v(y), h) - x
        return jnp.concatenate([x, y])

    def inverse(self, z: Float[Array, " dim"], h=None) -> Float[Array, " dim"]:
        x, y, h, shift, grad_v = self._parts(z, h)
        for _ in range(4):
            y_prev = x - shift
            x, y = scale_by_step(grad_v(y_prev), h) - y, y_prev
        return jnp.concatenate([x, y])
