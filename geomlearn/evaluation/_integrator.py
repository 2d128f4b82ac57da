r"""How good an integrator a trained model is: `evaluate(model, system, reference)`.

The model is rolled out (`geomlearn.iterate`) from the initial state(s) of every
reference trajectory for as many steps as the reference has, and compared with it:

- **trajectory error** at horizons $k$: $\|\hat Z_{0:k} - Z_{0:k}\|_F / \|Z_{0:k}\|_F$ over
  the states up to step $k$ of all trajectories (the relative error of the papers), next
  to that of the identity map and of one classical step (`_baselines`); and the median
  and the worst over the trajectories of the same error of each one alone;
- **invariant drift** of each invariant $I$ (the system's, the model's, the momentum map
  of its symmetry, the user's: `_invariants`):
  $\max_{t, i} |I(\hat z^i_t) - I(z^i_0)| / s_I$, $s_I = \max_i |I(z^i_0)|$, or the size
  of its terms where $I$ is zero by cancellation (`_states.invariant_scale`), for
  the model's rollouts and, for comparison, for the reference trajectories themselves,
  and the median over $i$ of $\max_t$; a learned energy, defined up to a constant, is
  divided by its range over the reference states instead,
  $\max_{t,i} H_\theta(z^i_t) - \min_{t,i} H_\theta(z^i_t)$;
- the **structure residual** of the model at sample points taken from the reference:
  symplecticity $\|M^\top\Omega M - \Omega\|/\|\Omega\|$ (even dimensions) and volume
  $\big||\det M| - 1\big|$ (see `geomlearn.geometry`), the maximum over the points;
- the **speed**: states per second of the compiled model rollout and of the reference
  integrator (`geomlearn.integrators.integrate`) on the same initial states, both timed
  after a warm-up call, in the same process.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from .._format import aligned_table, fmt
from .._validation import check_int
from ..integrators import AbstractIntegrator, IntegrationError, as_integrator, integrate
from ..rollout import check_model, model_rollout
from ..structures import structure_named
from ._baselines import classical_method, classical_step_error, identity_rollout
from ._invariants import invariant_drifts, invariants_of
from ._long_horizon import LongHorizon, long_horizon_rows
from ._long_setup import checked_horizon, horizon_start, long_horizon_of
from ._states import reference_states, reference_times, rollout_at_times
from ._timing import timed

__all__ = [
    "evaluate",
    "Evaluation",
    "StructureCheck",
    "check_structure",
    "CHECK_TOLERANCE",
    "default_horizons",
]

CHECK_TOLERANCE = 1e-10
"""The pass/fail tolerance of `check_structure` for a well-conditioned Jacobian; it grows
with the condition number (see `check_structure`)."""


@dataclasses.dataclass(frozen=True)
class StructureCheck:
    """The structure residuals of a model's iterated map at sample points.

    **Fields:** `structure` (what the iterated map claims to preserve), `map` (a
    description of the map that was checked), `residuals` (`{"symplecticity" (even
    dimensions), "volume"}`, the maximum over the points, in the points' dtype),
    `condition` (the largest condition number of the Jacobian at the points),
    `tolerance` (the pass/fail threshold used), `n_points`.
    """

    structure: str
    map: str
    residuals: dict
    condition: float
    tolerance: float
    n_points: int

    def claimed(self, name: str) -> bool:
        """Whether the residual `name` is one the map claims to be zero."""
        return structure_named(self.structure).claims(name)

    def report(self, *, title: str) -> str:
        """The check as text: the map, each residual with PASS/FAIL/not claimed, the verdict."""
        lines = [f"{title}: the iterated map is {self.map}; it claims {self.structure!r}. "
                 f"Residuals at {self.n_points} points (Jacobian condition number ≤ "
                 f"{self.condition:.3g}; tolerance {self.tolerance:.2g})"]
        for name, r in self.residuals.items():
            ok = "PASS" if np.isfinite(r) and r <= self.tolerance else "FAIL"
            lines.append(f"  {name:<14} {r:.3e}   {ok if self.claimed(name) else 'not claimed'}")
        lines.append("PASS" if self.passed else "FAIL")
        return "\n".join(lines)

    @property
    def passed(self) -> bool:
        """Every claimed residual is at most `tolerance` (and finite)."""
        return all(
            np.isfinite(r) and r <= self.tolerance
            for name, r in self.residuals.items()
            if self.claimed(name)
        )


def check_structure(model, points, *, prediction_window=None, seq_length=None, dt=None):
    r"""The structure residuals of the map a rollout of `model` iterates.

    That map is the model's `step` (see `geomlearn.models.AbstractModel`): the model map
    itself for a feed-forward integrator and for a transformer with `pw = T`, the window
    update $Z \mapsto [Z_{pw:}, F(Z)_{T-pw:}]$ for `pw < T` (not structure-preserving),
    and a converged implicit-midpoint step for a Hamiltonian network.

    The residuals are those of `geomlearn.geometry`; they are evaluated in the dtype of
    `points`. The pass/fail tolerance accounts for conditioning: rounding in a Jacobian
    $M$ of size $N$ perturbs $\det M$ and $M^\top \Omega M$ relatively by about
    $N\,\varepsilon\,\kappa(M)$, so the tolerance is
    $\max(10^{-10},\ 64\,N\,\varepsilon\,\kappa)$ with $\kappa$ the largest condition
    number at the points and $\varepsilon$ the points' machine epsilon.

    **Arguments:** `model`; `points`, a batch of states of the iterated map (`(B, d)`, or
    `(B, T, d)` for a transformer); the run options as in `iterate`.

    **Returns:** a `StructureCheck`.
    """
    check_model(model)
    points = jnp.asarray(points)
    task = model.rollout_task(tuple(points.shape), prediction_window=prediction_window, dt=dt)
    if seq_length is not None and task.seq_length != seq_length:
        raise ValueError(f"points have windows of length {task.seq_length}, not {seq_length}")
    return _check_structure(model, points, task)


def _check_structure(model, points, task) -> StructureCheck:
    res = model.structure_residuals(points, task)
    condition = res.pop("condition")
    N = int(np.prod(model.state_shape(task)))
    eps = float(jnp.finfo(points.dtype).eps)
    tolerance = max(CHECK_TOLERANCE, 64 * N * eps * condition) if np.isfinite(condition) else CHECK_TOLERANCE
    return StructureCheck(
        structure=model.iterated_structure(task),
        map=model.describe_step(task),
        residuals=res,
        condition=float(condition),
        tolerance=float(tolerance),
        n_points=int(points.shape[0]),
    )


def _summary(metrics, *, title: str, extra=()) -> str:
    """The metrics as an aligned text table (what `geomlearn train` prints)."""
    rows = list(extra)
    errs = "   ".join(f"step {k}: {fmt(v)}" for k, v in metrics["trajectory_error"].items())
    rows.append(("trajectory error", errs))
    for which in ("median", "worst"):
        per = metrics.get(f"trajectory_error_{which}")
        if per:
            errs = "   ".join(f"step {k}: {fmt(v)}" for k, v in per.items())
            rows.append((f"  {which} trajectory", errs))
    identity = metrics.get("identity_trajectory_error")
    if identity:
        errs = "   ".join(f"step {k}: {fmt(v)}" for k, v in identity.items())
        rows.append(("  identity map", f"{errs}   (the do-nothing map: the last given state "
                                       "repeated)"))
    if metrics.get("classical_step_method"):
        rows.append(("  one classical step", f"{fmt(metrics.get('classical_step_error'))}   "
                     f"({metrics['classical_step_method']} at dt={fmt(metrics['dt'])}, "
                     "from every data state)"))
    for name, value in metrics["invariant_drift"].items():
        ref = metrics["reference_invariant_drift"].get(name)
        median = metrics.get("invariant_drift_median", {}).get(name)
        rows.append((f"{name} drift", f"model {fmt(value)}   reference {fmt(ref)}"
                     + ("" if median is None else f"   median rollout {fmt(median)}")))
    claims = structure_named(metrics["iterated_structure"])
    for name, value in metrics["structure_residual"].items():
        rows.append((f"{name.replace('_', ' ')} residual",
                     fmt(value) + ("" if claims.claims(name) else "   (not claimed)")))
    rows.append(("checked map", metrics["iterated_map"]))
    speed = f"{fmt(metrics['rollout_states_per_second'])} states/s"
    if metrics.get("reference_states_per_second") is not None:
        speed += (f"   reference {metrics['reference_method']}: "
                  f"{fmt(metrics['reference_states_per_second'])} states/s")
    rows.append(("rollout speed", speed))
    if metrics.get("long_horizon"):
        rows.extend(long_horizon_rows(metrics["long_horizon"]))
    return aligned_table(title, rows)


class Evaluation(dict):
    """What `evaluate` returns: the JSON-serialisable metrics as a `dict`
    (`result["trajectory_error"]`, `json.dumps(result)`), with the arrays behind them as
    attributes.

    **Keys:**

    - `"trajectory_error"`: `{str(k): error}`, the relative error over steps `0…k` of
      all trajectories together; `"trajectory_error_median"`, `"trajectory_error_worst"`
      the median and the largest of each trajectory's own (`inf` where not finite);
      `"identity_trajectory_error"` the pooled error of the identity map;
      `"classical_step_error"` the relative error of one step of
      `"classical_step_method"` from every reference state (`None` without a system or a
      time step);
    - `"invariant_drift"`: `{name: drift}`, the largest over the rollouts, for every
      invariant of the system, the model (`"learned_energy"` of a Hamiltonian network,
      over its range on the reference; `"momentum_map_0"`, … of a symmetry) and the user;
      `"invariant_drift_median"` the median over the rollouts of each one's largest;
      `"reference_invariant_drift"` the largest along the reference;
    - `"structure_residual"`: `{"symplecticity": r, "volume": r}` (symplecticity only in
      even dimensions) of the map the rollout iterates, the maximum over the sample
      points, in the reference's dtype; `"structure_condition"` the largest condition
      number of its Jacobian there; `"structure_tolerance"` and `"structure_passed"` the
      verdict of `check_structure`; `"iterated_map"` which map was checked;
    - `"rollout_states_per_second"`, `"reference_states_per_second"` (`None` without a
      system or a time step);
    - `"model"`, `"system"` (`None` without one), `"structure"`, `"n_trajectories"`,
      `"n_steps"`, `"dt"`, `"reference_method"` (the integrator's name);
    - with a `horizon`, `"long_horizon"`: the metrics of `long_horizon` (`escape_step`,
      `valid_time`, `n_escaped`, per invariant `max_drift` and `trend`, …).

    **Attributes:** `rollout` (the model's trajectories, `(B, N, d)`), `reference` (the
    reference states, `(B, N, d)`), `series` (per invariant, its relative error over
    time along the rollout and along the reference, `{name: {"model": (N,),
    "reference": (N,)}}`), `structure_check` (the `StructureCheck` of the iterated map),
    `long_horizon` (the `LongHorizon` of an evaluation with a `horizon`, with its drift
    series and, if kept, its states; else `None`).
    """

    def __init__(self, metrics, rollout, reference, series, structure_check,
                 long_horizon: LongHorizon | None = None):
        super().__init__(metrics)
        self.rollout = rollout
        self.reference = reference
        self.series = series
        self.structure_check = structure_check
        self.long_horizon = long_horizon

    def summary(self, *, title: str, extra=(), metrics=None) -> str:
        """An aligned text table of the metrics (what `geomlearn train` prints), with
        `extra` rows `(name, text)` first; `metrics` overrides the dict shown."""
        return _summary(self if metrics is None else metrics, title=title, extra=extra)


def default_horizons(n_steps: int) -> list[int]:
    """The default horizons of `evaluate`: 1, 10, 100, … below `n_steps`, and `n_steps`
    itself."""
    out, k = [], 1
    while k < n_steps:
        out.append(k)
        k *= 10
    out.append(n_steps)
    return out


def _checked_horizons(model, system, states, horizons) -> list[int]:
    """The horizons to report, after checking the dimensions and the reference length."""
    d = states.shape[-1]
    if d != model.dim or (system is not None and d != system.dim):
        system_dim = "" if system is None else f"system.dim={system.dim}, "
        raise ValueError(
            f"dimensions disagree: model.dim={model.dim}, {system_dim}"
            f"reference states have d={d}"
        )
    n_steps = states.shape[1] - 1
    if n_steps < 1:
        raise ValueError("the reference trajectories need at least 2 states")
    horizons = default_horizons(n_steps) if horizons is None else list(horizons)
    for h in horizons:
        check_int("horizon", h, minimum=1)
        if h > n_steps:
            raise ValueError(f"horizon {h} is beyond the reference's {n_steps} steps")
    return horizons


def _trajectory_errors(rollout, states, horizons) -> dict[str, float]:
    """`{str(k): ‖Ẑ_{0:k} − Z_{0:k}‖_F / ‖Z_{0:k}‖_F}` over all trajectories."""
    diff = np.asarray(rollout - states, dtype=np.float64)
    ref = np.asarray(states, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):  # a rollout that overflowed: inf
        err_sq = np.cumsum(np.sum(diff**2, axis=(0, 2)))
        ref_sq = np.cumsum(np.sum(ref**2, axis=(0, 2)))
    return {str(h): float(np.sqrt(err_sq[h] / ref_sq[h])) for h in horizons}


def _per_trajectory_errors(rollout, states, horizons) -> tuple[dict, dict]:
    r"""`({str(k): median}, {str(k): worst})` over the trajectories of each one's relative
    error $\|\hat Z^i_{0:k} - Z^i_{0:k}\|_F / \|Z^i_{0:k}\|_F$; a rollout that is not
    finite up to step $k$ has an infinite error there, an exact one an error of 0."""
    diff = np.asarray(rollout - states, dtype=np.float64)
    ref = np.asarray(states, dtype=np.float64)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        err_sq = np.cumsum(np.sum(diff**2, axis=2), axis=1)
        ref_sq = np.cumsum(np.sum(ref**2, axis=2), axis=1)
        err = np.where(err_sq == 0, 0.0, np.sqrt(err_sq / ref_sq))  # exact at the origin: 0
    err = np.where(np.isfinite(err), err, np.inf)
    return ({str(h): float(np.median(err[:, h])) for h in horizons},
            {str(h): float(np.max(err[:, h])) for h in horizons})


def _error_metrics(model, task, rollout, states, horizons) -> dict:
    """The trajectory-error keys of `evaluate`'s metrics."""
    median, worst = _per_trajectory_errors(rollout, states, horizons)
    return {
        "trajectory_error": _trajectory_errors(rollout, states, horizons),
        "trajectory_error_median": median,
        "trajectory_error_worst": worst,
        "identity_trajectory_error": _trajectory_errors(
            identity_rollout(states, model.n_initial_points(task)), states, horizons),
    }


def _structure_points(model, states, task, n_points: int, key):
    """`n_points` states (windows) of the iterated map taken at random from the reference."""
    key = jax.random.PRNGKey(0) if key is None else key
    k1, k2 = jax.random.split(key)
    n_traj, N = states.shape[:2]
    n_init = model.n_initial_points(task)
    traj_idx = np.asarray(jax.random.randint(k1, (n_points,), 0, n_traj))
    time_idx = np.asarray(jax.random.randint(k2, (n_points,), 0, N - n_init + 1))
    # An initial state reads the first `n_init` states of what it is given, so one gather
    # of equal windows serves every point: one compiled program, not one slice per start.
    rows = time_idx[:, None] + np.arange(n_init)
    return jnp.asarray(model.initial_states(states[traj_idx[:, None], rows], task))


def _reference_rate(system, states, dt, integrator):
    """States per second of `integrator` from the reference's initial states (same
    process, after a warm-up), or `None` without a time step or a system, or where the
    integrator fails at the data's step (an implicit solve that does not converge at a
    long stride): a speed of a run that gives no states is no reference."""
    if dt is None or system is None:
        return None
    n_traj, N = states.shape[:2]
    try:
        _, seconds = timed(lambda: integrate(system, states[:, 0], dt, N - 1, method=integrator))
    except IntegrationError:
        return None
    return n_traj * N / seconds


def _timed_rows(model, task, N: int) -> int:
    """The rows of a rollout at real times: a transformer's window plus whole steps of
    `pw` rows (a rollout at given times cannot compute rows it has no times for)."""
    if model.n_initial_points(task) == 1:
        return N
    T, pw = task.seq_length, task.prediction_window
    return T + (N - T) // pw * pw


def evaluate(
    model,
    system,
    reference,
    *,
    dt: float | None = None,
    horizons=None,
    prediction_window: int | None = None,
    seq_length: int | None = None,
    n_structure_points: int = 8,
    method: str | AbstractIntegrator = "implicit_midpoint",
    key=None,
    horizon: int | None = None,
    keep_states: bool = False,
    horizon_method: str | AbstractIntegrator = "gauss_legendre6",
    bound: float | None = None,
    particles: int | None = None,
    invariants: dict | None = None,
    horizon_data=None,
    horizon_reference=None,
) -> Evaluation:
    r"""Measure a trained model against reference trajectories (of `system`, or of
    unknown dynamics: `system=None`) by the metrics of the module documentation.

    **Arguments:**

    - `model`: a trained geomlearn model; `system`: the `geomlearn.systems` object the
      reference comes from (its `invariants` are measured), `None` for measured data.
    - `reference`: a `TrajectoryData` (unequal lengths: as many first states of each as
      the shortest has) or states `(B, n_steps + 1, d)` or `(n_steps + 1, d)`; the model
      is rolled out from each first state (window) for `n_steps` steps.
    - `dt`: the time step of an array `reference` (needed by a Hamiltonian network, the
      reference timing and the long horizon). `horizons`: the steps of the trajectory
      error (default `default_horizons(n_steps)`). `prediction_window`, `seq_length`: for
      transformers, as in `fit`; `n_structure_points`: the states of the structure check.
    - `method`: the timed reference integrator (an `AbstractIntegrator` or a name);
      `key` picks the structure points (default fixed).
    - `horizon`: also a streamed rollout of this many steps (`long_horizon`) against
      `system` integrated by `horizon_method` (default 6th-order Gauss–Legendre);
      `keep_states` keeps its states; `bound` is the data's radius $B$ of the escape test
      (a rollout escapes beyond $10B$ from the reference's mean; default the largest
      distance of a reference state from it); a driven system's clock is left out.
      `particles`: the spatial dimension of the particles whose positions and momenta
      make the state: escapes are measured in their centre-of-mass frame (`0`: not
      particles; default the system's `particle_dimension`, `0` without). `horizon_data`:
      independent trajectories (as `reference`) the long horizon starts from instead;
      `horizon_reference`: long trajectories it starts from and is compared with (no
      system integrated; no valid time beyond their length).
    - `invariants`: the user's `{name: f}`, `f(z)` a real number of one state `(d,)`,
      measured beside the system's, a learned energy and a symmetry's momentum map
      (`"momentum_map_0"`, …). A name already measured, or an `f` that raises, is not
      one number or not finite at the data's first state: `ValueError` before any rollout.

    **Returns:** an [`Evaluation`][geomlearn.Evaluation] (the keys are listed there).

    ```python
    metrics = gl.evaluate(model, gl.systems.Pendulum(), test, horizon=10_000,
                          invariants={"p": lambda z: z[1]})
    metrics["invariant_drift"]["p"], metrics["long_horizon"]["invariants"]["p"]["trend"]
    ```
    """
    check_model(model)
    integrator = as_integrator(method)
    states, dt = reference_states(reference, dt)
    task = model.task(seq_length=seq_length, prediction_window=prediction_window, data_dt=dt)
    times = reference_times(reference, states.shape[1])
    if times is not None:  # irregular data: a rollout at the reference's own times
        n_rows = _timed_rows(model, task, states.shape[1])
        states, times = states[:, :n_rows], times[:, :n_rows]
    horizons = _checked_horizons(model, system, states, horizons)
    n_structure_points = check_int("n_structure_points", n_structure_points, minimum=1)
    horizon = checked_horizon(system, states, horizon, horizon_method, particles)
    start = horizon_start(states, dt, horizon, horizon_data, horizon_reference)
    measured = invariants_of(model, system, invariants, state=states[0, 0])
    n_traj, N, _ = states.shape

    initial = model.initial_states(states, task)
    if times is None:
        rollout, model_seconds = timed(lambda: model_rollout(model, initial, N, task))
    else:
        rollout, model_seconds = timed(
            lambda: rollout_at_times(model, initial, times, dt, task))
    drift, median_drift, ref_drift, series, scales = invariant_drifts(
        measured, rollout, states, gauge_free=model.learned_invariants())
    points = _structure_points(model, states, task, n_structure_points, key)
    checked = _check_structure(model, points, task)
    with_reference = dt is not None and system is not None
    one_step = with_reference and times is None  # a classical step needs one step size
    metrics = {
        "model": type(model).__name__,
        "system": None if system is None else type(system).__name__,
        "structure": model.structure,
        "iterated_structure": checked.structure,
        "iterated_map": checked.map,
        "n_trajectories": int(n_traj),
        "n_steps": int(N - 1),
        "dt": dt,
        **_error_metrics(model, task, rollout, states, horizons),
        "classical_step_error": (classical_step_error(system, states, dt) if one_step
                                 else None),
        "classical_step_method": classical_method(system).name if one_step else None,
        "invariant_drift": drift,
        "invariant_drift_median": median_drift,
        "reference_invariant_drift": ref_drift,
        "structure_residual": dict(checked.residuals),
        "structure_condition": checked.condition,
        "structure_tolerance": checked.tolerance,
        "structure_passed": checked.passed,
        "rollout_states_per_second": n_traj * N / model_seconds,
        "reference_states_per_second": _reference_rate(system, states, dt, integrator),
        "reference_method": integrator.name if with_reference else None,
    }
    long = None
    if horizon is not None:
        long = long_horizon_of(model, system, states, task, dt, horizon=horizon,
                             keep_states=keep_states, method=horizon_method, bound=bound,
                             invariants=measured, scales=scales, particles=particles,
                             start=start)
        metrics["long_horizon"] = long.metrics
    return Evaluation(metrics, rollout, states, series, checked, long)
