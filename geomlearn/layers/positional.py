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
import math
import numbers

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._typing import Array, Float
from .._validation import check_int

__all__ = ["PositionalEncoding", "positional_encoding"]

# Tables with at most this many angles (T * ceil(dim / 2)) are built in NumPy and embedded
# in the program as a constant (at most 256 KiB in float64); larger ones are computed in
# the program (from O(dim) constants) on the device of the input.
_SMALL_TABLE = 1 << 14

_LIMB_BITS = 12
_LIMB = 1 << _LIMB_BITS
# Bits of precision asked of the reduced angle, relative to the smallest nonzero angle.
_GUARD_BITS = {np.dtype(np.float32): 60, np.dtype(np.float64): 96}


def _check_base(base) -> float:
    if isinstance(base, bool) or not isinstance(base, numbers.Real):
        raise TypeError(f"base must be a real number, got {base!r}")
    base = float(base)
    if not (base > 0 and np.isfinite(base)):
        raise ValueError(f"base must be a finite positive number, got {base}")
    return base


def _frequencies(dim: int, base: float) -> np.ndarray:
    r"""The float64 angular frequencies $\hat\omega_j$ = `base ** (-2j / dim)`,
    $j = 0, \dots, \lceil d/2 \rceil - 1$ (the definition of the table)."""
    j2 = np.arange(0, dim, 2, dtype=np.float64)
    return np.float64(base) ** (-j2 / dim)


# ---------------------------------------------------------------------------------------
# Constants: 2/pi and pi/2 in fixed point (Python integers), limbs of the frequencies


