r"""The sinusoidal positional encoding (Vaswani et al., 2017, §3.5).

**How the table is computed.** Entry $(t, 2j)$ is $\sin(t\,\hat\omega_j)$ and entry
$(t, 2j+1)$ is $\cos(t\,\hat\omega_j)$, where $\hat\omega_j$ is the float64 number
`base ** (-2j / dim)`. The only hard part is the **argument reduction**: at
$t = 10^5$ the angle $t\hat\omega_j$ is about $10^5$ rad, and a float64 product
$\mathrm{fl}(t\,\hat\omega_j)$ is already off by up to $7\cdot10^{-12}$ rad, more than a
float32 ulp of an entry near zero. The module therefore reduces the angle *exactly*:

1. In NumPy, once per `(dim, base)` and length class ($O(d)$ work, no table), the
   number of quarter turns per position, $\varphi_j = \hat\omega_j \cdot 2/\pi$, is
   written in fixed point modulo 4 as $K + 1$ **12-bit limbs**
   $\varphi_j \equiv \sum_{k=0}^{K} F_{jk}\, 4096^{-k} \pmod 4$, from $2/\pi$ computed
   to a few hundred bits with Machin's formula in Python integers.
2. In the traced program, positions are exact integers $t = \sum_a t_a 4096^a$ and the
   limb products $t_a F_{jk}$ (at most 24 bits) are summed **in int32**, with carries:
   this gives $t\varphi_j \bmod 4 = n + x$ *exactly* up to the truncation of $\varphi_j$
   ($< t\,4096^{-K}$, with $K$ chosen so that this is below $2^{-60}$ of the smallest
   nonzero angle), with the quadrant $n \in \{0,1,2,3\}$ and $x \in [-\tfrac12, \tfrac12]$.
3. $x$ is converted to a **double-word float** $x_h + x_\ell$ (error-free sums of the
   24-bit limb pairs) and multiplied by $\pi/2$ with an error-free product (operands split
   by bit masks, so the result does not depend on whether the backend contracts
   multiply-adds): $r = x\pi/2 \in [-\pi/4, \pi/4]$ to about $2^{-35}$ relative (float32
   work) or $2^{-79}$ (float64 work).
4. $\sin r$ and $\cos r$: with float32 work, Taylor polynomials whose leading terms
   ($r$, $1 - r^2/2$) are carried in double-word arithmetic and whose tails are plain
   float32 — the result before its one final rounding is within about $0.2$ ulp of the
   exact value; with float64 work, $\sin r_h + r_\ell\cos r_h$ with the backend's
   float64 `sin`/`cos`. The quadrant then selects $\pm\sin r$ or $\pm\cos r$.

Every product that feeds an error-free sum is exact by construction (fused
multiply-adds change nothing), and the one error-free sum with a constant operand,
$(1 + b) - 1$, takes its `1` from an array XLA cannot prove constant. Positions go up to
$2^{31}$; frequencies below about $2^{-80}$ are outside the tested range. Only integer
and elementwise floating-point operations are used (every backend, `jit`, `vmap`,
`grad`; $O(d)$ constants whatever the length); tables of at most `_SMALL_TABLE` angles
are computed by the same algorithm in NumPy and embedded as constants.
"""

from __future__ import annotations

import functools
import numbers

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._typing import Array, Float
from .._validation import check_int
from ._angle_reduction import angular_frequencies, quadrant_table, reduce_angles
from ._angle_reduction import two_over_pi_fixed  # noqa: F401  (the constants' home is here)
from ._real_angles import add_table_at_times, check_times, table_at_times

__all__ = ["PositionalEncoding", "positional_encoding"]

# Tables with at most this many angles (T * ceil(dim / 2)) are built in NumPy and embedded
# in the program as a constant (at most 256 KiB in float64); larger ones are computed in
# the program (from O(dim) constants) on the device of the input.
_SMALL_TABLE = 1 << 14


def _check_base(base) -> float:
    if isinstance(base, bool) or not isinstance(base, numbers.Real):
        raise TypeError(f"base must be a real number, got {base!r}")
    base = float(base)
    if not (base > 0 and np.isfinite(base)):
        raise ValueError(f"base must be a finite positive number, got {base}")
    return base


