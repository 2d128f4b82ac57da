r"""Work–precision: is a learned integrator more accurate than the classical ones at equal cost?

From the first state $z^i_0$ of each trajectory $i = 1..B$ of the data (step $\Delta t$),
the model (a window model: from the reference's first $T$ states) and the classical
integrators run `horizon` $= N$ data steps against an accurate reference $r^i_t$.

- **Reference** and **horizon** (`_reference_run`): Yoshida 6 (separable systems) or
  Gauss–Legendre 6, refined to `REFERENCE_TOLERANCE` or its limit; its own error $e_r$.
  $N$ is shortened, and the result says so, to fit a time `budget` and to the last step
  the reference resolves to `REFERENCE_RESOLVED`.
- **Errors** of a run $z$, per trajectory: the state error
  $\|z^i_N - r^i_N\|_\tau / \|r^i_N\|_\tau$, with $\|\cdot\|_\tau$ leaving out the clock
  of a driven system (`_frame`), and, when the system has an `"energy"` invariant $H$,
  $|H(z^i_N) - H(r^i_0)| / |H(r^i_0)|$ (divided by 1 where $H(r^i_0) = 0$); each
  reported as the median and the worst over trajectories. A run that fails (a
  non-finite state, an implicit solve that does not converge) has error $\infty$. The
  **error of a run** that the comparison uses is its worst trajectory's state error.
- **Throughput**: $B' n / t$ states per second. A classical run is made in calls of
  the reference's $n = \lceil N/$`SEGMENTS`$\rceil$ steps; $t$ is the median time of
  its calls after the first (which compiles), $B' = B$ when $B k \ge$ `TIMING_BATCH` or
  a step takes at least `TIMING_STEP_SECONDS`; else $t$ is the median of
  `TIMING_REPEATS` calls of $n$ steps of $B' = \max(B,$ `TIMING_BATCH`$)$ copies after
  a warm-up call. The model is timed likewise on $N$ steps of $\max(B,$
  `TIMING_BATCH`$)$ states. A call longer than `LONG_CALL_SECONDS` is timed once.
- **Classical runs**: each method at $h = \Delta t / k$, $k = 1, 2, 4, \dots$ (one
  compiled call serves every $k$), until its error is at most the floor
  `FLOOR_FACTOR` $\cdot\, e_r$ (below it the reference cannot tell errors apart), or
  stops decreasing below `PLATEAU_BELOW` (round-off; above it a run that is not yet
  converging is refined on), or $k$ would pass `max_refinement`, or the run is as
  accurate as the model and slower: finer runs, slower still, change neither ratio.
- **Frontier**: the classical runs of finite error that no other run beats in both
  error and throughput.
- **Ratios** (`compare`): with $e_m$, $v_m$ the model's error and throughput,
  `frontier_ratio` $= e_c / e_m$ for the most accurate classical run with throughput
  $\ge v_m / (1 + $ `SPEED_TOLERANCE`$)$ (equal cost within the timing's precision; above
  1 the model is more accurate at equal cost; `None` when every classical run is
  slower), and `equal_error_speedup` $= v_m / v_c$ for
  the fastest classical run with error $\le e_m$ (`None` when none reaches it). In a
  ratio $x/0 = \infty$ for $x > 0$ and $0/0 = \infty/\infty = 1$.

Reference: Hairer, Nørsett, Wanner, *Solving Ordinary Differential Equations I*, 1993.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._validation import check_int
from ..integrators import METHODS, AbstractIntegrator, IntegrationError, as_integrator, integrate
from ..models._base import AbstractModel
from ..rollout import RolloutError, model_rollout
from ..systems import AbstractSystem
from ._frame import clock_components, kept_components
from ._frontier import (SPEED_TOLERANCE, Comparison, WorkPoint, as_fast, compare,
                        pareto_frontier, ratio, times)
from ._reference_run import (REFERENCE_FIRST_SUBSTEPS, REFERENCE_MAX_SUBSTEPS,
                             REFERENCE_MIN_SHRINK, REFERENCE_RESOLVED, REFERENCE_TOLERANCE,
                             SEGMENTS, reference, relative, segment_length, segmented)
from ._states import reference_states, values_at

__all__ = ["work_precision", "WorkPrecision", "WorkPoint", "Comparison", "compare",
           "pareto_frontier", "REFERENCE_TOLERANCE", "REFERENCE_FIRST_SUBSTEPS",
           "REFERENCE_MAX_SUBSTEPS", "FLOOR_FACTOR", "PLATEAU_BELOW", "TIMING_REPEATS", "TIMING_BATCH",
           "DEFAULT_METHODS", "LONG_CALL_SECONDS", "MAX_TRAJECTORIES", "REFERENCE_MIN_SHRINK",
           "REFERENCE_RESOLVED", "SEGMENTS", "TIMING_STEP_SECONDS", "BUDGET_SECONDS",
           "SPEED_TOLERANCE"]

FLOOR_FACTOR = 4.0
"""A classical run within this multiple of the reference's own error is not refined."""
PLATEAU_BELOW = 1e-2
"""An error below this that stops decreasing as `k` doubles is round-off."""
TIMING_REPEATS = 3
"""Timed calls per run (their median is the time)."""
TIMING_BATCH = 256
"""Throughput is timed on at least this many trajectory steps per data step at once."""
TIMING_STEP_SECONDS = 1e-3
"""A step of the trajectories together that takes this long is timed as it is (its
arithmetic, not the fixed cost of a step, is what the time measures)."""
BUDGET_SECONDS = 12.0
"""The default time budget of `work_precision` (it bounds the horizon)."""
DEFAULT_METHODS = ("stormer_verlet", "yoshida4", "yoshida6", "implicit_midpoint",
                   "gauss_legendre4", "gauss_legendre6", "rk4")
