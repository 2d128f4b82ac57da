r"""Ridge layers: exact flows of Hamiltonians of one learned direction (P- and R-layers).

A **ridge Hamiltonian** depends on the state only through one learned direction
$w \in \mathbb{R}^{2n}$: $H(z) = f(w^\top z)$. Its vector field is
$\dot z = \mathbb{J}\nabla H(z) = f'(w^\top z)\,\mathbb{J} w$, and because
$w^\top \mathbb{J} w = 0$ ($\mathbb{J}$ is skew) the scalar $s = w^\top z$ is constant
along that field. The field is therefore constant along its own trajectories and the
**exact time-$h$ flow** is the affine update

$$\varphi_h(z) = z + h\,f'(w^\top z)\,\mathbb{J} w .$$

Its Jacobian $I + h\,f''(s)\,\mathbb{J} w w^\top$ is a symplectic transvection, so each
layer is **symplectic for every parameter value and every $h$**, and its inverse is the
flow backwards in time, $\varphi_h^{-1} = \varphi_{-h}$ (exact, no solve). These are the
layers of Tapley, *Symplectic neural networks based on dynamical systems* (2024), of
which the PyTorch package strupnet is the reference implementation:

| layer | $f'(s)$ | parameters ($\dim = 2n$) |
|---|---|---|
| [`PolynomialRidgeLayer`][geomlearn.layers.PolynomialRidgeLayer] (P-layer) | $\sum_{k=k_0}^{k_1} k\,a_k\,s^{k-1}$ | $2n + k_1 - k_0 + 1$ |
| [`NeuralRidgeLayer`][geomlearn.layers.NeuralRidgeLayer] (R-layer) | $\sum_{j=1}^{m} a_j\,\sigma(c_j s + b_j)$ | $2n + 3m$ |

Unlike the shears of `geomlearn.layers.sympnet`, the direction $w$ mixes $q$ and $p$, so
one layer is not restricted to changing one half of the state.

All layers act on **one point** `(dim,)` (use `jax.vmap` for batches); `h` is an
optional scalar step size (`None` means $h = 1$); a call returns the input's dtype.
"""

from __future__ import annotations

import abc
import math
from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._activations import resolve_activation
from .._typing import Array, Float, PRNGKeyArray
from .._nn import check_point, output_weights, scale_by_step
from .._validation import check_even, check_int, float_dtype, step_size
from ._symplectic import AbstractSymplecticLayer

__all__ = ["PolynomialRidgeLayer", "NeuralRidgeLayer"]


def _J_times(w: jax.Array) -> jax.Array:
    """$\\mathbb{J} w$ for $w = (w_q, w_p)$: $(w_p, -w_q)$ (no matrix built)."""
    n = w.shape[-1] // 2
    return jnp.concatenate([w[n:], -w[:n]])


class _AbstractRidgeLayer(AbstractSymplecticLayer):
    """`z ↦ z + h f'(wᵀz) J w`; subclasses define `_slope(s)` = f'(s) in `s`'s dtype."""

    w: eqx.AbstractVar[jax.Array]

    @abc.abstractmethod
    def _slope(self, s: jax.Array) -> jax.Array:
        """f'(s) in `s`'s dtype."""

    @abc.abstractmethod
    def _potential(self, s: jax.Array) -> jax.Array:
        """f(s) in `s`'s dtype (f(0) = 0)."""

    def _apply(self, z, h, sign: int):
        check_point(type(self).__name__, z, self.dim)
        w = self.w.astype(z.dtype)
        increment = scale_by_step(self._slope(jnp.dot(w, z)) * _J_times(w), step_size(h, z.dtype))
        return z + increment if sign > 0 else z - increment

    def __call__(self, z: Float[Array, " dim"], h=None) -> Float[Array, " dim"]:
        r"""The exact time-$h$ flow $z + h f'(w^\top z)\,\mathbb{J} w$ at one point `z`."""
        return self._apply(z, h, +1)

    def inverse(self, z: Float[Array, " dim"], h=None) -> Float[Array, " dim"]:
        r"""The exact inverse, the flow backwards: $z - h f'(w^\top z)\,\mathbb{J} w$
        ($w^\top z$ is the same before and after the layer)."""
        return self._apply(z, h, -1)

    def hamiltonian(self, z: Float[Array, " dim"]) -> Float[Array, ""]:
        """The ridge Hamiltonian $f(w^\\top z)$ whose exact flow the layer is (up to a
        constant); conserved by the layer: `hamiltonian(layer(z, h)) == hamiltonian(z)`."""
        check_point(type(self).__name__, z, self.dim)
        return self._potential(jnp.dot(self.w.astype(z.dtype), z))