def _table(seq_length: int, dim: int, base: float, work: np.dtype, xp):
    """The `(T, dim)` table in `work` (float32 or float64), computed with `xp`."""
    n, rh, rl = reduce_angles(seq_length, dim, base, work, xp)
    return quadrant_table(n, rh, rl, work, xp)


def _is_small(seq_length: int, dim: int) -> bool:
    return seq_length * ((dim + 1) // 2) <= _SMALL_TABLE


@functools.lru_cache(maxsize=64)
def _small_table(seq_length: int, dim: int, base: float) -> np.ndarray:
    """A short table, computed in NumPy (float64 work) and kept read-only."""
    table = _table(seq_length, dim, base, np.dtype(np.float64), np)
    table.setflags(write=False)
    return table


def _work_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def _traced_table(seq_length: int, dim: int, base: float, dtype: np.dtype):
    """The table computed by traced JAX operations, in `dtype`."""
    if seq_length == 0:
        return jnp.zeros((0, dim), dtype)
    return _table(seq_length, dim, base, _work_dtype(dtype), jnp).astype(dtype)


@functools.partial(jax.jit, static_argnames=("seq_length", "dim", "base", "dtype"))
def _traced_table_jit(*, seq_length: int, dim: int, base: float, dtype):
    return _traced_table(seq_length, dim, base, np.dtype(dtype))


@functools.partial(jax.jit, static_argnames=("dim", "base"))
def _add_traced_table(x, *, dim: int, base: float):
    """`x + P[:T]`, the table computed in the same program (so on `x`'s device)."""
    shape = x.shape
    table = _traced_table(shape[-2], dim, base, np.dtype(x.dtype))
    return x + table.reshape((1,) * (len(shape) - 2) + table.shape)


def positional_encoding(
    seq_length: int, dim: int, *, dtype=jnp.float32, base: float = 10000.0
) -> Float[Array, "seq_length dim"]:
    r"""The sinusoidal position table of shape `(seq_length, dim)`.

    $$P_{t,2j} = \sin\!\big(t\,\hat\omega_j\big), \qquad
      P_{t,2j+1} = \cos\!\big(t\,\hat\omega_j\big), \qquad
      \hat\omega_j = \mathrm{fl}_{64}\big(\mathrm{base}^{-2j/\mathrm{dim}}\big),$$

    with positions counted from $t = 0$, so row 0 is $(0, 1, 0, 1, \dots)$. Column pair
    $(2j, 2j+1)$ oscillates with wavelength $2\pi\,\mathrm{base}^{2j/\mathrm{dim}}$, from
    $2\pi$ up to about $2\pi\,\mathrm{base}$.

    **Odd `dim`** is supported: the last column is a sine without a cosine partner. (Most
    libraries reject odd widths; geomlearn needs them for odd-dimensional systems such as
    the 3-dimensional rigid body.)

    **Precision.** The angle $t\hat\omega_j$ is reduced modulo $\pi/2$ exactly (integer
    limb arithmetic, see the module documentation), never rounded as a whole: every
    entry is within **1 ulp** of the exact value in float32 (float16 and bfloat16 round
    that once more) and within about **2 ulp** in float64 (the reduced angle exact to
    $2^{-79}$, then the backend's `sin`/`cos` on $[-\pi/4, \pi/4]$).

    **Cost.** Short tables (at most $2^{14}$ angles) are NumPy constants; longer ones are
    computed by JAX from $O(\mathrm{dim})$ constants, in time linear in the table size.

    **Arguments:**

    - `seq_length`: the number of positions `T ≥ 0`.
    - `dim`: the feature dimension, `≥ 1`.
    - `dtype`: the floating dtype of the result (default float32).
    - `base`: the wavelength base, `> 0` (default 10000, as in Vaswani et al.).

    **Returns:** a JAX array of shape `(seq_length, dim)` and dtype `dtype`.

    ```python
    positional_encoding(3, 4)[1]   # (sin 1, cos 1, sin 0.01, cos 0.01)
    ```
    """
    seq_length = check_int("seq_length", seq_length, minimum=0)
    dim = check_int("dim", dim, minimum=1)
    base = _check_base(base)
    dtype = np.dtype(dtype)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"dtype must be a floating dtype, got {dtype}")
    if _is_small(seq_length, dim):
        return jnp.asarray(_small_table(seq_length, dim, base).astype(dtype), dtype=dtype)
    return _traced_table_jit(seq_length=seq_length, dim=dim, base=base, dtype=dtype)


