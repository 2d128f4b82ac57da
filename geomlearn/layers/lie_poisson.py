r"""Lie–Poisson ridge layers: exact flows of one-direction Hamiltonians on so(3)*.

**The bracket.** The dual $\mathfrak{so}(3)^* \cong \mathbb{R}^3$ (the body angular
momentum $z$ of a rigid body) carries the Lie–Poisson bracket

$$\{F, G\}(z) = -z \cdot \big(\nabla F \times \nabla G\big)
  = \nabla F^\top B(z)\, \nabla G, \qquad B(z) = \hat z, \quad \hat z v = z \times v .$$

The field of $H$ is $\dot z = z \times \nabla H(z)$ (Euler's equations of the free rigid
body for $H = \tfrac12 \sum_i z_i^2 / I_i$, `geomlearn.systems.RigidBody`). The
**Casimir** $C(z) = |z|^2$ commutes with every function, so every Hamiltonian flow keeps
the spheres $|z| = r$, the symplectic leaves.

**Ridge Hamiltonians rotate.** For $H(z) = \varphi(n \cdot z)$, $|n| = 1$, the field
$\dot z = \varphi'(s)\, z \times n$ keeps $s = n \cdot z$, so it is a uniform rotation
about $n$; with $z = s\,n + z_\perp$ the **exact time-$h$ flow** is

$$\varphi_h(z) = s\, n + \cos\theta\; z_\perp + \sin\theta\; (z \times n),\qquad
  \theta = h\,\varphi'(n \cdot z),$$

the rotation about $-n$ by $\theta$ (here $n = v/|v|$ for a learned $v \ne 0$).

**Round-off.** A layer adds $\Delta = \frac{2}{1 + u\cdot u}(w - u\times w)$, $w = z\times u$,
$u = \tan(\theta/2)\, n$: $|z + \Delta| = |z|$ for every $u$, so rounding moves the axis and
angle, never the norm, and the Casimir wanders like $\varepsilon\sqrt N$ (Brouwer's law).

**Each layer is a Poisson map.** The flow of a Hamiltonian field is a Poisson map,
$D\varphi_h(z)\, B(z)\, D\varphi_h(z)^\top = B(\varphi_h(z))$ (Marsden & Ratiu,
*Introduction to Mechanics and Symmetry*, ch. 10), and the layer *is* that flow in
closed form for every direction, every $\varphi$ and every $h$: a Poisson map for every
parameter value. It keeps the Casimir ($|\varphi_h(z)|^2 = s^2 + |z_\perp|^2$) and,
$\mathfrak{so}(3)$ being unimodular, the volume ($\det D\varphi_h = 1$); its inverse is
$\varphi_{-h}$ ($s$ is unchanged).

Reference: Eldred, Gay-Balmaz, Huraka & Putkaradze, *Lie–Poisson Neural Networks
(LPNets)*, Neural Networks 173, 106162 (2024), arXiv:2308.15349.

Layers act on **one point** `(3,)` (use `jax.vmap` for batches); `h` is an optional
scalar step size (`None` means $h = 1$); a call returns the input's dtype.
"""

from __future__ import annotations

from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._activations import resolve_activation
from .._nn import check_point, output_weights
from .._typing import Array, Float, PRNGKeyArray
from .._validation import check_int, float_dtype, step_size

__all__ = ["LiePoissonRidgeLayer"]

#: The dimension of so(3)* (the only one these layers act on).
_DIM = 3


