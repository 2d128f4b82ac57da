r"""SympNet layers: symplectic shears of phase space (Jin et al., 2020).

Every layer here is a **shear**: it changes one half of $z = (q, p)$ by a function of
the other half,

$$\text{Q-layer: } (q, p) \mapsto \big(q + h\,\nabla T(p),\; p\big), \qquad
  \text{P-layer: } (q, p) \mapsto \big(q,\; p + h\,\nabla V(q)\big),$$

with the increment the gradient of a scalar function. The Jacobian of a Q-layer is
$\begin{pmatrix} I & h\,\nabla^2 T \\ 0 & I \end{pmatrix}$ and $\nabla^2 T$ is symmetric,
so the layer is **symplectic for every parameter value and every step size $h$**, and
its inverse is the same shear with $-h$. Compositions of such layers are the SympNets
of Jin, Zhang, Zhu, Tang and Karniadakis, *SympNets: Intrinsic structure-preserving
symplectic networks for identifying Hamiltonian systems*, Neural Networks 132 (2020).

The three families differ in the scalar function:

| layer | update of the changed half | parameters ($\dim = 2n$) |
|---|---|---|
| `GradientLayerQ/P` | $K^\top(a \odot \sigma(K x + b))$ | $w\,(n + 2)$ |
| `ActivationLayerQ/P` | $a \odot \sigma(x)$ | $n$ |
| `LinearLayerQ/P` | $S x$, $S = S^\top$ | $n(n+1)/2$ |

($x$ is the unchanged half.) The **step size** `h` (Jin et al.'s *extended* SympNets
for irregularly sampled data) multiplies the increment: `h=None` means no scaling
(i.e. $h = 1$), and $h \to 0$ gives the identity. `h` is a scalar (a Python number or a
0-d array; under `jax.vmap` one per sample).

All layers act on **one point** of shape `(dim,)`; use `jax.vmap` for batches or for
the rows of a window. A call returns the input's dtype: the parameters are cast to it.
"""

from __future__ import annotations

import abc
import math
from typing import Callable, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._activations import resolve_activation
from .._typing import Array, Float, PRNGKeyArray
from .._nn import OUTPUT_INIT_SCALE, check_point, potential_parameters, scale_by_step
from .._validation import check_even, check_int, float_dtype, step_size
from ..symmetries import AbstractSymmetry, invariant_gradient, resolve_symmetry
from ._symplectic import AbstractSymplecticLayer

__all__ = [
    "AbstractShear",
    "GradientLayerQ",
    "GradientLayerP",
    "ActivationLayerQ",
    "ActivationLayerP",
    "LinearLayerQ",
    "LinearLayerP",
]


def _symmetric_index(n: int) -> np.ndarray:
    """`(n, n)` integer table: entry (i, j) is the position of (min(i,j), max(i,j)) in the
    row-major upper triangle, i.e. in `np.triu_indices(n)` order."""
    index = np.zeros((n, n), dtype=np.int32)
    rows, cols = np.triu_indices(n)
    index[rows, cols] = np.arange(rows.size)
    index[cols, rows] = np.arange(rows.size)
    return index


class AbstractShear(AbstractSymplecticLayer):
    """A Q- or P-shear `(q, p) -> (q + h f(p), p)` or `(q, p + h f(q))`.

    Subclasses define `_increment(x)` (the gradient of a scalar function of the unchanged
    half `x`, computed in `x`'s dtype) and the class variable `_changes_q`.
    """

    _changes_q: eqx.AbstractClassVar[bool]

    @abc.abstractmethod
    def _increment(self, x: jax.Array) -> jax.Array:
        raise NotImplementedError

    def _apply(self, z, h, sign: int):
        check_point(type(self).__name__, z, self.dim)
        n = self.dim // 2
        h = step_size(h, z.dtype)
        q, p = z[:n], z[n:]
        if self._changes_q:
            dq = scale_by_step(self._increment(p), h)
            return jnp.concatenate([q + dq if sign > 0 else q - dq, p])
        dp = scale_by_step(self._increment(q), h)
        return jnp.concatenate([q, p + dp if sign > 0 else p - dp])

    def __call__(self, z: Float[Array, " dim"], h=None) -> Float[Array, " dim"]:
        """Apply the shear to one point `z` of shape `(dim,)`; `h` scales the increment."""
        return self._apply(z, h, +1)

    def inverse(self, z: Float[Array, " dim"], h=None) -> Float[Array, " dim"]:
        """The exact inverse: the same shear with the increment subtracted."""
        return self._apply(z, h, -1)


