r"""Volume-preserving layers: triangular shears and Cayley attention.

The layers here are the building blocks of the volume-preserving feed-forward network
and the volume-preserving transformer of Brantner, de Romemont, Kraus and Li,
*Volume-Preserving Transformers for Learning Time Series Data with Structure*,
ESAIM: Proceedings and Surveys 81 (2025), [arXiv:2312.11166](https://arxiv.org/abs/2312.11166).
Every layer preserves phase-space volume **for every value of its parameters**; the
dimension `dim` may be odd (the rigid body has `dim = 3`).

- [`VolumePreservingLowerLayer`][geomlearn.VolumePreservingLowerLayer] /
  [`VolumePreservingUpperLayer`][geomlearn.VolumePreservingUpperLayer]:
  $x \mapsto x + \sigma(Lx + b)$ with $L$ strictly lower (upper) triangular. The
  Jacobian $I + \operatorname{diag}(\sigma')\,L$ is unit-triangular, so its determinant
  is exactly $1$. They act on a point `(dim,)` or on each row of a window `(T, dim)`.
- [`VolumePreservingAttention`][geomlearn.VolumePreservingAttention]: a window map
  $Z \mapsto \Lambda(Z)^\top Z$ with the orthogonal $T \times T$ matrix
  $\Lambda(Z) = \operatorname{Cayley}(Z A Z^\top)$ that mixes time steps (defined,
  with its weighting objects, in `geomlearn.layers._vp_attention`; re-exported here).

A sequence of shears rearranged for fast repeated evaluation (the inference form of the
feed-forward network) is built by `geomlearn.layers._fused_shears.fuse_shears`.

Conventions: a window $Z \in \mathbb{R}^{T \times d}$ has row $t$ the state at time $t$
(the paper stores states as columns, so its $Z \mapsto Z\Lambda$ is our
$Z \mapsto \Lambda^\top Z$). A call returns the input's dtype: parameters are cast to it.
"""

from __future__ import annotations

import math
from typing import Callable, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._activations import resolve_activation
from .._typing import Array, Float, PRNGKeyArray
from .._validation import check_floating, check_int, check_last_dim, float_dtype
from .._validation import step_size as step_size, check_bool as _check_bool
from ._linalg import small_matmul, triangular_matrix, uniform
from ._vp_attention import VolumePreservingAttention

__all__ = [
    "VolumePreservingLowerLayer",
    "VolumePreservingUpperLayer",
    "VolumePreservingAttention",
]

# The inverse of a triangular layer is a substitution with `dim` sequential steps: a
# Python loop (unrolled at trace time) up to this size, `lax.fori_loop` above it.
_UNROLL_SUBSTITUTION_MAX = 16


# ---------------------------------------------------------------------------------------
# Triangular shears


