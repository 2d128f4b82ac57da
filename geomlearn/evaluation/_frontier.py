"""The points of a work–precision diagram, their frontier and the two ratios that
compare a model with the classical runs (pure functions of errors and throughputs)."""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

__all__ = ["WorkPoint", "Comparison", "compare", "pareto_frontier", "ratio", "times",
           "SPEED_TOLERANCE", "as_fast"]

SPEED_TOLERANCE = 0.1
"""Throughputs that differ by less than this fraction are the same cost: a throughput is
the median of a few timed calls, and repeated measurements on one machine differ by
this much. A tie in cost goes to the classical run."""


@dataclasses.dataclass(frozen=True)
class WorkPoint:
    """One run of a work–precision diagram: the model's or a classical method's.

    **Fields:** `method` (the integrator's name, or the model's class name), `k` (data
    steps are taken in `k` steps of `h = dt / k`; `None` for the model), `h`,
    `error_median`, `error_worst` (the relative state error at the horizon, over
    trajectories; `inf` for a failed run), `energy_error_median`, `energy_error_worst`
    (`None` without an energy invariant), `states_per_second`.
    """

    method: str
    k: int | None
    h: float
    error_median: float
    error_worst: float
    energy_error_median: float | None
    energy_error_worst: float | None
    states_per_second: float

    @property
    def failed(self) -> bool:
        """Whether the run did not reach the horizon (its error is not finite)."""
        return not math.isfinite(self.error_worst)

    def as_dict(self) -> dict:
        """The fields as a JSON-able dict, with `failed`."""
        return {**dataclasses.asdict(self), "failed": self.failed}

    def label(self) -> str:
        """`"name (h = Δt/k)"`, how a verdict names the run."""
        step = "Δt" if self.k in (None, 1) else f"Δt/{self.k}"
        return f"{self.method} (h = {step})"


def ratio(a: float, b: float) -> float:
    """`a / b` with `x/0 = inf` for `x > 0`, `0/0 = inf/inf = 1`."""
    if a == b:
        return 1.0
    return math.inf if b == 0 else a / b


def pareto_frontier(points) -> tuple[WorkPoint, ...]:
    """The points of finite error that no other point beats in both error and throughput
    (at least as good in both, better in one), fastest first."""
    kept, best = [], math.inf
    for p in sorted(points, key=lambda p: (-p.states_per_second, p.error_worst)):
        if p.error_worst < best:  # more accurate than every faster point (never inf)
            kept.append(p)
            best = p.error_worst
    return tuple(kept)


def as_fast(point: WorkPoint, model: WorkPoint) -> bool:
    r"""Whether `point` is at least as fast as `model` within `SPEED_TOLERANCE`: its
    throughput $v \ge v_m / (1 + $ `SPEED_TOLERANCE`$)$."""
    return point.states_per_second * (1.0 + SPEED_TOLERANCE) >= model.states_per_second


class Comparison(NamedTuple):
    """What `compare` finds: the two ratios and the classical runs behind them
    (`equal_cost`: the most accurate run at least as fast as the model, `as_fast`;
    `equal_error`: the fastest run at least as accurate; `fastest`: the fastest run),
    each `None` where there is none."""

    frontier_ratio: float | None
    equal_error_speedup: float | None
    equal_cost: WorkPoint | None
    equal_error: WorkPoint | None
    fastest: WorkPoint | None


def compare(model: WorkPoint, points) -> Comparison:
    """The ratios of the module documentation for the model's point against the classical
    `points`: a pure function of the errors and throughputs."""
    points = list(points)
    fast = [p for p in points if as_fast(p, model)]
    equal_cost = min(fast, key=lambda p: (p.error_worst, -p.states_per_second), default=None)
    accurate = [p for p in points if not p.failed and p.error_worst <= model.error_worst]
    equal_error = max(accurate, key=lambda p: (p.states_per_second, -p.error_worst),
                      default=None)
    fastest = max(points, key=lambda p: (p.states_per_second, -p.error_worst), default=None)
    return Comparison(
        frontier_ratio=(None if equal_cost is None
                        else ratio(equal_cost.error_worst, model.error_worst)),
        equal_error_speedup=(None if equal_error is None
                             else ratio(model.states_per_second, equal_error.states_per_second)),
        equal_cost=equal_cost, equal_error=equal_error, fastest=fastest)


def times(x: float) -> str:
    """A ratio for a sentence, to two significant digits: `38×`, `5.1×`, `1,200×`, `∞×`."""
    if not math.isfinite(x):
        return "∞×"
    return f"{float(f'{x:.2g}'):,.0f}×" if x >= 10 else f"{x:.2g}×"