class PolynomialRidgeLayer(_AbstractRidgeLayer):
    r"""P-layer: the exact flow of a polynomial ridge Hamiltonian $H(z) = f(w^\top z)$.

    $$z \mapsto z + h\,f'(w^\top z)\,\mathbb{J} w, \qquad
      f(s) = \sum_{k = k_0}^{k_1} a_k\, s^k,\quad k_0 = \texttt{min\_degree},\;
      k_1 = \texttt{max\_degree}.$$

    Exactly symplectic for every $w$, $a$ and $h$ (see the module documentation: $w^\top z$
    is conserved because $w^\top\mathbb{J}w = 0$); the inverse is the flow with $-h$.
    With `max_degree = min_degree = 2` the layer is the linear symplectic transvection
    $I + 2 h a\,\mathbb{J} w w^\top$; degree 1 adds a translation along $\mathbb{J}w$.
    Tapley, *Symplectic neural networks based on dynamical systems* (2024).

    **Parameters:** `w` of shape `(dim,)` and `a` of shape `(max_degree - min_degree + 1,)`
    (the coefficients $a_{k_0}, \dots, a_{k_1}$).

    **Arguments:**

    - `dim`: the phase-space dimension `2n` (even).
    - `max_degree`, `min_degree`: the degrees $1 \le k_0 \le k_1$ of $f$ (default 2, 2).
    - `key`: a JAX PRNG key (keyword-only); `dtype`: the parameter dtype.

    ```python
    layer = PolynomialRidgeLayer(4, max_degree=4, key=jax.random.PRNGKey(0))
    z = jnp.ones(4)
    layer.inverse(layer(z, 0.1), 0.1)   # == z
    ```
    """

    w: Float[Array, " dim"]
    a: Float[Array, " n_coefficients"]
    dim: int = eqx.field(static=True)
    max_degree: int = eqx.field(static=True)
    min_degree: int = eqx.field(static=True)

    def __init__(
        self,
        dim: int,
        *,
        max_degree: int = 2,
        min_degree: int = 2,
        key: PRNGKeyArray,
        dtype=None,
    ):
        self.dim = check_even("dim", dim)
        self.min_degree = check_int("min_degree", min_degree, minimum=1)
        self.max_degree = check_int("max_degree", max_degree, minimum=1)
        if self.max_degree < self.min_degree:
            raise ValueError(
                f"max_degree must be >= min_degree={self.min_degree}, got {self.max_degree}"
            )
        dtype = float_dtype(dtype)
        w_key, a_key = jax.random.split(key)
        self.w = jax.random.normal(w_key, (self.dim,), dtype) / math.sqrt(self.dim)
        n_coef = self.max_degree - self.min_degree + 1
        # Coefficients well below OUTPUT_INIT_SCALE: a near-identity start whose quadratic
        # and higher terms are small, so training does not start near a spurious minimum.
        self.a = 0.01 * jax.random.normal(a_key, (n_coef,), dtype)

    def _slope(self, s):
        # Horner's scheme for f'(s) = s^(k0-1) Σ_k k a_k s^(k-k0); the degrees are static.
        k0, k1 = self.min_degree, self.max_degree
        degrees = np.arange(k0, k1 + 1, dtype=np.float64)
        coef = self.a.astype(s.dtype) * jnp.asarray(degrees, s.dtype)
        acc = coef[-1]
        for i in range(k1 - k0 - 1, -1, -1):
            acc = acc * s + coef[i]
        return acc * jax.lax.integer_pow(s, k0 - 1)

    def _potential(self, s):
        k0, k1 = self.min_degree, self.max_degree
        a = self.a.astype(s.dtype)
        return sum(a[i] * jax.lax.integer_pow(s, k) for i, k in enumerate(range(k0, k1 + 1)))