class LiePoissonRidgeLayer(eqx.Module):
    r"""The exact Lie–Poisson flow of a ridge Hamiltonian $H(z) = \varphi(n \cdot z)$ on
    $\mathfrak{so}(3)^* \cong \mathbb{R}^3$: a rotation about $n$ by an angle that depends
    on $n \cdot z$.

    $$z \mapsto s\, n + \cos\theta\,(z - s\,n) + \sin\theta\,(z \times n),\qquad
      s = n\cdot z,\quad \theta = h\,\varphi'(s),\quad n = \frac{v}{|v|},$$

    $$\varphi'(s) = \omega + \kappa\, s + \sum_{j=1}^{m} a_j\,\sigma(c_j s + b_j),
      \quad m = \texttt{width}.$$

    A Poisson map of the bracket $\{F, G\}(z) = -z\cdot(\nabla F \times \nabla G)$ for
    every parameter value and every $h$, because it is the exact time-$h$ flow of the
    Hamiltonian $\varphi(n \cdot z)$ (see the module documentation); it keeps $|z|$ and
    $n\cdot z$ and preserves volume. The affine part $\omega + \kappa s$ of $\varphi'$ is
    a uniform rotation plus the quadratic Hamiltonian $\tfrac{\kappa}{2}(n\cdot z)^2$ —
    with $n$ a coordinate axis, exactly one of the three integrable parts of the rigid
    body's energy $\sum_i z_i^2 / (2 I_i)$ — and the neurons add a nonlinear $\varphi$.
    Eldred, Gay-Balmaz, Huraka & Putkaradze, *Lie–Poisson Neural Networks (LPNets)*,
    Neural Networks 173 (2024).

    **Parameters:** `v` `(3,)` (the unnormalised direction; the map depends on $v/|v|$
    only, so a gradient of the loss is orthogonal to `v` and gradient steps never shrink
    it), `affine` `(2,)` $= (\omega, \kappa)$, and `a`, `b`, `c` `(width,)` ($c$ starts
    at 1, $b$ at 0).

    **Arguments:**

    - `width`: the number $m \ge 1$ of neurons of $\varphi'$ (default 2).
    - `activation`: $\sigma$, a callable or a name (default `"tanh"`).
    - `direction`: the initial direction `v` (three numbers, not all zero); `None`
      (default) draws one uniformly on the sphere.
    - `key`: a JAX PRNG key (keyword-only); `dtype`: the parameter dtype.

    ```python
    layer = LiePoissonRidgeLayer(width=2, key=jax.random.PRNGKey(0))
    z = jnp.array([0.3, -0.4, 1.2])
    jnp.linalg.norm(layer(z, 0.1))        # == jnp.linalg.norm(z)
    layer.inverse(layer(z, 0.1), 0.1)     # == z
    ```
    """

    v: Float[Array, " 3"]
    affine: Float[Array, " 2"]
    a: Float[Array, " width"]
    b: Float[Array, " width"]
    c: Float[Array, " width"]
    width: int = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)

    def __init__(
        self,
        *,
        width: int = 2,
        activation: Callable | str = "tanh",
        direction=None,
        key: PRNGKeyArray,
        dtype=None,
    ):
        self.width = check_int("width", width, minimum=1)
        resolve_activation(activation)
        self.activation = activation
        dtype = float_dtype(dtype)
        v_key, w_key, a_key = jax.random.split(key, 3)
        if direction is None:
            self.v = jax.random.normal(v_key, (_DIM,), dtype)
        else:
            v = np.asarray(direction, dtype=np.float64)
            if v.shape != (_DIM,) or not np.all(np.isfinite(v)) or not np.any(v):
                raise ValueError(
                    f"direction must be three finite numbers, not all zero, got {direction!r}"
                )
            self.v = jnp.asarray(v, dtype)
        # Near the identity: a small uniform rotation rate and small neurons.
        self.affine = 0.1 * jax.random.normal(w_key, (2,), dtype)
        self.a = output_weights(a_key, self.width, dtype)
        self.b = jnp.zeros((self.width,), dtype)
        self.c = jnp.ones((self.width,), dtype)

    def axis(self, dtype=None) -> Float[Array, " 3"]:
        """The unit axis $n = v / |v|$ (in `dtype`, default the parameters')."""
        v = self.v if dtype is None else self.v.astype(dtype)
        return v / jnp.linalg.norm(v)

    def slope(self, s: Float[Array, ""]) -> Float[Array, ""]:
        r"""$\varphi'(s)$, the angular velocity of the rotation, in `s`'s dtype."""
        dtype = s.dtype
        sigma = resolve_activation(self.activation)
        omega, kappa = self.affine.astype(dtype)
        neurons = sigma(self.c.astype(dtype) * s + self.b.astype(dtype))
        return omega + kappa * s + jnp.dot(self.a.astype(dtype), neurons)

    def _increment(self, z, h, sign: int):
        check_point(type(self).__name__, z, _DIM)
        n = self.axis(z.dtype)
        theta = self.slope(jnp.dot(n, z))
        h = step_size(h, z.dtype)
        theta = theta if h is None else h * theta
        theta = theta if sign > 0 else -theta
        # s n + cos θ (z - s n) + sin θ (z × n) - z through the Gibbs vector u = tan(θ/2) n:
        # |z + Δ| = |z| for every u, so no rounding of θ, tan or |n| biases the norm.
        u = jnp.tan(0.5 * theta) * n
        w = jnp.cross(z, u)
        return (2 / (1 + jnp.dot(u, u))) * (w - jnp.cross(u, w))

    def increment(
        self, z: Float[Array, " 3"], h=None, *, inverse: bool = False
    ) -> Float[Array, " 3"]:
        r"""The increment $\Delta$ of the layer at `z` `(3,)`: `layer(z, h)` is `z +
        layer.increment(z, h)` (and `layer.inverse(z, h)` is `z + layer.increment(z, h,
        inverse=True)`), with

        $$\Delta = \frac{2}{1 + u\cdot u}\,(w - u\times w),\qquad w = z\times u,\qquad
          u = \tan(\theta/2)\, n,$$

        small with $\theta$, so that a rollout can add it with compensated summation."""
        return self._increment(z, h, -1 if inverse else +1)

    def __call__(self, z: Float[Array, " 3"], h=None) -> Float[Array, " 3"]:
        r"""The exact time-$h$ flow of $\varphi(n\cdot z)$ at one point `z` `(3,)`."""
        return z + self._increment(z, h, +1)

    def inverse(self, z: Float[Array, " 3"], h=None) -> Float[Array, " 3"]:
        r"""The exact inverse, the flow backwards in time (the rotation by $-\theta$;
        $n\cdot z$ is the same before and after the layer)."""
        return z + self._increment(z, h, -1)

    def hamiltonian(self, z: Float[Array, " 3"]) -> Float[Array, ""]:
        r"""The Hamiltonian $\varphi(n\cdot z)$ whose exact flow the layer is
        ($\varphi(0) = 0$; the integral of $\varphi'$ by 16-point Gauss–Legendre
        quadrature, accurate for smooth $\sigma$ and moderate $|n\cdot z|$). Conserved by
        the layer, as is $|z|^2$."""
        check_point(type(self).__name__, z, _DIM)
        s = jnp.dot(self.axis(z.dtype), z)
        nodes, weights = np.polynomial.legendre.leggauss(16)
        t = jnp.asarray(0.5 * (nodes + 1.0), z.dtype) * s
        return 0.5 * s * jnp.dot(jnp.asarray(weights, z.dtype), jax.vmap(self.slope)(t))
