"""Wall time of a compiled computation, measured on a second call."""

from __future__ import annotations

import time

import jax

__all__ = ["timed"]


def timed(fn):
    """`(fn(), seconds)`: `fn` is called once to compile (a warm-up), then timed on a
    second call until its result is ready."""
    jax.block_until_ready(fn())
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    return out, time.perf_counter() - t0