"""The classical integrators compared by default (those that apply to the system): the
symplectic methods of orders 2 to 6 and RK4 as the non-symplectic reference."""
LONG_CALL_SECONDS = 1.0
"""A call that takes longer than this is timed once."""
MAX_TRAJECTORIES = 64
"""At most this many trajectories are measured (chosen by `key` when there are more)."""

_FAILURES = (IntegrationError, RolloutError, eqx.EquinoxRuntimeError)


@dataclasses.dataclass(frozen=True)
class WorkPrecision:
    """What `work_precision` returns.

    **Fields:** `model_point` (a `WorkPoint`), `points` (every classical run, method by
    method, `k` increasing), `frontier` (`pareto_frontier` of `points`), `comparison` (a
    `Comparison`), `reference_error`, `reference_substeps`, `error_floor`, `horizon`, `dt`,
    `n_trajectories`, `clock_components`, `max_refinement`, `compile_seconds` (by method
    name and the model's class name), `model`, `system` (class names), `dtype` (the
    data's), `requested_horizon` (`None`: `horizon`), `horizon_cut` (why `horizon` is
    shorter: `"budget"`, `"reference"`, or `None`), `reference_method`.

    **Properties:** `frontier_ratio`, `equal_error_speedup`, `metrics` (all as a JSON-able
    dict; a failed run's `inf` becomes `null` in `geomlearn`'s JSON files); `verdict()`.
    """

    model_point: WorkPoint
    points: tuple[WorkPoint, ...]
    frontier: tuple[WorkPoint, ...]
    comparison: Comparison
    reference_error: float
    reference_substeps: int
    error_floor: float
    horizon: int
    dt: float
    n_trajectories: int
    clock_components: tuple[int, ...]
    max_refinement: int
    compile_seconds: dict
    model: str
    system: str
    dtype: str
    requested_horizon: int | None = None
    horizon_cut: str | None = None
    reference_method: str = "gauss_legendre6"

    @property
    def frontier_ratio(self) -> float | None:
        """The error of the most accurate classical run at least as fast as the model
        (within `SPEED_TOLERANCE`) over the model's error (above 1: the model wins at
        equal cost)."""
        return self.comparison.frontier_ratio

    @property
    def equal_error_speedup(self) -> float | None:
        """The model's throughput over that of the fastest classical run as accurate."""
        return self.comparison.equal_error_speedup

    @property
    def metrics(self) -> dict:
        """The measurement as a JSON-able dict."""
        c = self.comparison
        run = lambda p: None if p is None else {"method": p.method, "k": p.k}  # noqa: E731
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                  if f.name != "comparison"}
        return {**fields, "clock_components": list(self.clock_components),
                "model_point": self.model_point.as_dict(),
                "points": [p.as_dict() for p in self.points],
                "frontier": [run(p) for p in self.frontier], "frontier_ratio": c.frontier_ratio,
                "equal_error_speedup": c.equal_error_speedup,
                "equal_cost_run": run(c.equal_cost), "equal_error_run": run(c.equal_error),
                "compile_seconds": dict(self.compile_seconds), "verdict": self.verdict()}

    def verdict(self) -> str:
        """One line in plain words: who is more accurate at equal cost, and how much
        faster the fastest classical run that reaches the model's error is (first, where
        the horizon was shortened, to which step and why)."""
        why = {"budget": "the time budget", "reference": "the last step the reference "
               f"resolves to {REFERENCE_RESOLVED:g}"}.get(self.horizon_cut)
        prefix = "" if why is None else (
            f"at step {self.horizon} of {self.requested_horizon} ({why}): ")
        return prefix + self._verdict()

    def _verdict(self) -> str:
        m, c = self.model_point, self.comparison
        x = lambda a, b: times(ratio(a, b))  # noqa: E731
        if m.failed:
            return f"the model's rollout did not reach step {self.horizon}" + (
                "; no classical run did either" if c.equal_error is None else
                f"; the fastest classical run that did, {c.equal_error.label()}, runs at "
                f"{x(c.equal_error.states_per_second, m.states_per_second)} the model's speed")
        if c.equal_cost is None:
            first = (f"the model is faster than every classical run, "
                     f"{x(m.states_per_second, c.fastest.states_per_second)} the fastest, "
                     f"{c.fastest.label()}")
        elif c.frontier_ratio >= 1:
            first = (f"at equal cost the model is {x(c.frontier_ratio, 1.0)} more accurate "
                     f"than the best classical run, {c.equal_cost.label()}")
        else:
            first = (f"at equal cost {c.equal_cost.label()} is {x(1.0, c.frontier_ratio)} more "
                     "accurate than the model")
        if c.equal_error is None:
            second = f"no classical run reaches the model's error with h ≥ Δt/{self.max_refinement}"
        elif c.equal_cost is None and c.equal_error == c.fastest:
            second = (f"that run is {x(m.error_worst, c.fastest.error_worst)} more accurate "
                      "than the model")
        elif c.equal_error_speedup < 1:
            who = "it" if c.equal_error == c.equal_cost else c.equal_error.label()
            second = f"reaching the model's error, {who} is {x(1.0, c.equal_error_speedup)} faster"
        else:
            second = (f"the model is {x(c.equal_error_speedup, 1.0)} faster than the fastest "
                      f"classical run reaching its error, {c.equal_error.label()}")
        return f"{first}; {second}"


