r"""The sinusoidal table at real times: entry $(i, 2j)$ is $\sin(t_i\hat\omega_j)$ and
entry $(i, 2j+1)$ is $\cos(t_i\hat\omega_j)$ for the exact value of each time $t_i$ (a
float of its own dtype) and the float64 frequencies $\hat\omega_j$ of
`geomlearn.layers.positional`.

**Argument reduction.** As for integer positions, the angle is counted in quarter turns,
$t\varphi_j$ with $\varphi_j = \hat\omega_j \cdot 2/\pi$, and reduced modulo 4 without
rounding the product as a whole. By parity, $\sin(t\hat\omega) = -\sin(|t|\hat\omega)$
and $\cos(t\hat\omega) = \cos(|t|\hat\omega)$: the table is computed at $|t|$ and its
sine columns negated where $t < 0$ (exactly). Two cases, both evaluated elementwise and
selected per time:

1. $|t| \ge 1$. A float $|t| \ge 1$ with a $p$-bit significand is a multiple of
   $2^{-S}$, $S = p - 1$ ($23$ for float32 times, $52$ for float64), so
   $N = |t|\,2^{S}$ is an **exact integer** below $2^{31+S}$ for $|t| < 2^{31}$. Its
   12-bit chunks are read from the float without rounding ($\lfloor |t| 2^{S-12a}
   \rfloor$, power-of-two scalings and floors are exact), and
   $|t|\varphi_j = N \cdot (\varphi_j 2^{-S})$ is reduced modulo 4 by the integer limb
   products of the integer positions, with the limbs of $\varphi_j 2^{-S}$ (the same
   fixed-point $2/\pi$, shifted by $S$ bits) and as many limbs as $N$'s $31 + S$ bits
   ask for: the quadrant $n$ and the fraction $x \in [-\tfrac12, \tfrac12]$ are exact up
   to the truncation of the limbs, at most $2^{-60}$ (float32 windows) or $2^{-96}$
   (float64) of the smallest nonzero $\varphi_j$.
2. $|t| < 1$. The angle is below one radian, no turn to remove: $x = |t|\varphi_j$ in
   double-word arithmetic, $\varphi_j = \Phi_1 + \Phi_2 + \Phi_3$ with $\Phi_1, \Phi_2$
   of 12 (float32 work) or 26 (float64) significant bits, so that the leading products
   with the halves of $|t|$ (split by a bit mask) are exact; relative error about
   $2^{-40}$ (float32 work) or $2^{-78}$ (float64). Where $x \ge \tfrac12$, one quarter
   turn is moved into $n$ ($x - 1$ is exact by Sterbenz's lemma). A time below
   $2^{-32}$ ($2^{-256}$) is scaled by $2^{64}$ ($2^{512}$) for the product and the
   result scaled back: backends that flush subnormal numbers lose no partial product.

Then $r = x\pi/2$ and $\sin(n\pi/2 + r)$ exactly as for integer positions. The times
enter in their own dtype (float16 and bfloat16 widened to float32, integers converted
to JAX's default float); the work is in the window's precision (float32 for float32,
float16 and bfloat16 windows; float64 for float64), a float64 time being carried as a
double-word float32 in float32 work. Only integer and elementwise floating-point
operations: every backend, `jit`, `vmap`; the table depends on the times alone, so it
is a constant of the window.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import first_not_increasing
from ._angle_reduction import (
    LIMB,
    LIMB_BITS,
    column_phase,
    fast_two_sum,
    angular_frequencies,
    half_pi_pieces,
    quadrant_table,
    quarter_turn_limbs,
    reduce_chunks,
    times_pieces,
    two_over_pi_fixed,
)

__all__ = ["MAX_TIME", "check_times", "table_at_times", "add_table_at_times"]

#: Times must satisfy $|t| <$ `MAX_TIME` ($2^{31}$, the range of integer positions).
MAX_TIME = 2.0**31
_MAX_TIME_BITS = 31
# Times below 2^(-b/2) are scaled by 2^b in the product |t| phi (and the result back).
_TINY_SCALE_BITS = {np.dtype(np.float32): 64, np.dtype(np.float64): 512}


def _time_dtype(times) -> np.dtype:
    """The float dtype the times are read in (see the module documentation)."""
    dtype = np.dtype(jnp.result_type(times))
    if jnp.issubdtype(dtype, jnp.integer):
        return np.dtype(jnp.result_type(float))
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def check_times(times, T: int, owner: str):
    """`times` as given, after checking it is a real `(T,)` array; when its values are
    concrete (not traced), also finite, below `MAX_TIME` in magnitude and strictly
    increasing. A one-line `ValueError` (`TypeError` for a non-real dtype) naming what
    `owner` expects and what came."""
    shape = tuple(jnp.shape(times))
    if shape != (T,):
        raise ValueError(f"{owner} expects times of shape ({T},), one per row of the "
                         f"window, got shape {shape}")
    dtype = jnp.result_type(times)
    if not (jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer)):
        raise TypeError(f"{owner} expects real times (a float or integer dtype), got {dtype}")
    if isinstance(times, jax.core.Tracer):
        return times
    values = np.asarray(times).astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(values) | (np.abs(values) >= MAX_TIME))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{owner} expects finite times of magnitude below 2**31, "
                         f"got times[{i}] = {values[i]}")
    i = first_not_increasing(values)
    if i is not None:
        raise ValueError(f"{owner} expects strictly increasing times, got "
                         f"times[{i + 1}] = {values[i + 1]} after times[{i}] = {values[i]}")
    return times


@functools.lru_cache(maxsize=64)
def _phi_pieces(dim: int, base: float, work: str) -> tuple[np.ndarray, ...]:
    r"""$\varphi_c = \Phi_1 + \Phi_2 + \Phi_3$ per column `c` (frequency $j = c/2$), three
    `(1, dim)` arrays of `work`: $\Phi_1, \Phi_2$ of `s` significant bits (12 for float32,
    26 for float64), $\Phi_3$ the rest rounded."""
    s = 12 if np.dtype(work) == np.float32 else 26
    bits = 240
    two_over_pi = two_over_pi_fixed(bits + 64)
    pieces = np.zeros((3, dim), np.float64)
    for c, w in enumerate(np.repeat(angular_frequencies(dim, base), 2)[:dim]):
        num, den = float(w).as_integer_ratio()
        phi = (num * two_over_pi) >> (den.bit_length() - 1 + 64)  # phi * 2^bits
        cut1 = max(0, phi.bit_length() - s)
        cut2 = max(0, cut1 - s)
        p1 = (phi >> cut1) << cut1
        p2 = ((phi - p1) >> cut2) << cut2
        for k, p in enumerate((p1, p2, phi - p1 - p2)):
            pieces[k, c] = math.ldexp(float(p), -bits)
    return tuple(p.astype(work)[None, :] for p in pieces)


def _split_time(abs_t, work: np.dtype):
    """`|t|` as a double-word `(hi, lo)` of `work` (exact for float32 times; a float64
    time in float32 work keeps 48 bits)."""
    hi = abs_t.astype(work)
    if abs_t.dtype == np.float64 and work == np.float32:
        return hi, (abs_t - hi.astype(np.float64)).astype(work)
    return hi, jnp.zeros_like(hi)


def _chunks(abs_t, scale_bits: int, n_chunks: int):
    r"""The 12-bit chunks `(T, 1)` int32 of $N = \lfloor |t| 2^S \rfloor$ (exact floors
    of power-of-two scalings in the times' dtype)."""
    tdtype = abs_t.dtype.type
    floors = [jnp.floor(abs_t * tdtype(2.0 ** (scale_bits - LIMB_BITS * a)))
              for a in range(n_chunks + 1)]
    return [(floors[a] - floors[a + 1] * tdtype(LIMB)).astype(np.int32)
            for a in range(n_chunks)]


def table_at_times(times, dim: int, base: float, dtype) -> jax.Array:
    """The `(T, dim)` table at the real `times` `(T,)`, in `dtype` (traced JAX; the
    module documentation gives the maths). `times` are not checked here."""
    dtype = np.dtype(dtype)
    work = np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)
    tdtype = _time_dtype(times)
    t = jnp.asarray(times).astype(tdtype)[:, None]
    if t.shape[0] == 0:
        return jnp.zeros((0, dim), dtype)
    abs_t = jnp.abs(t)
    # |t| >= 1: the exact integer N = |t| 2^S and the limbs of phi 2^-S
    scale_bits = np.finfo(tdtype).nmant
    A, K, F = quarter_turn_limbs(_MAX_TIME_BITS + scale_bits, dim, base, work.name, scale_bits)
    n_big, rh_big, rl_big = reduce_chunks(_chunks(abs_t, scale_bits, A), K, F, dim, work, jnp)
    # |t| < 1: x = |t| phi in double-word arithmetic, one quarter turn moved out if >= 1/2;
    # a tiny |t| is scaled up first (backends may flush subnormal partial products)
    wide = np.float64 if np.float64 in (tdtype, work) else np.float32
    up = _TINY_SCALE_BITS[work]
    u = abs_t.astype(wide)
    tiny = u < wide(2.0 ** (-up // 2))
    th, tl = _split_time(u * jnp.where(tiny, wide(2.0**up), wide(1.0)), work)
    xh, xl = times_pieces(th, tl, _phi_pieces(dim, base, work.name), work, jnp)
    turn = (xh >= work.type(0.5)) & ~tiny
    one = (abs_t >= 0).astype(work)  # ones XLA cannot fold (see _sin_cos_float32)
    xh, xl = fast_two_sum(jnp.where(turn, xh - one, xh), xl)
    rh, rl = times_pieces(xh, xl, half_pi_pieces(work.name), work, jnp)
    down = jnp.where(tiny, work.type(2.0**-up), work.type(1.0))
    rh, rl = rh * down, rl * down
    n_small = (turn.astype(np.int32) + column_phase(dim, jnp)) & 3
    small = abs_t < 1
    n = jnp.where(small, n_small, n_big)
    table = quadrant_table(n, jnp.where(small, rh, rh_big), jnp.where(small, rl, rl_big),
                            work, jnp)
    sine = column_phase(dim, jnp) == 0
    return jnp.where(sine & (t < 0), -table, table).astype(dtype)


@functools.partial(jax.jit, static_argnames=("dim", "base"))
def add_table_at_times(x, times, *, dim: int, base: float):
    """`x + P(times)` for `x` `(..., T, dim)`, the table computed in the same program (on
    `x`'s device), rounded once to `x`'s dtype."""
    table = table_at_times(times, dim, base, x.dtype)
    return x + table.reshape((1,) * (x.ndim - 2) + table.shape)