class _AbstractTriangularLayer(eqx.Module):
    r"""$x \mapsto x + h\,\sigma(Wx + b)$ with $W$ strictly triangular (see the subclasses)."""

    weight: Float[Array, " m"]
    bias: Float[Array, " dim"] | None
    dim: int = eqx.field(static=True)
    activation: Callable | str | None = eqx.field(static=True)
    use_bias: bool = eqx.field(static=True)

    is_lower: ClassVar[bool]

    def __init__(
        self,
        dim: int,
        activation: Callable | str | None = None,
        *,
        use_bias: bool = True,
        key: PRNGKeyArray,
        dtype=None,
    ):
        self.dim = check_int("dim", dim, minimum=1)
        if activation is not None:
            resolve_activation(activation)  # validate now, store the original argument
        self.activation = activation
        self.use_bias = _check_bool("use_bias", use_bias)
        dtype = float_dtype(dtype)
        bound = 1.0 / math.sqrt(self.dim)  # as eqx.nn.Linear: U(-1/sqrt(fan_in), ...)
        w_key, b_key = jax.random.split(key)
        m = self.dim * (self.dim - 1) // 2
        self.weight = uniform(w_key, (m,), dtype, bound)
        self.bias = uniform(b_key, (self.dim,), dtype, bound) if self.use_bias else None

    @property
    def n_params(self) -> int:
        """The number of scalar parameters, $d(d-1)/2$ (plus $d$ with a bias)."""
        return self.dim * (self.dim - 1) // 2 + (self.dim if self.use_bias else 0)

    def matrix(self) -> Float[Array, "dim dim"]:
        """The strictly triangular matrix $W$ (exact zeros on and beyond the diagonal)."""
        return triangular_matrix(self.weight, self.dim, self.is_lower)

    def _check(self, x) -> None:
        check_floating(f"{type(self).__name__} input", x)
        check_last_dim(type(self).__name__, x, self.dim, ndim=(1, 2))

    def activation_fn(self) -> Callable:
        return (lambda v: v) if self.activation is None else resolve_activation(self.activation)

    def bias_term(self, dtype, ndim: int):
        if self.bias is None:
            return None
        # Explicit leading axes for a window (no implicit rank promotion).
        return self.bias.astype(dtype).reshape((1,) * (ndim - 1) + (self.dim,))

    def __call__(self, x: Float[Array, "*T dim"], h=None) -> Float[Array, "*T dim"]:
        r"""Apply $x \mapsto x + h\,\sigma(Wx + b)$ to a point `(dim,)` or to every row of
        a window `(T, dim)`. `h` (a scalar, `None` meaning 1) scales the increment; the
        Jacobian stays unit-triangular for every `h`."""
        self._check(x)
        dtype = x.dtype
        h = step_size(h, dtype)
        Wt = triangular_matrix(self.weight.astype(dtype), self.dim, self.is_lower, transpose=True)
        pre = small_matmul(x, Wt)
        b = self.bias_term(dtype, x.ndim)
        if b is not None:
            pre = pre + b
        increment = self.activation_fn()(pre)
        if h is not None:
            increment = h * increment
        return x + increment

    def affine_map(self, dtype, h) -> tuple[Array, Array]:
        """For a linear layer (`activation=None`): `(Mt, c)` with `layer(x, h) = x @ Mt + c`,
        i.e. `Mt = I + h W^T` and `c = h b` (zeros without a bias). Lets a model compose a
        run of linear layers into one affine map; a unit-triangular `Mt` keeps det 1."""
        if self.activation is not None:
            raise ValueError("_affine is defined for linear layers (activation=None) only")
        h = step_size(h, dtype)
        Wt = triangular_matrix(self.weight.astype(dtype), self.dim, self.is_lower, transpose=True)
        c = jnp.zeros((self.dim,), dtype) if self.bias is None else self.bias.astype(dtype)
        if h is not None:
            Wt, c = h * Wt, h * c
        return jnp.asarray(np.eye(self.dim), dtype=dtype) + Wt, c

    def inverse(self, y: Float[Array, "*T dim"], h=None) -> Float[Array, "*T dim"]:
        r"""The exact inverse by substitution.

        Component $i$ of the increment depends only on the components before $i$ (lower
        layer) or after $i$ (upper layer). Taking them in that order, each is already
        recovered when $x_i = y_i - h\,\sigma\big((Wx)_i + b_i\big)$ is computed (forward
        substitution for the lower layer, backward for the upper one). Accepts a point
        or a window, like the call.
        """
        self._check(y)
        dtype = y.dtype
        h = step_size(h, dtype)
        W = self.matrix().astype(dtype)
        b = None if self.bias is None else self.bias.astype(dtype)
        sigma = self.activation_fn()
        d = self.dim
        order = range(d) if self.is_lower else range(d - 1, -1, -1)

        if d <= _UNROLL_SUBSTITUTION_MAX:
            # A few static steps on the components (elementwise only: cheap to compile
            # and to run). Component i reads only the components recovered before it.
            x = [None] * d
            for i in order:
                pre = jnp.zeros(y.shape[:-1], dtype)
                for j in range(d):
                    if x[j] is not None:
                        pre = pre + W[i, j] * x[j]
                if b is not None:
                    pre = pre + b[i]
                increment = sigma(pre)
                x[i] = y[..., i] - (increment if h is None else h * increment)
            return jnp.stack(x, axis=-1)

        def body(k, x):
            i = k if self.is_lower else d - 1 - k
            # W[i, j] = 0 wherever x_j is not yet recovered, so those entries (still
            # holding y) do not contribute.
            row = lax.dynamic_index_in_dim(W, i, axis=0, keepdims=False)
            pre = small_matmul(x, row)
            if b is not None:
                pre = pre + lax.dynamic_index_in_dim(b, i, keepdims=False)
            increment = sigma(pre)
            if h is not None:
                increment = h * increment
            y_i = lax.dynamic_index_in_dim(y, i, axis=-1, keepdims=False)
            return x.at[..., i].set(y_i - increment)

        return lax.fori_loop(0, d, body, y)