class PositionalEncoding(eqx.Module):
    r"""Add the sinusoidal position table to a window: $Z \mapsto Z + P_{[:T]}$.

    Attention layers are permutation-equivariant along time: shuffling the rows of the
    input window shuffles the output rows the same way, so a transformer integrator
    cannot tell the order of its states except through their values. Adding a fixed,
    position-dependent signal (Vaswani et al., *Attention is all you need*, NeurIPS 2017,
    §3.5) makes the order visible.

    Why this encoding belongs in a structure-preserving toolkit: it **adds a constant**,
    so its Jacobian is exactly the identity. A symplectic or volume-preserving network
    with this layer in front is exactly as symplectic or volume-preserving as it was
    (translations are symplectic and preserve volume).

    Design choices:

    - **Sinusoidal, not learned**: a learned table would add parameters without changing
      the geometry argument, and could not extrapolate to longer windows.
    - **No parameters**: `jax.tree_util.tree_leaves(PositionalEncoding(d)) == []`.
    - **The length is read from each input**: no `max_len`, no cached table.
    - **On the input's device, at any length**: a short table is a NumPy constant added
      to `x`; a long one is computed together with the addition where `x` lives, from
      $O(\mathrm{dim})$ constants. Works under `jit`, `vmap` and `grad`.
    - **Exact argument reduction**: see [`positional_encoding`][geomlearn.positional_encoding].

    **Arguments:**

    - `dim`: the feature dimension `d` of the windows (odd allowed).
    - `base`: the wavelength base (default 10000).

    **Call:** `x` of shape `(..., T, dim)` with any number of leading axes and a floating
    dtype; returns `x + P[:T]` in `x.dtype`.

    ```python
    pe = PositionalEncoding(4)
    z = jnp.zeros((3, 4))
    pe(z)[0]   # (0, 1, 0, 1)
    ```
    """

    dim: int = eqx.field(static=True)
    base: float = eqx.field(static=True)

    def __init__(self, dim: int, *, base: float = 10000.0):
        self.dim = check_int("dim", dim, minimum=1)
        self.base = _check_base(base)

    def __call__(
        self, x: Float[Array, "... T dim"], times: Float[Array, " T"] | None = None
    ) -> Float[Array, "... T dim"]:
        shape = jnp.shape(x)
        if len(shape) < 2:
            raise ValueError(
                f"PositionalEncoding expects an input of shape (..., T, {self.dim}), "
                f"got shape {shape}"
            )
        if shape[-1] != self.dim:
            raise ValueError(
                f"PositionalEncoding(dim={self.dim}) expects last dimension {self.dim}, "
                f"got shape {shape}"
            )
        dtype = jnp.result_type(x)
        if not jnp.issubdtype(dtype, jnp.floating):
            raise TypeError(f"PositionalEncoding expects a floating-point input, got {dtype}")
        if times is not None:
            check_times(times, shape[-2], "PositionalEncoding")
            return add_table_at_times(x, times, dim=self.dim, base=self.base)
        if not _is_small(shape[-2], self.dim):
            return _add_traced_table(x, dim=self.dim, base=self.base)
        # A NumPy constant of the input's dtype: added by the same computation, so the
        # result is placed wherever `x` is (and is a small compile-time constant under jit).
        table = _small_table(shape[-2], self.dim, self.base).astype(dtype)
        # Explicit rank match for the leading axes (no implicit rank promotion).
        return x + table.reshape((1,) * (len(shape) - 2) + table.shape)

    def table(self, x: Float[Array, "... T dim"], times: Float[Array, " T"] | None = None):
        """The table `P` that `self(x, times)` adds, `(T, dim)` in `x`'s dtype (the same
        numbers: `self(x, times) - x` up to the rounding of the sum)."""
        T, dtype = jnp.shape(x)[-2], jnp.result_type(x)
        if times is None:
            return positional_encoding(T, self.dim, dtype=dtype, base=self.base)
        check_times(times, T, "PositionalEncoding")
        return table_at_times(times, self.dim, self.base, dtype)

    def __repr__(self) -> str:
        return f"PositionalEncoding(dim={self.dim}, base={self.base})"