class NeuralRidgeLayer(_AbstractRidgeLayer):
    r"""R-layer: the exact flow of a one-direction neural Hamiltonian $H(z) = f(w^\top z)$.

    $$z \mapsto z + h\,f'(w^\top z)\,\mathbb{J} w, \qquad
      f'(s) = \sum_{j=1}^{m} a_j\,\sigma(c_j s + b_j),\quad m = \texttt{width}.$$

    $f$ is a one-hidden-layer network of the *scalar* $s = w^\top z$ (all $m$ neurons
    share the direction $w$), so $H$ is still a ridge function and the update is still its
    exact flow: symplectic for every parameter value and every $h$, with the exact inverse
    $h \mapsto -h$. `width = 1` is Tapley's one-neuron ridge $f'(s) = a\,\sigma(s + b)$ (up
    to the scale $c$). Tapley, *Symplectic neural networks based on dynamical systems*
    (2024).

    **Parameters:** `w` `(dim,)`; `a`, `b`, `c` `(width,)` ($c$ starts at 1, $b$ at 0).

    **Arguments:**

    - `dim`: the phase-space dimension `2n` (even).
    - `width`: the number $m \ge 1$ of neurons (default 1).
    - `activation`: $\sigma$, a callable or a name (default `"tanh"`).
    - `key`: a JAX PRNG key (keyword-only); `dtype`: the parameter dtype.

    ```python
    layer = NeuralRidgeLayer(2, width=3, key=jax.random.PRNGKey(0))
    layer(jnp.array([1.0, 0.0]), 0.1)
    ```
    """

    w: Float[Array, " dim"]
    a: Float[Array, " width"]
    b: Float[Array, " width"]
    c: Float[Array, " width"]
    dim: int = eqx.field(static=True)
    width: int = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)

    def __init__(
        self,
        dim: int,
        *,
        width: int = 1,
        activation: Callable | str = "tanh",
        key: PRNGKeyArray,
        dtype=None,
    ):
        self.dim = check_even("dim", dim)
        self.width = check_int("width", width, minimum=1)
        resolve_activation(activation)
        self.activation = activation
        dtype = float_dtype(dtype)
        w_key, a_key = jax.random.split(key)
        self.w = jax.random.normal(w_key, (self.dim,), dtype) / math.sqrt(self.dim)
        self.a = output_weights(a_key, self.width, dtype)
        self.b = jnp.zeros((self.width,), dtype)
        self.c = jnp.ones((self.width,), dtype)

    def _slope(self, s):
        sigma = resolve_activation(self.activation)
        dtype = s.dtype
        pre = self.c.astype(dtype) * s + self.b.astype(dtype)
        return jnp.dot(self.a.astype(dtype), sigma(pre))

    def _potential(self, s):
        # f(s) = ∫_0^s f'(t) dt by 16-point Gauss–Legendre quadrature (σ has no closed-form
        # antiderivative in general); accurate for smooth σ and moderate |s|.
        nodes, weights = np.polynomial.legendre.leggauss(16)
        t = jnp.asarray(0.5 * (nodes + 1.0), s.dtype) * s
        slopes = jax.vmap(self._slope)(t)
        return 0.5 * s * jnp.dot(jnp.asarray(weights, s.dtype), slopes)
