r"""Exact argument reduction for the sinusoidal tables (the algorithm of
`geomlearn.layers.positional`, whose module documentation gives the maths).

The pieces shared by the table at integer positions and the table at real times
(`geomlearn.layers._real_angles`): $2/\pi$ and $\pi/2$ in fixed point, the 12-bit limbs
of the quarter-turn counts $\varphi_j 2^{-S}$ of the frequencies, the integer limb
products reducing $N\varphi_j 2^{-S}$ modulo 4 for integers $N = \sum_a N_a 4096^a$, the
error-free products and sums, and $\sin$/$\cos$ on $[-\pi/4, \pi/4]$. Every function is
written once for NumPy (`xp=np`) and for traced JAX (`xp=jnp`).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from jax import lax

LIMB_BITS = 12
LIMB = 1 << LIMB_BITS
# Bits of precision asked of the reduced angle, relative to the smallest nonzero angle.
_GUARD_BITS = {np.dtype(np.float32): 60, np.dtype(np.float64): 96}

def angular_frequencies(dim: int, base: float) -> np.ndarray:
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
def two_over_pi_fixed(bits: int) -> int:
    r"""$\lfloor (2/\pi)\, 2^{\text{bits}} \rfloor$ (to within a unit)."""
    guard = 64
    return (1 << (2 * (bits + guard) + 1)) // _pi_fixed(bits + guard) >> guard


@functools.lru_cache(maxsize=64)
def quarter_turn_limbs(t_bits: int, dim: int, base: float, work: str, scale_bits: int = 0):
    r"""`(A, K, F)`: `A` 12-bit chunks of an integer $N < 2^{t_\text{bits}}$, and the limbs
    `F` `(K + 1, J)` int32 of $\varphi_j 2^{-S} \bmod 4$ ($S$ = `scale_bits`,
    $\varphi_j = \hat\omega_j \cdot 2/\pi$) with $K$ even,
    $\varphi_j 2^{-S} \approx \sum_k F_{kj} 4096^{-k}$ (truncated)."""
    omega = angular_frequencies(dim, base)
    n_chunks = -(-t_bits // LIMB_BITS)
    # Smallest nonzero quarter-turn count, to scale the precision asked for.
    positive = omega[omega > 0]
    phi_min = float(positive.min()) * 2 / math.pi if positive.size else 1.0
    small = max(0, math.ceil(-math.log2(phi_min))) if phi_min > 0 else 0
    bits = t_bits + _GUARD_BITS[np.dtype(work)] + small
    K = -(-bits // LIMB_BITS)
    K += K % 2  # limbs are paired into 24-bit words later
    frac_bits = LIMB_BITS * K
    top = max(0, max((math.frexp(float(w))[1] for w in omega), default=0))
    n_bits = frac_bits + top + 64
    two_over_pi = two_over_pi_fixed(n_bits)
    F = np.zeros((K + 1, omega.size), dtype=np.int64)
    modulus = (4 << frac_bits) - 1
    for j, w in enumerate(omega):
        num, den = float(w).as_integer_ratio()  # den is a power of two
        shift = n_bits + den.bit_length() - 1 - frac_bits + scale_bits
        phi = ((num * two_over_pi) >> shift) & modulus  # phi * 4096^K mod 4 * 4096^K
        for k in range(K + 1):
            F[k, j] = (phi >> (LIMB_BITS * (K - k))) & (LIMB - 1)
    return n_chunks, K, F.astype(np.int32)


@functools.lru_cache(maxsize=None)
def half_pi_pieces(work: str) -> tuple[float, float, float]:
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


def fast_two_sum(a, b):
    """`(s, e)` with `s + e = a + b` exactly, for `|a| >= |b|` (or `a = 0`)."""
    s = a + b
    return s, b - (s - a)


def reduce_angles(seq_length: int, dim: int, base: float, work: np.dtype, xp):
    r"""Quadrant `n` (int) and $r = (r_h, r_\ell)$ in `work`, all `(T, dim)`, with
    $t\hat\omega_j + (c \bmod 2)\,\pi/2 = n\pi/2 + r$ (mod $2\pi$) for column $c$,
    $j = \lfloor c/2 \rfloor$, $|r| \le \pi/4$, at the integer positions
    $t = 0, \dots, T-1$: entry $(t, c)$ of the table is then $\sin(n\pi/2 + r)$."""
    t_bits = max(1, int(seq_length - 1).bit_length())
    A, K, F = quarter_turn_limbs(t_bits, dim, base, np.dtype(work).name)
    itype = np.int32
    if xp is np:
        t = np.arange(seq_length, dtype=itype)[:, None]
    else:
        t = lax.broadcasted_iota(itype, (seq_length, 1), 0)
    chunks = [(t >> (LIMB_BITS * a)) & (LIMB - 1) for a in range(A)]
    return reduce_chunks(chunks, K, F, dim, work, xp)


def column_phase(dim: int, xp):
    """`(1, dim)` int32: the quarter-turn phase `c % 2` of column `c` (cos = shifted sin)."""
    return xp.asarray((np.arange(dim, dtype=np.int32) % 2)[None, :])


def reduce_chunks(chunks, K: int, F: np.ndarray, dim: int, work: np.dtype, xp):
    r"""`(n, r_h, r_\ell)` as `reduce_angles`, for the integers $N = \sum_a N_a 4096^a$ given by
    their chunks `(T, 1)` int32 and the limbs `F` of `quarter_turn_limbs` (steps 2 and 3
    of the module documentation of `geomlearn.layers.positional`)."""
    A = len(chunks)
    # One column per output column: frequency j = c // 2, and a quarter-turn phase c % 2
    # (cos = sin shifted by one quadrant). Computing on the (T, dim) grid directly keeps
    # the whole table one elementwise kernel (no interleaving of a sine and a cosine table,
    # which XLA would evaluate by recomputing the reduction for each).
    columns = np.arange(dim) // 2
    F = [xp.asarray(F[k][columns][None, :]) for k in range(K + 1)]
    phase = column_phase(dim, xp)
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
        L[m - 1] = L[m - 1] + (L[m] >> LIMB_BITS)
        L[m] = L[m] & (LIMB - 1)
    half = L[1] >> (LIMB_BITS - 1)  # 1 where the fraction is >= 1/2
    n = (L[0] + half + phase) & 3
    # |x|: the fraction f, or 1 - f where f >= 1/2 (limbwise complement, then carries)
    G = [None] + [(LIMB - 1) - L[m] for m in range(1, K)] + [LIMB - L[K]]
    for m in range(K, 1, -1):
        G[m - 1] = G[m - 1] + (G[m] >> LIMB_BITS)
        G[m] = G[m] & (LIMB - 1)
    neg = half == 1
    mag = [None] + [xp.where(neg, G[m], L[m]) for m in range(1, K + 1)]
    # 24-bit words, exact in the work dtype; Horner with error-free sums (step 3)
    words = [
        ((mag[2 * i - 1] << LIMB_BITS) | mag[2 * i]).astype(work) for i in range(1, K // 2 + 1)
    ]
    scale = work.type(2.0**-24)
    h, l = words[-1], xp.zeros_like(words[-1])
    for w in reversed(words[:-1]):
        h, e = fast_two_sum(w, h * scale)
        l = e + l * scale
        h, l = fast_two_sum(h, l)
    h, l = h * scale, l * scale  # x = h + l in [0, 1/2]
    rh, rl = times_pieces(h, l, half_pi_pieces(work.name), work, xp)  # r = x pi / 2
    sign = xp.where(neg, work.type(-1.0), work.type(1.0))
    return n, rh * sign, rl * sign


def times_pieces(h, l, pieces, work: np.dtype, xp):
    r"""$(h + \ell)(P_1 + P_2 + P_3)$ as a double-word `(hi, lo)` in `work`, the leading
    product $h^{(1)} P_1$ error-free ($h$ split by a bit mask; $P_1, P_2$ of 12 or 26
    significant bits, see `half_pi_pieces`), for any sign of $h$."""
    p1, p2, p3 = pieces
    h1 = _mask_high(h, work, xp)
    h2 = h - h1
    lead = h1 * p1
    rest = (h1 * p2 + h2 * p1) + (h2 * p2 + (h * p3 + l * (p1 + p2)))
    return fast_two_sum(lead, rest)


def _sin_cos_float32(rh, rl, one, xp):
    r"""$(\sin r, \cos r)$ in float32 for $r = r_h + r_\ell$, $|r| \le \pi/4$ (step 4);
    `one` is an array of ones (see below)."""
    f = np.float32
    r1 = _mask_high(rh, np.dtype(np.float32), xp)
    r2 = rh - r1
    # r^2 = s + e: the leading part from exact products of the 12-bit halves only, so a
    # backend that contracts a multiply and an add into an FMA computes the same numbers
    # (an error-free product written as `rh * rh - s` would not survive that).
    s, e = fast_two_sum(r1 * r1, f(2.0) * (r1 * r2))
    e = e + (r2 * r2 + f(2.0) * (rh * rl))
    # cos r = 1 - r^2/2 + r^4/24 - ...
    w = s * s * (f(1 / 24) + s * (f(-1 / 720) + s * (f(1 / 40320) + s * f(-1 / 3628800))))
    # XLA folds `(1 + b) - 1` to `b` (constants are reassociated), which would erase the
    # error term: the 1 is therefore an array the compiler cannot prove constant.
    ch, cl = fast_two_sum(one, s * f(-0.5))
    cos = ch + (cl + (e * f(-0.5) + w))
    # sin r = r - r^3/6 + r^5/120 - ...
    tail = rh * s * s * (f(1 / 120) + s * (f(-1 / 5040) + s * (f(1 / 362880) + s * f(-1 / 39916800))))
    cube = (rh * s + (rh * e + rl * s)) * f(-1 / 6)
    sh, sl = fast_two_sum(rh, cube)
    sin = sh + (sl + (rl + tail))
    return sin, cos


def _sin_cos_float64(rh, rl, one, xp):
    """$(\\sin r, \\cos r)$ in float64 from the backend's float64 `sin` and `cos`."""
    s, c = xp.sin(rh), xp.cos(rh)
    return s + rl * c, c - rl * s



def quadrant_table(n, rh, rl, work: np.dtype, xp):
    r"""$\sin(n\pi/2 + r)$, `r = rh + rl` with $|r| \le \pi/4$ (step 4), in `work`."""
    one = (n >= 0).astype(work)  # ones, not a compile-time constant (see _sin_cos_float32)
    sin_r, cos_r = (_sin_cos_float32 if work == np.float32 else _sin_cos_float64)(rh, rl, one, xp)

    value = xp.where((n & 1) == 1, cos_r, sin_r)  # sin(n pi/2 + r)
    return xp.where((n & 2) == 2, -value, value)