# ---------------------------------------------------------------------------------------
# Gradient layers


class _AbstractGradientLayer(AbstractShear):
    K: Float[Array, "width n"]
    a: Float[Array, " width"]
    b: Float[Array, " width"]
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
        resolve_activation(activation)  # validate now, store the original argument
        self.activation = activation
        n = self.dim // 2
        self.symmetry = resolve_symmetry(symmetry, n)
        n_in = n if self.symmetry is None else self.symmetry.feature_count(n, momentum=self._changes_q)
        self.K, self.a, self.b = potential_parameters(key, self.width, n_in, float_dtype(dtype))

    def _ridge(self, x):
        dtype = x.dtype
        sigma = resolve_activation(self.activation)
        K = self.K.astype(dtype)
        pre = K @ x + self.b.astype(dtype)
        return K.T @ (self.a.astype(dtype) * sigma(pre))

    def _increment(self, x):
        if self.symmetry is None:
            return self._ridge(x)
        features = self.symmetry.momentum_features if self._changes_q else self.symmetry.features
        return invariant_gradient(features, x, self._ridge)


class GradientLayerQ(_AbstractGradientLayer):
    r"""Gradient Q-layer: $q \leftarrow q + h\,K^\top\big(a \odot \sigma(K p + b)\big)$.

    ($p$ is unchanged.)

    The increment is the gradient of $T(p) = \sum_i a_i\,\Sigma\big((Kp + b)_i\big)$ with
    $\Sigma' = \sigma$, so the Jacobian block $h\,K^\top \operatorname{diag}(a \odot
    \sigma'(Kp + b))\,K$ is symmetric and the layer is **symplectic for every parameter
    value and every `h`**. It is the "gradient module" ("up" mode) of Jin et al.,
    *SympNets*, Neural Networks 132 (2020). GeometricMachineLearning.jl calls
    `2·width` the *upscaling dimension* of this layer.

    **Parameters** (`dim = 2n`, `width = w`): $K \in \mathbb{R}^{w \times n}$,
    $a, b \in \mathbb{R}^{w}$ — in total $w\,(n + 2)$.

    **Initialisation:** $K$ Glorot normal (std $\sqrt{2/(n + w)}$), $a \sim
    \mathcal{N}(0, 0.1^2/w)$, $b = 0$: a small perturbation of the identity.

    **Arguments:**

    - `dim`: the phase-space dimension `2n` (even, ≥ 2; odd raises `ValueError`).
    - `width`: the number of hidden units `w ≥ 1`.
    - `activation`: a callable or a name (`"tanh"`, `"sigmoid"`, …); default `jnp.tanh`.
    - `key`: a JAX PRNG key (keyword-only).
    - `dtype`: the parameter dtype; `None` means JAX's default float.
    - `symmetry`: `None` (default) or a symmetry of `geomlearn.symmetries` (or its spec):
      then $T(p) = \sum_i a_i \Sigma\big((K f(p) + b)_i\big)$ of the symmetry's
      invariant `momentum_features` $f$ (`features` of $q$ for a P-layer), the increment
      $Df^\top K^\top(a \odot \sigma(Kf + b))$, and the layer conserves the momentum
      map for every parameter value; $K$ has one column per feature.

    **Call:** `layer(z, h=None)` with `z` of shape `(dim,)` and `h` an optional scalar step
    (the increment is multiplied by `h`). Returns an array of `z`'s shape and dtype.
    `layer.inverse(z, h=None)` is the exact inverse.

    ```python
    layer = GradientLayerQ(4, 8, key=jax.random.PRNGKey(0))
    z = jnp.ones(4)
    layer.inverse(layer(z, 0.1), 0.1)   # == z
    ```
    """

    _changes_q: ClassVar[bool] = True


