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
  $\Lambda(Z) = \operatorname{Cayley}(Z A Z^\top)$ that mixes time steps.

Conventions: a window $Z \in \mathbb{R}^{T \times d}$ has row $t$ the state at time $t$
(the paper stores states as columns, so its $Z \mapsto Z\Lambda$ is our
$Z \mapsto \Lambda^\top Z$). A call returns the input's dtype: parameters are cast to it.
"""

from __future__ import annotations

import math
from typing import Callable, ClassVar, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._activations import resolve_activation
from .._typing import Array, Float, PRNGKeyArray
from .._validation import check_floating, check_int, check_last_dim, float_dtype
from .._validation import step_size as step_size, check_bool as _check_bool

__all__ = [
    "VolumePreservingLowerLayer",
    "VolumePreservingUpperLayer",
    "VolumePreservingAttention",
]

# The Cayley transform uses its closed form (no linear solve) for windows up to this
# length, and `jnp.linalg.solve` above it. See `_cayley`.
_CAYLEY_CLOSED_FORM_MAX_T = 3

_HIGHEST = lax.Precision.HIGHEST

# The inverse of a triangular layer is a substitution with `dim` sequential steps: a
# Python loop (unrolled at trace time) up to this size, `lax.fori_loop` above it.
_UNROLL_SUBSTITUTION_MAX = 16


# Contractions up to this size are written out as sums of outer products (elementwise
# multiply-adds that XLA fuses with the surrounding activation and residual add) instead
# of `dot` calls: in long rollouts of small networks (d, T of a few units) the cost is
# the number of kernels per step, not arithmetic.
_UNROLL_MAX = 4


def small_matmul(a, b):
    """`a @ b` for 1-d or 2-d operands, in full precision.

    Small contractions are unrolled (see `_UNROLL_MAX`); larger ones use `jnp.matmul`
    with `Precision.HIGHEST` (on accelerators the default float32 matmul may use
    reduced-precision passes, which would show up in the structure residuals).
    """
    K = a.shape[-1]
    if K > _UNROLL_MAX or K == 0:
        return jnp.matmul(a, b, precision=_HIGHEST)
    a2 = a.reshape((1, K)) if a.ndim == 1 else a
    b2 = b.reshape((K, 1)) if b.ndim == 1 else b
    out = a2[:, 0:1] * b2[0:1, :]
    for k in range(1, K):
        out = out + a2[:, k : k + 1] * b2[k : k + 1, :]
    if a.ndim == 1 and b.ndim == 1:
        return out.reshape(())
    if a.ndim == 1:
        return out.reshape(out.shape[1:])
    if b.ndim == 1:
        return out.reshape(out.shape[:1])
    return out


def _uniform(key, shape, dtype, bound: float) -> Array:
    """U(-bound, bound) in `dtype` (the bound is a float64 constant cast once)."""
    lim = jnp.asarray(np.float64(bound), dtype=dtype)
    return jax.random.uniform(key, shape, dtype, minval=-lim, maxval=lim)


def _triangle_index(dim: int, lower: bool) -> np.ndarray:
    """`(dim, dim)` integer table mapping entry `(i, j)` of the strictly lower (upper)
    triangle to its position in the parameter vector (row-major order), and every other
    entry to the extra slot `m = dim (dim - 1) / 2`, which holds a zero."""
    m = dim * (dim - 1) // 2
    rows, cols = np.tril_indices(dim, k=-1) if lower else np.triu_indices(dim, k=1)
    index = np.full((dim, dim), m, dtype=np.int32)
    index[rows, cols] = np.arange(m, dtype=np.int32)
    return index


def triangular_matrix(weight: Array, dim: int, lower: bool, *, transpose: bool = False) -> Array:
    """The strictly lower (upper) triangular matrix whose free entries are `weight`, or
    its transpose (gathered directly, so no transpose is left inside a loop body)."""
    padded = jnp.concatenate([weight, jnp.zeros((1,), dtype=weight.dtype)])
    index = _triangle_index(dim, lower)
    return padded[index.T if transpose else index]


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
        self.weight = _uniform(w_key, (m,), dtype, bound)
        self.bias = _uniform(b_key, (self.dim,), dtype, bound) if self.use_bias else None

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


# ---------------------------------------------------------------------------------------
# The Cayley transform


def _cayley_closed_form(C: Array, Z: Array, transpose: bool) -> Array:
    r"""$\Lambda^\top Z$ (`transpose=True`) or $\Lambda Z$ for $\Lambda = (I - C)(I + C)^{-1}$,
    $C$ skew of size $T \le 3$, without a linear solve.

    A real skew matrix of size $T \le 3$ has eigenvalues $0$ and $\pm i\lambda$ with
    $\lambda^2 = p = \tfrac12\|C\|_F^2$, so $C^3 = -pC$, and multiplying out shows
    $(I + C)\big(I + (C^2 - C)/(1 + p)\big) = I$. Hence
    $$\Lambda = 2(I + C)^{-1} - I = I + \frac{2\,(C^2 - C)}{1 + p}, \qquad
      \Lambda^\top = I + \frac{2\,(C^2 + C)}{1 + p}.$$
    Both fractions stay bounded ($\|C^2\| \le p$, $\|C\| \le \sqrt p$), so the
    formula is accurate to a few ulps **whatever the size of $C$** — more accurate than
    an LU solve, whose error grows with the condition number $\sqrt{1 + p}$ of $I + C$.
    (For $T = 4$ the analogous polynomial formula, from $C^4 + pC^2 + \det(C)\,I = 0$,
    loses accuracy like $\varepsilon p$ through cancellation, so $T \ge 4$ uses the solve.)
    """
    dtype = C.dtype
    one = jnp.asarray(np.float64(1.0), dtype=dtype)
    two = jnp.asarray(np.float64(2.0), dtype=dtype)
    eye = jnp.asarray(np.eye(C.shape[-1]), dtype=dtype)
    p = jnp.sum(C * C) / two
    C2 = small_matmul(C, C)
    # Form the T x T matrix first, then one product with the (T, d) window: fewer
    # kernels per step than several products with the window.
    lam = eye + (two / (one + p)) * (C2 + C if transpose else C2 - C)
    return small_matmul(lam, Z)


def _cayley_solve(C: Array, Z: Array, transpose: bool) -> Array:
    r"""$\Lambda^\top Z = (I - C)^{-1}(I + C) Z$ or $\Lambda Z = (I + C)^{-1}(I - C) Z$ by
    an LU solve, for any $T$ (the factors commute). $I \pm C$ is invertible for skew $C$:
    its symmetric part is $I$."""
    eye = jnp.asarray(np.eye(C.shape[-1]), dtype=C.dtype)
    sign = C if transpose else -C
    return jnp.linalg.solve(eye - sign, small_matmul(eye + sign, Z))


_CAYLEY_METHODS = ("auto", "closed_form", "solve")


def _cayley_apply(
    C: Array,
    Z: Array,
    *,
    transpose: bool,
    method: Literal["auto", "closed_form", "solve"] = "auto",
) -> Array:
    r"""$\Lambda^\top Z$ (`transpose=True`) or $\Lambda Z$ with the Cayley transform
    $\Lambda = (I - C)(I + C)^{-1}$ of the skew $T \times T$ matrix `C`.

    `method="auto"` uses the closed form for $T \le 3$ (a few small matrix products: no
    LAPACK call, fast inside long rollouts, and accurate for every $C$) and
    `jnp.linalg.solve` for larger $T$. Both are exact up to rounding, differentiable, and
    run on every backend.
    """
    if method not in _CAYLEY_METHODS:
        raise ValueError(f"method must be one of {_CAYLEY_METHODS}, got {method!r}")
    T = C.shape[-1]
    if method == "auto":
        method = "closed_form" if T <= _CAYLEY_CLOSED_FORM_MAX_T else "solve"
    if method == "closed_form":
        if T > _CAYLEY_CLOSED_FORM_MAX_T:
            raise ValueError(
                f"the closed-form Cayley transform needs T <= {_CAYLEY_CLOSED_FORM_MAX_T}, "
                f"got T = {T}"
            )
        return _cayley_closed_form(C, Z, transpose)
    return _cayley_solve(C, Z, transpose)


def _cayley(C: Array, method: Literal["auto", "closed_form", "solve"] = "auto") -> Array:
    r"""The Cayley transform $\Lambda = (I - C)(I + C)^{-1}$ of a skew matrix `C`."""
    eye = jnp.asarray(np.eye(C.shape[-1]), dtype=C.dtype)
    return _cayley_apply(C, eye, transpose=False, method=method)


# ---------------------------------------------------------------------------------------
# Volume-preserving attention

_WEIGHTINGS = ("skew", "arbitrary")


class VolumePreservingAttention(eqx.Module):
    r"""Volume-preserving attention: $Z \mapsto \Lambda(Z)^\top Z$ with a Cayley transform.

    For a window $Z \in \mathbb{R}^{T \times d}$ (rows $z_1, \dots, z_T$) the layer forms
    the $T \times T$ correlation matrix and its Cayley transform,
    $$C = Z A Z^\top, \quad\text{i.e. } c_{ij} = z_i^\top A z_j, \qquad
      \Lambda = \operatorname{Cayley}(C) = (I - C)(I + C)^{-1},$$
    and returns $\Lambda^\top Z$: every output state is a combination of the input states
    of the window, $\tilde z_j = \sum_i \Lambda_{ij} z_i$ (the paper's $Z \mapsto Z\Lambda$
    with states as columns). There is no residual connection (adding the input would
    break volume preservation) and no softmax.

    **`weighting="skew"`** (default): $A \in \mathbb{R}^{d \times d}$ is a learnable
    **skew-symmetric** matrix ($d(d-1)/2$ parameters), so $C$ is skew, $\Lambda$ is
    orthogonal with $\det\Lambda = 1$, and the layer **preserves volume** on
    $\mathbb{R}^{T \times d}$ for every $A$, every $T$ and every $d$. No $1/\sqrt d$
    factor is applied, as in the paper's definition $\Lambda = \operatorname{Cayley}
    (Z^\top A Z)$ (states as columns there); a constant factor would only rescale the
    free matrix $A$.

    *Why the volume is preserved.* The paper notes that for a fixed $\Lambda$ the map is
    multiplication by the orthogonal matrix $I_d \otimes \Lambda^\top$; since $\Lambda$
    depends on $Z$, the full Jacobian has a second term, and the argument can be
    completed as follows. (i) $C$ is invariant:
    $C(\Lambda^\top Z) = \Lambda^\top C \Lambda = C$, because $\Lambda$ is orthogonal and
    commutes with $C$. (ii) Hence $f_s(Z) = \operatorname{Cayley}(sC(Z))^\top Z$,
    $s \in [0, 1]$, is the flow of the time-dependent field
    $V_s(Y) = K_s(C(Y))\,Y$ with $K_s(C) = 2C(I - s^2C^2)^{-1}$, an odd function of $C$.
    (iii) A field $Y \mapsto C(Y)^m Y$ with $m$ odd has divergence
    $d\operatorname{tr}C^m + \sum_{r=0}^{m-1}\big(\operatorname{tr}C^r\operatorname{tr}
    C^{m-r} - (-1)^{m-1-r}\operatorname{tr}C^m\big)$, and traces of odd powers of a skew
    matrix vanish, so it is $0$ (this uses $A^\top = -A$). Expanding $K_s$ in odd powers
    of $C$ shows $\operatorname{div} V_s = 0$ where the series converges, hence
    everywhere (the divergence is real-analytic in $Y$). By Liouville's theorem
    $f = f_1$ preserves volume. (i) also gives the
    exact inverse $Z = \Lambda(Y)\,Y$ for $Y = \Lambda(Z)^\top Z$
    (`inverse`). The test suite checks
    $|\det J - 1| \le 10^{-12}$ in float64 for many $T$, $d$ and parameters.

    **`weighting="arbitrary"`** reproduces the other variant of GeometricMachineLearning.jl
    (its `skew_sym=false`): $A$ is a full $d \times d$ matrix ($d^2$ parameters) and
    $$c_{ij} = \frac{z_i^\top A z_j}{\sqrt d} \ (i > j), \qquad C = L - L^\top$$
    from the strict lower triangle $L$. $C$ is skew, so $\Lambda$ is still orthogonal, but
    $C$ is no longer invariant and **the layer does not preserve volume** ($\det J$ is
    far from 1 on random inputs; the published proof covers only the skew weighting).
    It is kept for comparison with that package and the paper's experiments.

    **Cayley transform:** exact for every $T$. For $T \le 3$ it uses the closed form
    $\Lambda = I + 2(C^2 - C)/(1 + \tfrac12\|C\|_F^2)$ (valid because $C^3 =
    -\tfrac12\|C\|_F^2\, C$ for a skew matrix of size $\le 3$): no linear solve, so a
    long rollout makes no LAPACK call per step, and it is accurate for every size of $C$.
    For $T \ge 4$ it uses `jnp.linalg.solve` ($I + C$ is always invertible: its
    symmetric part is $I$). Both are differentiable and run on every backend.

    Brantner, de Romemont, Kraus, Li, *Volume-Preserving Transformers for Learning Time
    Series Data with Structure*, ESAIM: Proc. & Surveys 81 (2025), arXiv:2312.11166.

    **Arguments:**

    - `dim`: the state dimension $d \ge 1$.
    - `weighting`: `"skew"` (volume-preserving) or `"arbitrary"` (not; see above).
    - `key`: a JAX PRNG key; `dtype`: the parameter dtype (`None`: JAX's default float).

    **Parameters:** `weight`: for `"skew"` the $d(d-1)/2$ entries of $A$ below the
    diagonal (row by row, $A = S - S^\top$); for `"arbitrary"` the full $d \times d$ matrix.
    Initialised $U(-1/\sqrt d, 1/\sqrt d)$.

    **Call:** `attention(Z)` with `Z` of shape `(T, dim)`, any `T ≥ 1`; returns
    $\Lambda(Z)^\top Z$ with the same shape and dtype.
    `weights(Z)` returns $\Lambda(Z)$.

    ```python
    att = VolumePreservingAttention(3, key=jax.random.PRNGKey(0))
    Z = jax.random.normal(jax.random.PRNGKey(1), (5, 3))
    Y = att(Z)
    att.inverse(Y)   # ≈ Z
    ```
    """

    weight: Float[Array, "..."]
    dim: int = eqx.field(static=True)
    weighting: str = eqx.field(static=True)

    def __init__(
        self,
        dim: int,
        *,
        weighting: Literal["skew", "arbitrary"] = "skew",
        key: PRNGKeyArray,
        dtype=None,
    ):
        self.dim = check_int("dim", dim, minimum=1)
        if weighting not in _WEIGHTINGS:
            raise ValueError(f"weighting must be one of {_WEIGHTINGS}, got {weighting!r}")
        self.weighting = weighting
        dtype = float_dtype(dtype)
        d = self.dim
        shape = (d * (d - 1) // 2,) if weighting == "skew" else (d, d)
        self.weight = _uniform(key, shape, dtype, 1.0 / math.sqrt(d))

    @property
    def n_params(self) -> int:
        """The number of scalar parameters: $d(d-1)/2$ (skew) or $d^2$ (arbitrary)."""
        return self.dim * (self.dim - 1) // 2 if self.weighting == "skew" else self.dim**2

    def matrix(self) -> Float[Array, "dim dim"]:
        """The weighting matrix $A$ (skew-symmetric for `weighting="skew"`)."""
        if self.weighting == "skew":
            S = triangular_matrix(self.weight, self.dim, lower=True)
            return S - S.T
        return self.weight

    def _check(self, Z) -> None:
        name = type(self).__name__
        check_floating(f"{name} input", Z)
        check_last_dim(name, Z, self.dim, ndim=(2,))
        if Z.shape[0] < 1:
            raise ValueError(f"{name} expects a window with T >= 1 rows, got shape {Z.shape}")

    def correlation(self, Z: Float[Array, "T dim"]) -> Float[Array, "T T"]:
        r"""The skew $T \times T$ matrix $C(Z)$ that is fed to the Cayley transform.

        It is built so that it is skew-symmetric *exactly*, also in floating point:
        $C = K - K^\top$ with $K = Z S Z^\top$ (skew, where $A = S - S^\top$) or with
        $K$ the strict lower triangle of $Z A Z^\top/\sqrt d$ (arbitrary).
        """
        self._check(Z)
        dtype = Z.dtype
        weight = self.weight.astype(dtype)
        if self.weighting == "skew":
            S = triangular_matrix(weight, self.dim, lower=True)
            K = small_matmul(small_matmul(Z, S), Z.T)
        else:
            T = Z.shape[0]
            scale = jnp.asarray(np.float64(1.0 / math.sqrt(self.dim)), dtype=dtype)
            mask = jnp.asarray(np.tri(T, k=-1), dtype=dtype)
            K = mask * (small_matmul(small_matmul(Z, weight), Z.T) * scale)
        return K - K.T

    def weights(self, Z: Float[Array, "T dim"]) -> Float[Array, "T T"]:
        r"""The attention matrix $\Lambda(Z) = (I - C)(I + C)^{-1}$, orthogonal with
        $\det \Lambda = 1$ (for both weightings)."""
        return _cayley(self.correlation(Z))

    def __call__(self, Z: Float[Array, "T dim"]) -> Float[Array, "T dim"]:
        r"""Map the window `Z` `(T, dim)` to $\Lambda(Z)^\top Z$ (same shape and dtype)."""
        return _cayley_apply(self.correlation(Z), Z, transpose=True)

    def inverse(self, Y: Float[Array, "T dim"]) -> Float[Array, "T dim"]:
        r"""The exact inverse of the skew layer, $Z = \Lambda(Y)\,Y$.

        Since $C(\Lambda(Z)^\top Z) = C(Z)$, the output determines $\Lambda$, and the
        orthogonal $\Lambda$ is undone by its transpose. The `"arbitrary"` weighting has
        no such invariant and no closed-form inverse: `NotImplementedError`.
        """
        if self.weighting != "skew":
            raise NotImplementedError(
                "VolumePreservingAttention(weighting='arbitrary') has no closed-form inverse; "
                "only weighting='skew' keeps C(Z) invariant"
            )
        return _cayley_apply(self.correlation(Y), Y, transpose=False)


# ---------------------------------------------------------------------------------------
# Inference forms: the same maps with the parameter-only work done once


def _rowwise_bias(v: Array, ndim: int) -> Array:
    """`v` `(k,)` reshaped to broadcast against a point (`ndim = 1`) or a window."""
    return v.reshape((1,) * (ndim - 1) + v.shape)


class _FusedShears(eqx.Module):
    r"""A composition of triangular shears, rearranged for fast repeated evaluation.

    Built by `_fuse_shears` from a sequence of
    `VolumePreservingLowerLayer`/`VolumePreservingUpperLayer` (step size `h = 1`). Each
    run of linear layers $x \mapsto xM_k + c_k$ is composed into one affine map
    $x \mapsto xM + c$ ($M$ a product of unit-triangular matrices, $\det M = 1$), and that
    map is **folded into the pre-activation** of the nonlinear layer that follows it:
    with $y = xM + c$ and the layer $y \mapsto y + \sigma(yW^\top + b)$,
    $$\big[\,y \;\big|\; yW^\top + b\,\big] = x\,\big[\,M \;\big|\; MW^\top\,\big]
      + \big[\,c \;\big|\; cW^\top + b\,\big],$$
    whose matrices and biases are computed once (applied as two $d \times d$ products:
    slicing the result of one $d \times 2d$ product cost XLA an extra kernel in a
    rollout loop). A stage is therefore
    $x \mapsto y + \sigma(\text{pre})$, and a trailing linear run is one affine map.
    Every matrix is formed from the parameters when the form is built, not per call.

    The map equals the layer-by-layer composition up to rounding (the products are
    re-associated), and its Jacobian is still a product of unit-triangular matrices
    ($M$, then $I + \operatorname{diag}(\sigma')W$ per stage), so it preserves volume
    exactly in exact arithmetic.
    """

    matrices: tuple[Array, ...]
    biases: tuple[Array, ...]
    final: tuple[Array, Array] | None
    dim: int = eqx.field(static=True)
    activations: tuple = eqx.field(static=True)
    with_affine: tuple[bool, ...] = eqx.field(static=True)

    def __call__(self, z: Float[Array, "*T dim"]) -> Float[Array, "*T dim"]:
        d, dtype = self.dim, z.dtype
        for A, a, act, affine in zip(self.matrices, self.biases, self.activations, self.with_affine):
            A, a = A.astype(dtype), a.astype(dtype)
            # [y | pre] = x [M | M W^T] + [c | c W^T + b], as two products: slicing one
            # (d, 2d) product's result costs XLA an extra kernel per step in a rollout
            pre = small_matmul(z, A[:, d:] if affine else A) + _rowwise_bias(a[d:] if affine else a, z.ndim)
            y = small_matmul(z, A[:, :d]) + _rowwise_bias(a[:d], z.ndim) if affine else z
            sigma = (lambda v: v) if act is None else resolve_activation(act)
            z = y + sigma(pre)
        if self.final is not None:
            Mt, c = self.final
            z = small_matmul(z, Mt.astype(dtype)) + _rowwise_bias(c.astype(dtype), z.ndim)
        return z

    def step(self, state, task=None):
        """One rollout step of a feed-forward integrator (the model protocol): `self(state)`."""
        return self(state)


def fuse_shears(layers) -> _FusedShears:
    """The `_FusedShears` form of a sequence of triangular shears (`h = 1`)."""
    if not layers:
        raise ValueError("_fuse_shears needs at least one layer, got none")
    d = layers[0].dim
    dtype = layers[0].weight.dtype
    eye = jnp.asarray(np.eye(d), dtype=dtype)
    matrices, biases, activations, with_affine = [], [], [], []
    pending = None  # (Mt, c): the linear run since the last nonlinear layer
    for layer in layers:
        if layer.dim != d:
            raise ValueError(f"all layers must have dim={d}, got a layer with dim={layer.dim}")
        Wt = triangular_matrix(layer.weight, d, layer.is_lower, transpose=True)
        b = jnp.zeros((d,), dtype) if layer.bias is None else layer.bias
        if layer.activation is None:
            Mt = eye + Wt
            pending = (Mt, b) if pending is None else (small_matmul(pending[0], Mt), small_matmul(pending[1], Mt) + b)
            continue
        if pending is None:
            matrices.append(Wt)
            biases.append(b)
            with_affine.append(False)
        else:
            Mt, c = pending
            matrices.append(jnp.concatenate([Mt, small_matmul(Mt, Wt)], axis=1))
            biases.append(jnp.concatenate([c, small_matmul(c, Wt) + b]))
            with_affine.append(True)
            pending = None
        activations.append(layer.activation)
    return _FusedShears(
        matrices=tuple(matrices),
        biases=tuple(biases),
        final=pending,
        dim=d,
        activations=tuple(activations),
        with_affine=tuple(with_affine),
    )


class _AttentionInference(eqx.Module):
    """`VolumePreservingAttention` (skew weighting) with its matrix $S$ formed once."""

    S: Array
    dim: int = eqx.field(static=True)

    def __call__(self, Z: Float[Array, "T dim"]) -> Float[Array, "T dim"]:
        S = self.S.astype(Z.dtype)
        K = small_matmul(small_matmul(Z, S), Z.T)
        return _cayley_apply(K - K.T, Z, transpose=True)


def attention_inference(attention: VolumePreservingAttention):
    """The inference form of an attention layer (the layer itself for `"arbitrary"`)."""
    if attention.weighting != "skew":
        return attention
    S = triangular_matrix(attention.weight, attention.dim, lower=True)
    return _AttentionInference(S=S, dim=attention.dim)
