r"""Small linear algebra of the volume-preserving layers: unrolled products, strictly
triangular matrices from their free entries, and the Cayley transform of a skew matrix.

Nothing here has parameters; the layers in `geomlearn.layers.volume_preserving` build
their constrained matrices with these helpers, so the structure holds for every
parameter value.
"""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._typing import Array

__all__ = [
    "small_matmul",
    "uniform",
    "triangular_matrix",
    "cayley",
    "cayley_apply",
    "CAYLEY_METHODS",
]

# The Cayley transform uses its closed form (no linear solve) for windows up to this
# length, and `jnp.linalg.solve` above it. See `cayley_apply`.
_CAYLEY_CLOSED_FORM_MAX_T = 3

_HIGHEST = lax.Precision.HIGHEST

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


def uniform(key, shape, dtype, bound: float) -> Array:
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



def _cayley_auto(C: Array, Z: Array, transpose: bool) -> Array:
    r"""The closed form for $T \le 3$, the solve above."""
    small = C.shape[-1] <= _CAYLEY_CLOSED_FORM_MAX_T
    return (_cayley_closed_form if small else _cayley_solve)(C, Z, transpose)


def _cayley_closed_form_checked(C: Array, Z: Array, transpose: bool) -> Array:
    T = C.shape[-1]
    if T > _CAYLEY_CLOSED_FORM_MAX_T:
        raise ValueError(
            f"the closed-form Cayley transform needs T <= {_CAYLEY_CLOSED_FORM_MAX_T}, "
            f"got T = {T}"
        )
    return _cayley_closed_form(C, Z, transpose)


#: The ways `cayley_apply` can compute the transform, by the name of its `method`.
CAYLEY_METHODS = {
    "auto": _cayley_auto,
    "closed_form": _cayley_closed_form_checked,
    "solve": _cayley_solve,
}


def cayley_apply(
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
    try:
        apply = CAYLEY_METHODS[method]
    except (KeyError, TypeError):
        raise ValueError(
            f"method must be one of {tuple(CAYLEY_METHODS)}, got {method!r}"
        ) from None
    return apply(C, Z, transpose)


def cayley(C: Array, method: Literal["auto", "closed_form", "solve"] = "auto") -> Array:
    r"""The Cayley transform $\Lambda = (I - C)(I + C)^{-1}$ of a skew matrix `C`."""
    eye = jnp.asarray(np.eye(C.shape[-1]), dtype=C.dtype)
    return cayley_apply(C, eye, transpose=False, method=method)