class GradientLayerP(_AbstractGradientLayer):
    r"""Gradient P-layer: $p \leftarrow p + h\,K^\top\big(a \odot \sigma(K q + b)\big)$.

    ($q$ is unchanged.)

    The mirror image of [`GradientLayerQ`][geomlearn.layers.GradientLayerQ] (Jin et al.'s
    "low" gradient module): the increment is the gradient of a scalar function of $q$,
    so the layer is symplectic for every parameter value and every `h`.
    GeometricMachineLearning.jl calls `2·width` its *upscaling dimension*.

    **Parameters** (`dim = 2n`, `width = w`): $K \in \mathbb{R}^{w \times n}$,
    $a, b \in \mathbb{R}^{w}$ — in total $w\,(n + 2)$. Initialised as for `GradientLayerQ`.

    **Arguments:** as for [`GradientLayerQ`][geomlearn.layers.GradientLayerQ].

    **Call:** `layer(z, h=None)` and `layer.inverse(z, h=None)` on `z` of shape `(dim,)`.

    ```python
    layer = GradientLayerP(2, 16, "sigmoid", key=jax.random.PRNGKey(0))
    layer(jnp.array([0.5, 0.0]))
    ```
    """

    _changes_q: ClassVar[bool] = False


# ---------------------------------------------------------------------------------------
# Activation layers