@dataclasses.dataclass(frozen=True)
class _Judge:
    """The errors and throughput of a run against the reference's states at the horizon."""

    final: np.ndarray  # the reference at the horizon, (B, d) float64
    weights: np.ndarray  # 0 at the clock components
    energy: object  # the system's energy function, or None
    energy0: np.ndarray | None  # the energy of the initial states, (B,) float64

    def point(self, method: str, k, h: float, final, rate: float) -> WorkPoint:
        """The `WorkPoint` of a run whose states at the horizon are `final` (`None`: failed)."""
        errors = energies = np.full(len(self.final), np.inf)
        if final is not None:
            errors = relative(final, self.final, self.weights)
            if self.energy is not None:
                values = np.asarray(values_at(self.energy, final[:, None]), np.float64)
                energies = relative(values, self.energy0[:, None], 1.0)
        spread = [float(f(e)) for e in (errors, energies) for f in (np.median, np.max)]
        return WorkPoint(method, k, float(h), *spread[:2],
                         *(spread[2:] if self.energy is not None else (None, None)), rate)


def _timed_run(fn, repeats: int = TIMING_REPEATS):
    """`(output, seconds)`: the median time of `repeats` calls of `fn` until the result is
    ready (one call when it is longer than `LONG_CALL_SECONDS`); output `None` when the
    run fails."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        try:
            out = jax.block_until_ready(fn())
        except _FAILURES:
            out = None
        times.append(time.perf_counter() - t0)
        if times[-1] > LONG_CALL_SECONDS:
            break
    return out, float(np.median(times))


def _tiled(x):
    """`x` `(B, ...)` repeated along its first axis to `max(B, TIMING_BATCH)` rows (one
    shape for every `k`: each shape compiles once)."""
    n = max(x.shape[0], TIMING_BATCH)
    return jnp.tile(x, (-(-n // x.shape[0]),) + (1,) * (x.ndim - 1))[:n]


def _method_points(system, method, z0, dt, horizon, judge, floor, max_refinement,
                   model_point=None, segment=None):
    """`(points, compile seconds)` of one classical method at `k = 1, 2, 4, …` (see the
    module documentation for where the refinement ends; with `model_point`, also once a
    run is as accurate as the model and slower), in calls of `segment` steps (default
    `segment_length(horizon)`)."""
    segment = segment_length(horizon) if segment is None else segment
    tiled = _tiled(jnp.asarray(z0))

    def run(k, z):
        return integrate(system, z, dt, segment, method=method, substeps=k)

    points, k, compile_seconds, warm = [], 1, 0.0, False
    while k <= max_refinement:
        try:
            states, seconds = segmented(functools.partial(run, k), z0, horizon, segment)
            out = states[:, -1]
        except _FAILURES:
            out, seconds = None, [math.inf]
        if k == 1 and len(seconds) == 1 and out is not None:  # one call: time a second
            seconds.append(_timed_run(functools.partial(run, 1, z0), 1)[1])
        timed = np.median(seconds[1:] if k == 1 and len(seconds) > 1 else seconds)
        if k == 1 and out is not None:
            compile_seconds = max(seconds[0] - timed, 0.0)
        batch = len(z0)
        if not (batch * k >= TIMING_BATCH or timed >= TIMING_STEP_SECONDS * segment * k):
            if not warm:
                _, warm = _timed_run(functools.partial(run, 1, tiled), 1), True
            batch, timed = len(tiled), _timed_run(functools.partial(run, k, tiled))[1]
        rate = batch * segment / max(timed, 1e-12)
        point = judge.point(method.name, k, dt / k, out, rate)
        before = points[-1].error_worst if points else math.inf
        points.append(point)
        if point.error_worst <= floor or (before < PLATEAU_BELOW and point.error_worst >= before):
            break
        if model_point is not None and _settled(point, model_point):
            break
        k *= 2
    return points, compile_seconds


def _settled(point: WorkPoint, model: WorkPoint) -> bool:
    """Whether finer runs of `point`'s method can change neither ratio: `point` is at
    least as accurate as the model (finer runs are slower) and slower than the model
    beyond `SPEED_TOLERANCE` (finer runs are slower still, so none is of equal cost)."""
    return point.error_worst <= model.error_worst and not as_fast(point, model)


def _model_point(model, reference, dt: float, horizon: int, judge):
    """`(point, compile seconds)` of the model's batched rollout for `horizon` steps from
    the reference's first states (a window model's first `T`)."""
    task = dataclasses.replace(model.task(data_dt=dt), nan_on_failure=True)
    initial = model.initial_states(reference, task)
    timed = _tiled(initial)
    run = functools.partial(model_rollout, model, timed, horizon + 1, task)
    _, warm = _timed_run(run, 1)
    _, seconds = _timed_run(run)
    out, _ = _timed_run(functools.partial(model_rollout, model, initial, horizon + 1, task), 1)
    final = None if out is None else out[:, horizon]
    rate = timed.shape[0] * horizon / max(seconds, 1e-12)
    return judge.point(type(model).__name__, None, dt, final, rate), max(warm - seconds, 0.0)


def _checked_inputs(model, system, data, dt, horizon, max_refinement):
    """`(states (B, n, d), dt, horizon, max_refinement)` after the checks of `work_precision`."""
    if not isinstance(model, AbstractModel):
        raise ValueError("model must be a geomlearn integrator (a geomlearn.models."
                         f"AbstractModel), got {type(model).__name__}")
    if not isinstance(system, AbstractSystem):
        raise ValueError("system must be a geomlearn.systems.AbstractSystem (the known "
                         f"dynamics of the data), got {type(system).__name__}")
    horizon = check_int("horizon", horizon, minimum=1)
    max_refinement = check_int("max_refinement", max_refinement, minimum=1)
    states, dt = reference_states(data, dt)
    if dt is None:
        raise ValueError("the data's time step is needed: give a TrajectoryData, or the "
                         "states with dt=")
    d = states.shape[-1]
    if system.dim != d or model.dim != d:
        raise ValueError(f"dimensions disagree: the data's states have d={d}, "
                         f"{type(system).__name__} has dim={system.dim}, "
                         f"{type(model).__name__} has dim={model.dim}")
    if not np.all(np.isfinite(np.asarray(states[:, 0]))):
        raise ValueError("the data's initial states must be finite (NaN or inf found)")
    return states, dt, horizon, max_refinement


def _methods(system, methods) -> list:
    """The classical integrators to run: the given ones (names or objects, each checked
    against `system`), or every method of `DEFAULT_METHODS` that applies to `system`."""
    if methods is None:
        return [m for m in map(as_integrator, DEFAULT_METHODS) if _applies(m, system)]
    if isinstance(methods, (str, AbstractIntegrator)):
        methods = [methods]
    found = {}
    for method in map(as_integrator, methods):
        method.check_system(system)
        found.setdefault(method.name, method)
    if not found:
        raise ValueError(f"methods must name at least one integrator of {METHODS}, got []")
    return list(found.values())


def _applies(method, system) -> bool:
    """Whether `method` can integrate `system` (`check_system` raises otherwise)."""
    try:
        method.check_system(system)
    except ValueError:
        return False
    return True


def _chosen(states, key):
    """At most `MAX_TRAJECTORIES` trajectories of `states`, chosen at random by `key`."""
    if states.shape[0] <= MAX_TRAJECTORIES:
        return states
    key = jax.random.PRNGKey(0) if key is None else key
    pick = jax.random.choice(key, states.shape[0], (MAX_TRAJECTORIES,), replace=False)
    return states[np.sort(np.asarray(pick))]


def work_precision(model, system, data, *, horizon: int = 1000, methods=None, key=None,
                   max_refinement: int = 256, dt: float | None = None,
                   budget: float | None = BUDGET_SECONDS) -> WorkPrecision:
    r"""Compare a learned integrator with the classical integrators at equal cost.

    Measures the model and every classical run as the module documentation says: their
    error after `horizon` data steps (fewer where the budget or the reference's
    resolution shortens it) against a converged reference and their throughput, the
    classical runs at $h = \Delta t / k$ for $k = 1, 2, 4, \dots$; then the frontier and
    the two ratios.

    **Arguments:**

    - `model`: a geomlearn model (an `AbstractModel`; a window model needs a fixed
      `seq_length`).
    - `system`: the `geomlearn.systems` system the data come from.
    - `data`: a `TrajectoryData`, or states `(B, n, d)` (or one trajectory `(n, d)`)
      with `dt`; only the first state of each trajectory is used.
    - `horizon`: the number of data steps $N \ge 1$ (at most; see `budget`).
    - `methods`: the classical integrators (names of `geomlearn.integrators.METHODS` or
      `AbstractIntegrator`s); default every method of `DEFAULT_METHODS` that applies to
      `system` (those for separable systems only when it is separable).
    - `key`: a PRNG key choosing `MAX_TRAJECTORIES` trajectories when there are more.
    - `max_refinement`: the largest `k` of a classical run.
    - `dt`: the time step of array `data`.
    - `budget`: seconds that bound the horizon through the reference's first run (its
      $b/8$ rule, module documentation); `None` for the full `horizon` always.

    **Returns:** a `WorkPrecision` (`frontier_ratio`, `equal_error_speedup`, `metrics`,
    `verdict()`).

    **Raises:** `ValueError` for a model that is not a geomlearn model, dimensions that
    disagree, `horizon < 1`, an unknown method or one that does not apply to `system`;
    `IntegrationError` when the reference itself fails or resolves not even one step.

    ```python
    result = gl.work_precision(model, gl.systems.Pendulum(), test, horizon=1000)
    print(result.verdict())
    result.metrics["frontier_ratio"], result.metrics["equal_error_speedup"]
    ```
    """
    states, dt, horizon, max_refinement = _checked_inputs(
        model, system, data, dt, horizon, max_refinement)
    integrators = _methods(system, methods)
    clock = clock_components(system, states)
    weights = kept_components(states.shape[-1], clock)
    z0 = _chosen(states, key)[:, 0]
    ref = reference(system, z0, dt, horizon, weights, budget)
    energy = system.invariants.get("energy")
    judge = _Judge(
        final=np.asarray(ref.states[:, -1], dtype=np.float64), weights=weights, energy=energy,
        energy0=None if energy is None else np.asarray(values_at(energy, ref.states[:, :1]))[:, 0])
    model_point, compile_seconds = _model_point(model, ref.states, dt, ref.horizon, judge)
    compiled = {type(model).__name__: compile_seconds}
    floor = FLOOR_FACTOR * ref.error
    points = []
    for method in integrators:
        found, compiled[method.name] = _method_points(
            system, method, z0, dt, ref.horizon, judge, floor, max_refinement, model_point,
            ref.segment)
        points.extend(found)
    return WorkPrecision(
        model_point=model_point, points=tuple(points), frontier=pareto_frontier(points),
        comparison=compare(model_point, points), reference_error=ref.error,
        reference_substeps=ref.substeps, error_floor=floor, horizon=ref.horizon, dt=dt,
        n_trajectories=int(z0.shape[0]), clock_components=tuple(clock),
        max_refinement=max_refinement, compile_seconds=compiled, model=type(model).__name__,
        system=type(system).__name__, dtype=str(states.dtype), requested_horizon=horizon,
        horizon_cut=ref.cut, reference_method=ref.method)
