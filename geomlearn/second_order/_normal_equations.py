r"""The chunked Gauss–Newton normal equations $A = \sum_i J_i^\top J_i$, $g = \sum_i J_i^\top r_i$.

With the samples sharded along devices (and processes), each shard accumulates the sums
over its own samples, and one all-reduce (`lax.psum` of the packed $P^2 + P + 1$ numbers)
adds them up: see `over_shards`.
"""

from __future__ import annotations

from typing import Callable, Literal

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree
from jax.sharding import NamedSharding, PartitionSpec

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
    the samples not yet counted (`c` is clamped to `M`).
    """
    M = x.shape[0]
    chunk_size = min(int(chunk_size), M)
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
    """`((A, g, S), n)`: $A = \\sum J_i^\\top J_i$, $g = \\sum J_i^\\top r_i$,
    $S = \\sum \\|r_i\\|^2$ over the samples `x`, `y` (flat θ), and `n` the number of
    samples accumulated (an `int32` of shape `(1,)`)."""
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
        A, g, S, n = carry
        xb, yb, mb = batch
        J, r = jax.vmap(jac, (None, 0, 0))(theta, xb, yb)  # (c, R, P), (c, R)
        # where, not a product: an uncounted sample must not leak a NaN/inf through 0·x
        J = jnp.where(mb[:, None, None], J, jnp.zeros((), dtype))
        r = jnp.where(mb[:, None], r, jnp.zeros((), dtype))
        J = J.reshape(-1, P)
        r = r.reshape(-1)
        A = A + jnp.matmul(J.T, J, precision=hi)
        g = g + jnp.matmul(J.T, r, precision=hi)
        n = n + jnp.sum(mb, dtype=jnp.int32)
        return (A, g, S + jnp.sum(jnp.square(r)), n), None

    zero = (jnp.zeros((P, P), dtype), jnp.zeros((P,), dtype), jnp.zeros((), dtype),
            jnp.zeros((), jnp.int32))
    A, g, S, n = _chunked(x, y, chunk_size, body, zero)
    return (A, g, S), n[None]


def sum_squares_flat(r1, theta, x, y, chunk_size, dtype):
    """`((S,), n)`: $S = \\sum \\|r_i\\|^2$ over the samples, chunked, and their number."""
    def body(S, batch):
        xb, yb, mb = batch
        r = jax.vmap(r1, (None, 0, 0))(theta, xb, yb)
        r = jnp.where(mb[:, None], r, jnp.zeros((), dtype))
        return S + jnp.sum(jnp.square(r)), None

    S = _chunked(x, y, chunk_size, body, jnp.zeros((), dtype))
    return (S,), jnp.asarray([x.shape[0]], jnp.int32)


def sample_axes(sharding) -> tuple:
    """The mesh axes that `sharding` splits the leading (sample) axis over."""
    spec = sharding.spec if isinstance(sharding, NamedSharding) else ()
    if len(spec) < 1 or spec[0] is None:
        raise ValueError(
            "sharding must be a jax.sharding.NamedSharding that splits the leading (sample) "
            f"axis over mesh axes, e.g. NamedSharding(mesh, PartitionSpec('batch')); got "
            f"{sharding!r}")
    axes = spec[0]
    return tuple(axes) if isinstance(axes, (tuple, list)) else (axes,)


def n_shards(sharding) -> int:
    """The number of pieces `sharding` cuts the sample axis into."""
    shape = sharding.mesh.shape
    n = 1
    for a in sample_axes(sharding):
        n *= shape[a]
    return n


def over_shards(fn, sharding):
    r"""`fn(theta, x, y) -> (sums, n)` computed on each shard of the sample axis of `x`, `y`
    and the `sums` added over the shards: `(sums, counts)`.

    `sums` is a tuple of arrays in one dtype; they are packed into one vector, so that the
    shards exchange them in **one all-reduce** (`lax.psum` over the mesh axes of the
    sample axis): $P^2 + P + 1$ numbers for the normal equations, one number for a sum of
    squares. `theta` is replicated. `counts` holds the `n` of every shard (a global array
    of shape `(n_shards,)`, sharded as the samples are: each process holds its own shards'
    counts). `sharding=None`: `fn` on all samples, unchanged.
    """
    if sharding is None:
        return fn
    axes = sample_axes(sharding)
    spec = PartitionSpec(axes if len(axes) > 1 else axes[0])

    def per_shard(theta, x, y):
        sums, n = fn(theta, x, y)
        packed = jnp.concatenate([jnp.ravel(s) for s in sums])
        packed = jax.lax.psum(packed, axes)  # the one all-reduce
        out, start = [], 0
        for s in sums:
            out.append(packed[start:start + s.size].reshape(s.shape))
            start += s.size
        return tuple(out), n

    # check_vma=False: the chunked scan starts from replicated zeros and accumulates
    # per-shard values; the psum makes the sums replicated again
    return jax.shard_map(per_shard, mesh=sharding.mesh,
                         in_specs=(PartitionSpec(), spec, spec),
                         out_specs=(PartitionSpec(), spec), check_vma=False)


def check_sharded(x, sharding) -> None:
    """`ValueError` unless the sample axis of `x` divides into `sharding`'s shards."""
    if sharding is None:
        return
    k = n_shards(sharding)
    if x.shape[0] % k:
        raise ValueError(
            f"the samples are sharded over {k} devices, so their number must be a multiple "
            f"of {k}; got {x.shape[0]} (with `subset`, choose a multiple of {k})")


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
    sharding: NamedSharding | None = None,
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
    - `sharding`: `None`, or the `jax.sharding.NamedSharding` that splits the sample axis
      of `x` and `y` over devices (e.g. the processes of a `jax.distributed` job, each
      holding its own samples): each shard then accumulates
      $A_k = \sum_{i \in k} J_i^\top J_i$, $g_k$, $S_k$ over **its own** $M_k$ samples
      (memory $P^2 + \min(\text{chunk\_size}, M_k)\cdot R\cdot P$ per device), and one
      all-reduce of $P^2 + P + 1$ numbers gives $A = \sum_k A_k$, $g$, $S$ on every
      device. $M$ must be a multiple of the number of shards.

    **Returns:** `(A, g, S)` in the highest dtype of the parameters and residuals
    (replicated when `sharding` is given).
    """
    check_jacobian(jacobian)
    flat, unravel = ravel(params)
    x, y = jnp.asarray(x), jnp.asarray(y)
    check_samples(x, y)
    check_sharded(x, sharding)
    dtype = compute_dtype(flat, residual_fn, params, x, y)
    r1 = flat_residual(residual_fn, unravel, dtype)
    normal = over_shards(
        lambda t, xs, ys: normal_equations_flat(r1, t, xs, ys, chunk_size, jacobian, dtype),
        sharding)
    sums, _ = normal(flat.astype(dtype), x, y)
    return sums


def check_samples(x, y):
    if x.ndim < 1 or y.ndim < 1 or x.shape[0] != y.shape[0] or x.shape[0] < 1:
        raise ValueError(
            "x and y must have the same leading (sample) axis of length >= 1, got shapes "
            f"{x.shape} and {y.shape}"
        )


def check_jacobian(jacobian) -> None:
    if jacobian not in JACOBIAN_MODES:
        raise ValueError(f"jacobian must be one of {list(JACOBIAN_MODES)}, got {jacobian!r}")
