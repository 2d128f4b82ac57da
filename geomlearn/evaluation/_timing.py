"""Wall time of a compiled computation, measured on a second call."""

from __future__ import annotations

import time

import jax
import numpy as np

__all__ = ["timed"]


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