class VolumePreservingLowerLayer(_AbstractTriangularLayer):
    r"""The lower volume-preserving shear $x \mapsto x + \sigma(Lx + b)$.

    $L \in \mathbb{R}^{d\times d}$ is **strictly lower triangular** ($L_{ij} = 0$ for
    $j \ge i$), so component $x_i$ is updated by a function of $x_1, \dots, x_{i-1}$
    only. The Jacobian,
    $$\frac{\partial}{\partial x}\big(x + \sigma(Lx + b)\big)
      = I + \operatorname{diag}\!\big(\sigma'(Lx + b)\big)\, L,$$
    is unit lower triangular, so $\det = 1$: the layer preserves volume for every
    parameter value, every activation and every step size $h$ (which scales the
    increment, $x \mapsto x + h\,\sigma(Lx + b)$). With `activation=None` the layer is
    linear, $x \mapsto x + Lx + b$.

    Brantner, de Romemont, Kraus, Li, *Volume-Preserving Transformers for Learning Time
    Series Data with Structure*, ESAIM: Proc. & Surveys 81 (2025), arXiv:2312.11166
    (modelled on the LA-SympNet modules of Jin et al., 2020).

    **Arguments:**

    - `dim`: the state dimension $d \ge 1$ (odd allowed).
    - `activation`: `None` (linear layer) or the nonlinearity $\sigma$, a callable or a
      name such as `"tanh"`.
    - `use_bias`: whether the layer has the bias $b$ (default `True`).
    - `key`: a JAX PRNG key; `dtype`: the parameter dtype (`None`: JAX's default float).

    **Parameters:** `weight`, the $d(d-1)/2$ free entries of $L$ (row by row), and
    `bias` ($d$ entries, or `None`). Both are initialised $U(-1/\sqrt d, 1/\sqrt d)$.
    `matrix()` returns $L$.

    **Call:** `layer(x, h=None)` with `x` a point `(dim,)` or a window `(T, dim)` (each
    row is mapped); returns an array of the same shape and dtype.
    `layer.inverse(y, h=None)` inverts it exactly (forward substitution).

    ```python
    layer = VolumePreservingLowerLayer(3, "tanh", key=jax.random.PRNGKey(0))
    y = layer(jnp.ones(3))
    layer.inverse(y)   # ≈ (1, 1, 1)
    ```
    """

    is_lower: ClassVar[bool] = True


class VolumePreservingUpperLayer(_AbstractTriangularLayer):
    r"""The upper volume-preserving shear $x \mapsto x + \sigma(Ux + b)$.

    $U \in \mathbb{R}^{d\times d}$ is **strictly upper triangular** ($U_{ij} = 0$ for
    $j \le i$), so component $x_i$ is updated by a function of $x_{i+1}, \dots, x_d$
    only. The Jacobian $I + \operatorname{diag}(\sigma'(Ux + b))\,U$ is unit upper
    triangular, so $\det = 1$ for every parameter value and every step size $h$.
    With `activation=None` the layer is linear, $x \mapsto x + Ux + b$.

    Alternating lower and upper layers lets every component influence every other one.

    Brantner, de Romemont, Kraus, Li, *Volume-Preserving Transformers for Learning Time
    Series Data with Structure*, ESAIM: Proc. & Surveys 81 (2025), arXiv:2312.11166.

    **Arguments:** as for
    [`VolumePreservingLowerLayer`][geomlearn.VolumePreservingLowerLayer]; `weight`
    holds the $d(d-1)/2$ free entries of $U$ row by row.

    **Call:** `layer(x, h=None)` on a point `(dim,)` or each row of a window `(T, dim)`;
    `layer.inverse(y, h=None)` inverts it exactly (backward substitution).

    ```python
    layer = VolumePreservingUpperLayer(3, key=jax.random.PRNGKey(0))  # linear
    layer(jnp.ones((5, 3))).shape   # (5, 3)
    ```
    """

    is_lower: ClassVar[bool] = False
