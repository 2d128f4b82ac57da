r"""The runs of a work–precision comparison in segments, and its reference.

A run of $N$ data steps is made in calls of `segment` $= \lceil N / $ `SEGMENTS` $\rceil$
steps each (one compiled shape serves every call and every number of substeps), so that
it can be timed on the calls after the first (which compiles) and cut short at a
deadline.

**Reference** (`reference`): Yoshida's 6th-order method when the system is separable
(explicit, the method that makes the built-in data), else 6th-order Gauss–Legendre, with
$s = $ `REFERENCE_FIRST_SUBSTEPS`, $2s, 4s, \dots$ substeps per data step. With a time
budget $b$ its first run stops at the first segment end after its calls but the first
(which compiles) have taken $b/8$ seconds: the horizon becomes $N_b$, the steps it
reached (times here leave the compilation out). Successive runs $r^{(s/2)}, r^{(s)}$ agree at step
$t$ to $a_s(t) = \max_i \|r^{i,(s)}_t - r^{i,(s/2)}_t\|_\tau / \|r^{i,(s)}_t\|_\tau$; the
refinement ends when $a_s(N_b) \le$ `REFERENCE_TOLERANCE`, or $a_s(N_b) > a_{s/2}(N_b) /
$ `REFERENCE_MIN_SHRINK` (the agreement no longer falls at the method's order: round-off,
or chaos amplifying it) once $a_s(1) \le$ `REFERENCE_RESOLVED` (before, a run at a step
beyond its stability limit, as a long stride asks, agrees with the next by chance), or
$2s$ would pass `REFERENCE_MAX_SUBSTEPS`, or the next run
(twice the last one's time) would end after $b/2$ seconds (at least two runs are made). Where $a_s(N_b) >$
`REFERENCE_RESOLVED` the reference does not resolve $N_b$: the horizon becomes the last
step $N_r$ up to which $a_s(t) \le$ `REFERENCE_RESOLVED` at every step. The reference's
error $e_r$ is that of the last run $r^{(s)}$: $a_s / (2^p - 1)$ for a method of order
$p$ where the last halving shrank the agreement at least `REFERENCE_MIN_SHRINK`-fold
(Richardson: the truncation error dominates), else $a_s$ (a bound), at the final
horizon.
"""

from __future__ import annotations

import dataclasses
import math
import time

import jax
import jax.numpy as jnp
import numpy as np

from ..integrators import GaussLegendre6, IntegrationError, Yoshida6, integrate

__all__ = ["SEGMENTS", "REFERENCE_TOLERANCE", "REFERENCE_FIRST_SUBSTEPS",
           "REFERENCE_MAX_SUBSTEPS", "REFERENCE_MIN_SHRINK", "REFERENCE_RESOLVED", "Reference",
           "reference", "segmented", "relative", "segment_length"]

SEGMENTS = 10
"""A run of the comparison is made in this many calls (fewer for a shorter horizon)."""
REFERENCE_TOLERANCE = 1e-10
"""Two successive references that agree this closely at the horizon end its refinement."""
REFERENCE_FIRST_SUBSTEPS = 1
"""The reference's first number of substeps per data step."""
REFERENCE_MAX_SUBSTEPS = 128
"""The reference's largest number of substeps per data step."""
REFERENCE_MIN_SHRINK = 8.0
"""Halving the substeps must shrink the agreement at least this much (a 6th-order method's
truncation error shrinks 64-fold), else the reference is at its limit."""
REFERENCE_RESOLVED = 1e-3
"""The horizon is cut to where successive references agree at least this closely."""


@dataclasses.dataclass(frozen=True)
class Reference:
    """The reference states `(B, horizon + 1, d)`, its `substeps`, `error` $e_r$,
    `method` (name), `horizon`, `cut` (why it is shorter than asked: `"budget"`,
    `"reference"`, or `None`) and `segment` (the steps of its calls)."""

    states: jax.Array
    substeps: int
    error: float
    method: str
    horizon: int
    cut: str | None
    segment: int


def relative(z, r, weights) -> np.ndarray:
    """Per trajectory (and step), $\\|z - r\\|_\\tau / \\|r\\|_\\tau$ over the last axis
    (`inf` where not finite)."""
    z, r = np.asarray(z, dtype=np.float64), np.asarray(r, dtype=np.float64)
    size = np.linalg.norm(r * weights, axis=-1)
    err = np.linalg.norm((z - r) * weights, axis=-1) / np.where(size > 0, size, 1.0)
    return np.where(np.isfinite(err), err, np.inf)