class _AbstractActivationLayer(AbstractShear):
    a: Float[Array, " n"]
    dim: int = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)

    def __init__(
        self,
        dim: int,
        activation: Callable | str = jnp.tanh,
        *,
        key: PRNGKeyArray,
        dtype=None,
    ):
        self.dim = check_even("dim", dim)
        resolve_activation(activation)
        self.activation = activation
        self.a = OUTPUT_INIT_SCALE * jax.random.normal(key, (self.dim // 2,), float_dtype(dtype))

    def _increment(self, x):
        sigma = resolve_activation(self.activation)
        return self.a.astype(x.dtype) * sigma(x)


class ActivationLayerQ(_AbstractActivationLayer):
    r"""Activation Q-layer: $q \leftarrow q + h\,a \odot \sigma(p)$, $p$ unchanged.

    The increment is the gradient of $\sum_i a_i \Sigma(p_i)$ ($\Sigma' = \sigma$); its
    Jacobian $h \operatorname{diag}(a \odot \sigma'(p))$ is diagonal, hence symmetric, so
    the layer is symplectic for every parameter value and every `h`. It is the
    "activation module" ("up" mode) of Jin et al., *SympNets*, Neural Networks 132 (2020).

    **Parameters** (`dim = 2n`): $a \in \mathbb{R}^n$ — in total $n$.
    Initialised $a \sim \mathcal{N}(0, 0.1^2)$.

    **Arguments:**

    - `dim`: the phase-space dimension `2n` (even; odd raises `ValueError`).
    - `activation`: a callable or a name; default `jnp.tanh`.
    - `key`: a JAX PRNG key (keyword-only).
    - `dtype`: the parameter dtype; `None` means JAX's default float.

    **Call:** `layer(z, h=None)` and `layer.inverse(z, h=None)` on `z` of shape `(dim,)`.

    ```python
    layer = ActivationLayerQ(2, key=jax.random.PRNGKey(0))
    layer(jnp.array([0.0, 1.0]))
    ```
    """

    _changes_q: ClassVar[bool] = True


class ActivationLayerP(_AbstractActivationLayer):
    r"""Activation P-layer: $p \leftarrow p + h\,a \odot \sigma(q)$, $q$ unchanged.

    The mirror image of [`ActivationLayerQ`][geomlearn.layers.ActivationLayerQ] (Jin et al.'s
    "low" activation module); symplectic for every parameter value and every `h`.

    **Parameters** (`dim = 2n`): $a \in \mathbb{R}^n$ — in total $n$.

    **Arguments:** as for [`ActivationLayerQ`][geomlearn.layers.ActivationLayerQ].

    ```python
    layer = ActivationLayerP(2, "sin", key=jax.random.PRNGKey(0))
    layer.inverse(layer(jnp.array([1.0, 0.0])))
    ```
    """

    _changes_q: ClassVar[bool] = False


# ---------------------------------------------------------------------------------------
# Linear layers


class _AbstractLinearLayer(AbstractShear):
    S: Float[Array, " m"]
    dim: int = eqx.field(static=True)

    def __init__(self, dim: int, *, key: PRNGKeyArray, dtype=None):
        self.dim = check_even("dim", dim)
        n = self.dim // 2
        std = OUTPUT_INIT_SCALE / math.sqrt(n)
        self.S = std * jax.random.normal(key, (n * (n + 1) // 2,), float_dtype(dtype))

    def symmetric_matrix(self, dtype=None) -> Float[Array, "n n"]:
        """The symmetric matrix $S$ built from the upper-triangle parameter vector."""
        S = self.S[_symmetric_index(self.dim // 2)]  # a gather: exactly symmetric
        return S if dtype is None else S.astype(dtype)

    def _increment(self, x):
        return self.symmetric_matrix(x.dtype) @ x


class LinearLayerQ(_AbstractLinearLayer):
    r"""Linear Q-layer: $q \leftarrow q + h\,S p$ with $S = S^\top$, $p$ unchanged.

    The Jacobian $\begin{pmatrix} I & hS \\ 0 & I \end{pmatrix}$ is symplectic because $S$
    is symmetric. $S$ is **built in every call** from an unconstrained vector of its
    $n(n+1)/2$ upper-triangle entries (row-major, `np.triu_indices` order), so it is
    exactly symmetric for every parameter value and gradients reach every entry.
    A linear sublayer ("up" mode) of Jin et al., *SympNets*, Neural Networks 132 (2020).

    **Parameters** (`dim = 2n`): the field `S` of shape $(n(n+1)/2,)$ — in total
    $n(n+1)/2$. Initialised $\mathcal{N}(0, 0.1^2/n)$. The matrix itself is
    `layer.symmetric_matrix()`.

    **Arguments:**

    - `dim`: the phase-space dimension `2n` (even; odd raises `ValueError`).
    - `key`: a JAX PRNG key (keyword-only).
    - `dtype`: the parameter dtype; `None` means JAX's default float.

    **Call:** `layer(z, h=None)` and `layer.inverse(z, h=None)` on `z` of shape `(dim,)`.

    ```python
    layer = LinearLayerQ(4, key=jax.random.PRNGKey(0))
    S = layer.symmetric_matrix()   # (2, 2), S == S.T
    ```
    """

    _changes_q: ClassVar[bool] = True


class LinearLayerP(_AbstractLinearLayer):
    r"""Linear P-layer: $p \leftarrow p + h\,S q$ with $S = S^\top$, $q$ unchanged.

    The mirror image of [`LinearLayerQ`][geomlearn.layers.LinearLayerQ] (Jin et al.'s "low"
    linear sublayer); $n(n+1)/2$ parameters.

    **Arguments:** as for [`LinearLayerQ`][geomlearn.layers.LinearLayerQ].

    ```python
    layer = LinearLayerP(2, key=jax.random.PRNGKey(0))
    layer(jnp.array([1.0, 0.0]))   # (1, S·1)
    ```
    """

    _changes_q: ClassVar[bool] = False