def _arctan_inverse(x: int, one: int) -> int:
    """`arctan(1/x) * one` in fixed point (Taylor series, integer arithmetic)."""
    total, power, k, sign = 0, one // x, 1, 1
    x2 = x * x
    while power:
        total += sign * (power // k)
        power //= x2
        k += 2
        sign = -sign
    return total


@functools.lru_cache(maxsize=None)
def _pi_fixed(bits: int) -> int:
    r"""$\lfloor \pi\, 2^{\text{bits}} \rceil$ (to within a few units) by Machin's formula
    $\pi = 16 \arctan\tfrac15 - 4 \arctan\tfrac1{239}$."""
    guard = 32
    one = 1 << (bits + guard)
    pi = 16 * _arctan_inverse(5, one) - 4 * _arctan_inverse(239, one)
    return pi >> guard


@functools.lru_cache(maxsize=None)
def _two_over_pi_fixed(bits: int) -> int:
    r"""$\lfloor (2/\pi)\, 2^{\text{bits}} \rfloor$ (to within a unit)."""
    guard = 64
    return (1 << (2 * (bits + guard) + 1)) // _pi_fixed(bits + guard) >> guard


@functools.lru_cache(maxsize=64)
def _quarter_turn_limbs(seq_length: int, dim: int, base: float, work: str):
    r"""`(A, K, F)`: `A` 12-bit chunks of a position $t < $ `seq_length`, and the limbs
    `F` `(K + 1, J)` int32 of $\varphi_j = \hat\omega_j \cdot 2/\pi \bmod 4$ with $K$ even,
    $\varphi_j \approx \sum_k F_{kj} 4096^{-k}$ (truncated)."""
    omega = _frequencies(dim, base)
    t_bits = max(1, int(seq_length - 1).bit_length())
    n_chunks = -(-t_bits // _LIMB_BITS)
    # Smallest nonzero quarter-turn count, to scale the precision asked for.
    positive = omega[omega > 0]
    phi_min = float(positive.min()) * 2 / math.pi if positive.size else 1.0
    small = max(0, math.ceil(-math.log2(phi_min))) if phi_min > 0 else 0
    bits = t_bits + _GUARD_BITS[np.dtype(work)] + small
    K = -(-bits // _LIMB_BITS)
    K += K % 2  # limbs are paired into 24-bit words later
    frac_bits = _LIMB_BITS * K
    top = max(0, max((math.frexp(float(w))[1] for w in omega), default=0))
    n_bits = frac_bits + top + 64
    two_over_pi = _two_over_pi_fixed(n_bits)
    F = np.zeros((K + 1, omega.size), dtype=np.int64)
    modulus = (4 << frac_bits) - 1
    for j, w in enumerate(omega):
        num, den = float(w).as_integer_ratio()  # den is a power of two
        shift = n_bits + den.bit_length() - 1 - frac_bits
        phi = ((num * two_over_pi) >> shift) & modulus  # phi * 4096^K mod 4 * 4096^K
        for k in range(K + 1):
            F[k, j] = (phi >> (_LIMB_BITS * (K - k))) & (_LIMB - 1)
    return n_chunks, K, F.astype(np.int32)


@functools.lru_cache(maxsize=None)
def _half_pi_pieces(work: str) -> tuple[float, float, float]:
    r"""$\pi/2 = P_1 + P_2 + P_3$ with $P_1, P_2$ of `s` significant bits each (12 for
    float32 work, 26 for float64) and $P_3$ the rest rounded to the work dtype."""
    s = 12 if np.dtype(work) == np.float32 else 26
    bits = 3 * s + 80
    half_pi = _pi_fixed(bits) >> 1  # pi/2 * 2^bits, and pi/2 is in [1, 2)
    cut1, cut2 = bits - (s - 1), bits - (2 * s - 1)
    p1 = (half_pi >> cut1) << cut1
    p2 = ((half_pi - p1) >> cut2) << cut2
    p3 = half_pi - p1 - p2
    dt = np.dtype(work).type
    return dt(math.ldexp(p1, -bits)), dt(math.ldexp(p2, -bits)), dt(math.ldexp(p3, -bits))


# ---------------------------------------------------------------------------------------
# The algorithm, written once for NumPy (`xp=np`) and for traced JAX (`xp=jnp`)


def _mask_high(x, work: np.dtype, xp):
    """`x` with its low mantissa bits cleared: 12 significant bits left for float32,
    27 for float64 (the rest, `x - result`, is then exact and short)."""
    if work == np.float32:
        utype, mask = np.uint32, np.uint32(0xFFFFF000)
    else:
        utype, mask = np.uint64, np.uint64(0xFFFFFFFFFC000000)
    if xp is np:
        return (x.view(utype) & mask).view(work)
    return lax.bitcast_convert_type(lax.bitcast_convert_type(x, utype) & mask, work)


def _fast_two_sum(a, b):
    """`(s, e)` with `s + e = a + b` exactly, for `|a| >= |b|` (or `a = 0`)."""
    s = a + b
    return s, b - (s - a)


def _reduce(seq_length: int, dim: int, base: float, work: np.dtype, xp):
    r"""Quadrant `n` (int) and $r = (r_h, r_\ell)$ in `work`, all `(T, dim)`, with
    $t\hat\omega_j + (c \bmod 2)\,\pi/2 = n\pi/2 + r$ (mod $2\pi$) for column $c$,
    $j = \lfloor c/2 \rfloor$, $|r| \le \pi/4$ (steps 2 and 3 of the module
    documentation): entry $(t, c)$ of the table is then $\sin(n\pi/2 + r)$."""
    A, K, F = _quarter_turn_limbs(seq_length, dim, base, np.dtype(work).name)
    itype = np.int32
    if xp is np:
        t = np.arange(seq_length, dtype=itype)[:, None]
    else:
        t = lax.broadcasted_iota(itype, (seq_length, 1), 0)
    chunks = [(t >> (_LIMB_BITS * a)) & (_LIMB - 1) for a in range(A)]
    # One column per output column: frequency j = c // 2, and a quarter-turn phase c % 2
    # (cos = sin shifted by one quadrant). Computing on the (T, dim) grid directly keeps
    # the whole table one elementwise kernel (no interleaving of a sine and a cosine table,
    # which XLA would evaluate by recomputing the reduction for each).
    columns = np.arange(dim) // 2
    F = [xp.asarray(F[k][columns][None, :]) for k in range(K + 1)]
    phase = xp.asarray((np.arange(dim, dtype=itype) % 2)[None, :])
    # limb m collects t_a F_{m+a}: the terms with a > m + ... are multiples of 4096 >= 4
    L = []
    for m in range(K + 1):
        acc = None
        for a in range(A):
            if m + a <= K:
                term = chunks[a] * F[m + a]
                acc = term if acc is None else acc + term
        L.append(acc)
    for m in range(K, 0, -1):  # carries (all limbs are non-negative)
        L[m - 1] = L[m - 1] + (L[m] >> _LIMB_BITS)
        L[m] = L[m] & (_LIMB - 1)
    half = L[1] >> (_LIMB_BITS - 1)  # 1 where the fraction is >= 1/2
    n = (L[0] + half + phase) & 3
    # |x|: the fraction f, or 1 - f where f >= 1/2 (limbwise complement, then carries)
    G = [None] + [(_LIMB - 1) - L[m] for m in range(1, K)] + [_LIMB - L[K]]
    for m in range(K, 1, -1):
        G[m - 1] = G[m - 1] + (G[m] >> _LIMB_BITS)
        G[m] = G[m] & (_LIMB - 1)
    neg = half == 1
    mag = [None] + [xp.where(neg, G[m], L[m]) for m in range(1, K + 1)]
    # 24-bit words, exact in the work dtype; Horner with error-free sums (step 3)
    words = [
        ((mag[2 * i - 1] << _LIMB_BITS) | mag[2 * i]).astype(work) for i in range(1, K // 2 + 1)
    ]
    scale = work.type(2.0**-24)
    h, l = words[-1], xp.zeros_like(words[-1])
    for w in reversed(words[:-1]):
        h, e = _fast_two_sum(w, h * scale)
        l = e + l * scale
        h, l = _fast_two_sum(h, l)
    h, l = h * scale, l * scale  # x = h + l in [0, 1/2]
    # r = x * pi / 2 with an error-free leading product
    p1, p2, p3 = _half_pi_pieces(work.name)
    h1 = _mask_high(h, work, xp)
    h2 = h - h1
    lead = h1 * p1
    rest = (h1 * p2 + h2 * p1) + (h2 * p2 + (h * p3 + l * (p1 + p2)))
    rh, rl = _fast_two_sum(lead, rest)
    sign = xp.where(neg, work.type(-1.0), work.type(1.0))
    return n, rh * sign, rl * sign


def _sin_cos_float32(rh, rl, one, xp):
    r"""$(\sin r, \cos r)$ in float32 for $r = r_h + r_\ell$, $|r| \le \pi/4$ (step 4);
    `one` is an array of ones (see below)."""
    f = np.float32
    r1 = _mask_high(rh, np.dtype(np.float32), xp)
    r2 = rh - r1
    # r^2 = s + e: the leading part from exact products of the 12-bit halves only, so a
    # backend that contracts a multiply and an add into an FMA computes the same numbers
    # (an error-free product written as `rh * rh - s` would not survive that).
    s, e = _fast_two_sum(r1 * r1, f(2.0) * (r1 * r2))
    e = e + (r2 * r2 + f(2.0) * (rh * rl))
    # cos r = 1 - r^2/2 + r^4/24 - ...
    w = s * s * (f(1 / 24) + s * (f(-1 / 720) + s * (f(1 / 40320) + s * f(-1 / 3628800))))
    # XLA folds `(1 + b) - 1` to `b` (constants are reassociated), which would erase the
    # error term: the 1 is therefore an array the compiler cannot prove constant.
    ch, cl = _fast_two_sum(one, s * f(-0.5))
    cos = ch + (cl + (e * f(-0.5) + w))
    # sin r = r - r^3/6 + r^5/120 - ...
    tail = rh * s * s * (f(1 / 120) + s * (f(-1 / 5040) + s * (f(1 / 362880) + s * f(-1 / 39916800))))
    cube = (rh * s + (rh * e + rl * s)) * f(-1 / 6)
    sh, sl = _fast_two_sum(rh, cube)
    sin = sh + (sl + (rl + tail))
    return sin, cos


def _sin_cos_float64(rh, rl, one, xp):
    """$(\\sin r, \\cos r)$ in float64 from the backend's float64 `sin` and `cos`."""
    s, c = xp.sin(rh), xp.cos(rh)
    return s + rl * c, c - rl * s


def _table(seq_length: int, dim: int, base: float, work: np.dtype, xp):
    """The `(T, dim)` table in `work` (float32 or float64), computed with `xp`."""
    n, rh, rl = _reduce(seq_length, dim, base, work, xp)
    one = (n >= 0).astype(work)  # ones, not a compile-time constant (see _sin_cos_float32)
    sin_r, cos_r = (_sin_cos_float32 if work == np.float32 else _sin_cos_float64)(rh, rl, one, xp)

    value = xp.where((n & 1) == 1, cos_r, sin_r)  # sin(n pi/2 + r)
    return xp.where((n & 2) == 2, -value, value)


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

    def __call__(self, x: Float[Array, "... T dim"]) -> Float[Array, "... T dim"]:
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
        if not _is_small(shape[-2], self.dim):
            return _add_traced_table(x, dim=self.dim, base=self.base)
        # A NumPy constant of the input's dtype: added by the same computation, so the
        # result is placed wherever `x` is (and is a small compile-time constant under jit).
        table = _small_table(shape[-2], self.dim, self.base).astype(dtype)
        # Explicit rank match for the leading axes (no implicit rank promotion).
        return x + table.reshape((1,) * (len(shape) - 2) + table.shape)

    def __repr__(self) -> str:
        return f"PositionalEncoding(dim={self.dim}, base={self.base})"