def segment_length(horizon: int) -> int:
    """The steps of one call of a run of `horizon` steps."""
    return -(-horizon // SEGMENTS)


def segmented(run, z0, n_steps: int, segment: int, allowance: float | None = None):
    """`(states (B, m + 1, d), seconds of each call)` of `run(z)` (states `(B, segment + 1,
    d)` from `z`) called until `m = n_steps` steps, or, once the calls after the first
    (which may compile) have taken `allowance` seconds, at that segment end (then `m <
    n_steps`)."""
    parts, seconds, z, done = [jnp.asarray(z0)[:, None]], [], jnp.asarray(z0), 0
    while done < n_steps:
        t0 = time.perf_counter()
        out = jax.block_until_ready(run(z))
        seconds.append(time.perf_counter() - t0)
        parts.append(out[:, 1:])
        z, done = out[:, -1], done + segment
        if allowance is not None and sum(seconds[1:]) > allowance:
            break
    return jnp.concatenate(parts, axis=1)[:, :min(done, n_steps) + 1], seconds


def running_seconds(seconds) -> float:
    """The time of a segmented run without its compilation: every call timed as the
    median of the calls after the first (the first alone where there is one)."""
    return float(np.median(seconds[1:] if len(seconds) > 1 else seconds) * len(seconds))


def _method(system):
    """Yoshida 6 for a separable system, else Gauss–Legendre 6."""
    try:
        Yoshida6().check_system(system)
    except ValueError:
        return GaussLegendre6()
    return Yoshida6()


def _first(system, method, z0, dt, horizon, segment, allowance):
    """`(states, s, running seconds)` of the first run that does not fail, from
    `REFERENCE_FIRST_SUBSTEPS` substeps doubled on failure (cut after `allowance`)."""
    s = REFERENCE_FIRST_SUBSTEPS
    while True:
        try:
            states, seconds = segmented(
                lambda z: integrate(system, z, dt, segment, method=method, substeps=s),
                z0, horizon, segment, allowance)
            return states, s, running_seconds(seconds)
        except IntegrationError as e:
            if 2 * s > REFERENCE_MAX_SUBSTEPS:
                raise IntegrationError(f"the reference ({method.name}) failed with up to {s} "
                                       f"substeps per data step: {e}") from None
            s *= 2


def reference(system, z0, dt: float, horizon: int, weights, budget: float | None) -> Reference:
    """The reference of the module documentation from the initial states `z0` `(B, d)`
    (`budget` in seconds, `None` for none)."""
    method, segment = _method(system), segment_length(horizon)
    states, s, seconds = _first(system, method, z0, dt, horizon, segment,
                                None if budget is None else budget / 8)
    n, spent = states.shape[1] - 1, seconds
    agreement, previous, curve = math.inf, None, None
    while 2 * s <= REFERENCE_MAX_SUBSTEPS:
        if curve is not None and budget is not None and spent + 2 * seconds > budget / 2:
            break
        s2 = 2 * s
        try:
            finer, calls = segmented(
                lambda z: integrate(system, z, dt, segment, method=method, substeps=s2),
                z0, n, segment)
        except IntegrationError:
            break
        seconds = running_seconds(calls)
        spent += seconds
        curve = np.max(relative(states, finer, weights), axis=0)
        previous, agreement, states, s = agreement, float(curve[-1]), finer, s2
        # until the runs agree on the first step, one of them is beyond its stability
        # limit or far from its order, so a lack of shrinking says nothing yet
        settled = curve[min(1, curve.size - 1)] <= REFERENCE_RESOLVED
        if agreement <= REFERENCE_TOLERANCE or (settled and agreement > previous / REFERENCE_MIN_SHRINK):
            break
    if curve is None:
        raise IntegrationError(f"the reference ({method.name}) could not be refined beyond {s} "
                               "substeps per data step")
    cut = "budget" if n < horizon else None
    error = agreement
    if previous >= REFERENCE_MIN_SHRINK * agreement:  # inf ≥ x: one agreement, a bound
        error = agreement if math.isinf(previous) else agreement / (2.0**method.order - 1.0)
    if agreement > REFERENCE_RESOLVED:
        n = _resolved_until(curve)
        if n == 0:
            raise IntegrationError(
                f"the reference ({method.name}, {s} substeps per data step) does not resolve "
                f"even the first step: successive refinements agree to {curve[1]:.2g}")
        states, error, cut = states[:, :n + 1], float(curve[n]), "reference"
    return Reference(states, s, error, method.name, n, cut, segment)


def _resolved_until(curve) -> int:
    """The last step up to which every agreement of `curve` (step 0 first) is at most
    `REFERENCE_RESOLVED`."""
    above = np.nonzero(curve > REFERENCE_RESOLVED)[0]
    return int(above[0]) - 1 if above.size else len(curve) - 1
