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

    With $z = (x, y) = (q, p)$, $x, y \in \mathbb{R}^n$, the Hénon-like map is

    $$H_h[V, \eta](x, y) = \big(y + \eta,\; -x + h\,\nabla V(y)\big),$$

    with a one-hidden-layer scalar network $V(y) = a^\top \sigma(K y + b)$ (its gradient
    $\nabla V(y) = K^\top\big(a \odot \sigma'(Ky + b)\big)$ is taken by `jax.grad`) and a
    shift $\eta \in \mathbb{R}^n$. The layer is $H_h^4 = H_h \circ H_h \circ H_h \circ H_h$, as in
    Burby, Tang and Maulik, *Fast neural Poincaré maps for toroidal magnetic fields*,
    Plasma Phys. Control. Fusion 63 (2020).

    **Why it is symplectic.** The Jacobian of $H_h$ is
    $M = \begin{pmatrix} 0 & I \\ -I & h\nabla^2 V \end{pmatrix}$, and since the Hessian
    $\nabla^2 V$ is symmetric, $M^\top \mathbb{J} M = \mathbb{J}$ — for **every** parameter
    value and **every** $h$.

    **The step size** `h` multiplies $\nabla V$ only (the map is the Hénon map of the
    potential $hV$, so it stays symplectic); `h=None` means $h = 1$. The shift is not
    scaled: with $h = 0$ four iterations give $(x, y) \mapsto (y + \eta, -x) \mapsto
    (-x + \eta, -y - \eta) \mapsto (-y, x - \eta) \mapsto (x, y)$, the identity, whatever
    $\eta$. To first order in $h$ the layer is the time-$h$ flow of the separable
    Hamiltonian $-W(p) - W(q - \eta)$ with $W(y) = V(y) + V(-y - \eta)$:

    $$\text{layer}(q, p; h) = \big(q - h\nabla W(p),\; p + h\nabla W(q - \eta)\big)
      + O(h^2).$$

    (Scaling $\eta$ by $h$ as well would also give the identity at $h = 0$, but would
    leave only the even part of $V$ at first order.)

    **Inverse:** $H_h^{-1}(x', y') = \big(h\nabla V(x' - \eta) - y',\; x' - \eta\big)$,
    applied four times.

    **Parameters** (`dim = 2n`, `width = w`): $K \in \mathbb{R}^{w \times n}$,
    $a, b \in \mathbb{R}^w$, $\eta \in \mathbb{R}^n$ — in total $w\,(n + 2) + n$.

    **Initialisation:** $K$ Glorot normal, $a \sim \mathcal{N}(0, 0.1^2/w)$, $b = 0$,
    $\eta = 0$: close to the identity.

    **Arguments:**

    - `dim`: the phase-space dimension `2n` (even; odd raises `ValueError`).
    - `width`: the hidden width `w ≥ 1` of $V$.
    - `activation`: $\sigma$, a callable or a name (default `jnp.tanh`). $\nabla V$ uses
      $\sigma'$, so choose a differentiable activation (with `"relu"`, $\nabla V$ is
      piecewise constant).
    - `key`: a JAX PRNG key (keyword-only).
    - `dtype`: the parameter dtype; `None` means JAX's default float.

    **Call:** `layer(z, h=None)` and `layer.inverse(z, h=None)` on one point `(dim,)`;
    returns `z`'s shape and dtype.

    ```python
    layer = HenonLayer(2, 8, key=jax.random.PRNGKey(0))
    z = jnp.array([0.1, -0.4])
    layer.inverse(layer(z))   # == z
    ```
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
