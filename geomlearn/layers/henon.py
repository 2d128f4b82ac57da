r"""The Hénon layer: four iterations of a Hénon-like map (Burby, Tang and Maulik, 2020).

**With a symmetry** (`geomlearn.symmetries`) the potential is a function of invariant
features, so $\nabla V$ commutes with the group. For a rotation (the same on $q$ and
$p$) the shift is kept to the coordinates the rotation fixes; then each iteration
$(x, y) \mapsto (y + \eta, -x + \nabla V(y))$ changes the angular momentum
$L = x_i y_j - x_j y_i$ by $y_i \partial_j V - y_j \partial_i V = 0$. For a
translation the sums $X, Y$ of the translated coordinates of $x$ and $y$ go
$(X, Y) \mapsto (Y + \textstyle\sum\eta, -X)$ (the gradient of an invariant $V$ sums to
zero), a quarter turn with a shift whose fourth power is the identity: the layer (four
iterations) conserves the total momentum $Y$ with any shift. Noether's theorem for
maps: Arnold, *Mathematical Methods of Classical Mechanics*, §20.
"""

from __future__ import annotations

from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp

from .._activations import resolve_activation
from .._typing import Array, Float, PRNGKeyArray
from .._nn import check_point, potential_parameters, scale_by_step
from .._validation import check_even, check_int, float_dtype, step_size
from ..symmetries import AbstractSymmetry, resolve_symmetry
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
    - `activation`: $\sigma$, a differentiable callable or a name (default `jnp.tanh`).
    - `key`: a JAX PRNG key (keyword-only); `dtype`: the parameter dtype (`None`: JAX's
      default float).
    - `symmetry`: `None` (default) or a symmetry of `geomlearn.symmetries` (or its spec):
      $V$ of its invariant `features`, $\eta$ masked by its `shift_mask` (module docs).

    **Call:** `layer(z, h=None)` and `layer.inverse(z, h=None)` on one point `(dim,)`.

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
    symmetry: AbstractSymmetry | None = eqx.field(static=True)

    def __init__(
        self,
        dim: int,
        width: int,
        activation: Callable | str = jnp.tanh,
        *,
        key: PRNGKeyArray,
        dtype=None,
        symmetry: AbstractSymmetry | str | None = None,
    ):
        self.dim = check_even("dim", dim)
        self.width = check_int("width", width, minimum=1)
        resolve_activation(activation)
        self.activation = activation
        dtype = float_dtype(dtype)
        n = self.dim // 2
        self.symmetry = resolve_symmetry(symmetry, n)
        n_in = n if self.symmetry is None else self.symmetry.feature_count(n)
        self.K, self.a, self.b = potential_parameters(key, self.width, n_in, dtype)
        self.eta = jnp.zeros((n,), dtype)

    def potential(self, y: Float[Array, " n"]) -> Float[Array, ""]:
        r"""The scalar network $V(y) = a^\top \sigma(K y + b)$ (of the invariant features
        $f(y)$ in place of $y$ with a `symmetry`), in `y`'s dtype."""
        dtype = y.dtype
        sigma = resolve_activation(self.activation)
        x = y if self.symmetry is None else self.symmetry.features(y)
        pre = self.K.astype(dtype) @ x + self.b.astype(dtype)
        return jnp.dot(self.a.astype(dtype), sigma(pre))

    def shift(self, dtype=None) -> Float[Array, " n"]:
        r"""The shift $\eta$ the map applies: the parameter, with the coordinates the
        symmetry turns set to zero (`shift_mask`)."""
        eta = self.eta if dtype is None else self.eta.astype(dtype)
        if self.symmetry is None:
            return eta
        return eta * jnp.asarray(self.symmetry.shift_mask(self.dim // 2), eta.dtype)

    def _parts(self, z, h):
        check_point(type(self).__name__, z, self.dim)
        n = self.dim // 2
        h = step_size(h, z.dtype)
        return z[:n], z[n:], h, self.shift(z.dtype), jax.grad(self.potential)

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
