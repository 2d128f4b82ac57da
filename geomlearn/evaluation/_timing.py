"""Wall time of compiled computations, measured after a warm-up call of each."""

from __future__ import annotations

import time

import jax
import numpy as np

__all__ = ["timed", "timed_interleaved"]


def timed(fn, repeats: int = 1):
    """`(fn(), seconds)`: `fn` is called once to compile (a warm-up), then timed on
    `repeats` further calls until each result is ready; `seconds` is their median (a
    computation of a few milliseconds varies by tens of per cent between calls)."""
    jax.block_until_ready(fn())
    times = []
    for _ in range(max(1, int(repeats))):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return out, float(np.median(times))


def timed_interleaved(fns, repeats: int = 5):
    """`[seconds, ...]`: the median wall time of each compiled computation in `fns`, timed
    in turns (`fns[0]`, `fns[1]`, …, then again, `repeats` rounds) after one warm-up call
    of each, so that a change of the machine's load during the measurement falls on all
    of them alike — for a ratio of two times (a speed-up) of computations of a few tenths
    of a second."""
    for fn in fns:
        jax.block_until_ready(fn())
    times = [[] for _ in fns]
    for _ in range(max(1, int(repeats))):
        for fn, row in zip(fns, times):
            t0 = time.perf_counter()
            jax.block_until_ready(fn())
            row.append(time.perf_counter() - t0)
    return [float(np.median(row)) for row in times]
