r"""The chunked Gauss–Newton normal equations $A = \sum_i J_i^\top J_i$, $g = \sum_i J_i^\top r_i$."""

from __future__ import annotations

from typing import Callable, Literal

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

__all__ = ["JACOBIAN_MODES", "normal_equations"]


def ravel(params):
    """`ravel_pytree`, also for leaves of mixed dtypes under strict dtype promotion.

    The flat vector has the highest dtype of the leaves; `unravel` casts each leaf back
    to its own dtype.
    """
    with jax.numpy_dtype_promotion("standard"):
        flat, unravel_ = ravel_pytree(params)

    def unravel(theta):
        with jax.numpy_dtype_promotion("standard"):
            return unravel_(theta)

    return flat, unravel


def flat_residual(residual_fn, unravel, dtype):
    def r1(theta, xi, yi):
        r = jnp.ravel(residual_fn(unravel(theta), xi, yi))
        return r.astype(dtype)

    return r1


def _chunked(x, y, chunk_size: int, body, init):
    """`lax.scan` of `body(carry, (xb, yb, mask))` over chunks of `chunk_size` samples.

    No copy of the data: chunk `k` is the slice starting at `min(k·c, M − c)`, so the
    last chunk overlaps the previous one when `c` does not divide `M`, and `mask` marks
    the samples not yet counted (requires `c <= M`).
    """
    M = x.shape[0]
    n_chunks = -(-M // chunk_size)
    offsets = jnp.arange(chunk_size)

    def step(carry, k):
        first_new = k * chunk_size
        start = jnp.minimum(first_new, M - chunk_size)
        xb = jax.lax.dynamic_slice_in_dim(x, start, chunk_size)
        yb = jax.lax.dynamic_slice_in_dim(y, start, chunk_size)
        mask = start + offsets >= first_new
        return body(carry, (xb, yb, mask))

    carry, _ = jax.lax.scan(step, init, jnp.arange(n_chunks))
    return carry


#: The per-sample Jacobian transforms by name (`"auto"` picks one by the sizes).
_JACOBIANS = {"fwd": jax.jacfwd, "rev": jax.jacrev}
JACOBIAN_MODES = ("auto", *_JACOBIANS)
"""The accepted values of `jacobian`: `"auto"`, `"fwd"` (`jax.jacfwd`), `"rev"` (`jax.jacrev`)."""


def _jacobian_transform(mode: str, n_residuals: int, n_params: int):
    """`jax.jacrev` or `jax.jacfwd` for `mode`; `"auto"`: jacrev costs one VJP per
    residual, jacfwd one JVP per parameter, so the cheaper one."""
    if mode == "auto":
        mode = "rev" if n_residuals < n_params else "fwd"
    return _JACOBIANS[mode]


def normal_equations_flat(r1, theta, x, y, chunk_size, jacobian, dtype):
    """$A = \\sum J_i^\\top J_i$, $g = \\sum J_i^\\top r_i$, $S = \\sum \\|r_i\\|^2$ (flat θ)."""
    P = theta.size
    R = jax.eval_shape(r1, theta, x[0], y[0]).shape[0]
    transform = _jacobian_transform(jacobian, R, P)

    def with_value(t, xi, yi):
        r = r1(t, xi, yi)
        return r, r

    jac = transform(with_value, has_aux=True)
    # full-precision products (no TF32/bf16 passes on accelerators): A squares the
    # conditioning of J, so its accumulation must not lose more
    hi = jax.lax.Precision.HIGHEST

    def body(carry, batch):
        A, g, S = carry
        xb, yb, mb = batch
        J, r = jax.vmap(jac, (None, 0, 0))(theta, xb, yb)  # (c, R, P), (c, R)
        # where, not a product: an uncounted sample must not leak a NaN/inf through 0·x
        J = jnp.where(mb[:, None, None], J, jnp.zeros((), dtype))
        r = jnp.where(mb[:, None], r, jnp.zeros((), dtype))
        J = J.reshape(-1, P)
        r = r.reshape(-1)
        A = A + jnp.matmul(J.T, J, precision=hi)
        g = g + jnp.matmul(J.T, r, precision=hi)
        return (A, g, S + jnp.sum(jnp.square(r))), None

    zero = (jnp.zeros((P, P), dtype), jnp.zeros((P,), dtype), jnp.zeros((), dtype))
    return _chunked(x, y, chunk_size, body, zero)


def sum_squares_flat(r1, theta, x, y, chunk_size, dtype):
    def body(S, batch):
        xb, yb, mb = batch
        r = jax.vmap(r1, (None, 0, 0))(theta, xb, yb)
        r = jnp.where(mb[:, None], r, jnp.zeros((), dtype))
        return S + jnp.sum(jnp.square(r)), None

    return _chunked(x, y, chunk_size, body, jnp.zeros((), dtype))


def compute_dtype(flat, residual_fn, params, x, y):
    r = jax.eval_shape(residual_fn, params, x[0], y[0])
    return jnp.result_type(flat.dtype, r.dtype)


def normal_equations(
    residual_fn: Callable,
    params,
    x,
    y,
    *,
    chunk_size: int = 1024,
    jacobian: Literal["auto", "fwd", "rev"] = "auto",
):
    r"""The Gauss–Newton normal equations of $S(\theta) = \sum_i \|r_i(\theta)\|^2$, chunked.

    $A = \sum_i J_i^\top J_i$ ($P \times P$), $g = \sum_i J_i^\top r_i$ ($P$) and
    $S = \sum_i \|r_i\|^2$, accumulated over chunks of `chunk_size` samples by a
    `lax.scan` (memory $P^2 + \text{chunk\_size}\cdot R\cdot P$, independent of $M$). The
    parameter vector is `jax.flatten_util.ravel_pytree(params)[0]`.

    **Arguments:**

    - `residual_fn`: `residual_fn(params, x_i, y_i)` → the residual of one sample (any
      shape; flattened to $R$ entries).
    - `params`: a pytree of floating-point arrays.
    - `x`, `y`: arrays with a leading sample axis of length $M \ge 1$.
    - `chunk_size`: samples per chunk (the last chunk is masked where it overlaps).
    - `jacobian`: per-sample Jacobians by `"rev"` (`jax.jacrev`, $R$ VJPs), `"fwd"`
      (`jax.jacfwd`, $P$ JVPs) or `"auto"` (reverse mode when $R < P$).

    **Returns:** `(A, g, S)` in the highest dtype of the parameters and residuals.
    """
    check_jacobian(jacobian)
    flat, unravel = ravel(params)
    x, y = jnp.asarray(x), jnp.asarray(y)
    check_samples(x, y)
    dtype = compute_dtype(flat, residual_fn, params, x, y)
    r1 = flat_residual(residual_fn, unravel, dtype)
    chunk = min(int(chunk_size), x.shape[0])
    return normal_equations_flat(r1, flat.astype(dtype), x, y, chunk, jacobian, dtype)


def check_samples(x, y):
    if x.ndim < 1 or y.ndim < 1 or x.shape[0] != y.shape[0] or x.shape[0] < 1:
        raise ValueError(
            "x and y must have the same leading (sample) axis of length >= 1, got shapes "
            f"{x.shape} and {y.shape}"
        )


def check_jacobian(jacobian) -> None:
    if jacobian not in JACOBIAN_MODES:
        raise ValueError(f"jacobian must be one of {list(JACOBIAN_MODES)}, got {jacobian!r}")
