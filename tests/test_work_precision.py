"""Work–precision: the model's error and throughput against the classical integrators at
steps Δt/k, the frontier and the two ratios. No assertion here depends on a timing: the
errors are checked against theory (an exact flow map, the methods' orders, the clock of
a driven system) and the ratios on hand-made points."""

import dataclasses
import json
import math
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from _helpers import RK4Step
from geomlearn.evaluation import _reference_run as rr
from geomlearn.evaluation import _work_precision as wp
from geomlearn.evaluation._frontier import as_fast
from geomlearn.evaluation._work_precision import (
    REFERENCE_TOLERANCE,
    SPEED_TOLERANCE,
    WorkPoint,
    WorkPrecision,
    compare,
    pareto_frontier,
    work_precision,
)
from geomlearn.integrators import ORDERS, RK4, IntegrationError, integrate
from geomlearn.models import AbstractFeedForwardIntegrator
from geomlearn.systems import ForcedMassSpring, HarmonicOscillator

DT, HORIZON, MAX_K = 0.1, 100, 64
"""The harmonic oscillator (ω = 1) at Δt = 0.1 over 100 steps, classical runs to h = Δt/64."""


def rotation(dt):
    """The exact flow of q' = p, p' = −q over `dt`: exp(J dt) with J = [[0, 1], [−1, 0]]."""
    c, s = np.cos(dt), np.sin(dt)
    return jnp.asarray([[c, s], [-s, c]], dtype=jnp.float64)


class ExactFlow(AbstractFeedForwardIntegrator):
    """The harmonic oscillator's exact flow map over Δt: a perfect learned integrator."""

    structure: ClassVar[str] = "symplectic"
    dim: int = eqx.field(static=True)
    matrix: jax.Array

    def __init__(self, dt, *, key=None, dtype=None):
        self.dim, self.matrix = 2, rotation(dt)

    def __call__(self, z, h=None):
        return self.matrix.astype(z.dtype) @ z


class CostlyIdentity(AbstractFeedForwardIntegrator):
    """The identity map at the cost of hundreds of rotations (each undone at once): a
    model that does not advance, and is slower than one classical step by a wide margin,
    so that classical runs as fast as it exist without any timing being assumed close."""

    structure: ClassVar[str] = "symplectic"
    dim: int = eqx.field(static=True)
    matrix: jax.Array

    def __init__(self, dt, *, key=None, dtype=None):
        self.dim, self.matrix = 2, rotation(dt)

    def __call__(self, z, h=None):
        m = self.matrix.astype(z.dtype)
        return jax.lax.fori_loop(0, 512, lambda _, x: m.T @ (m @ x), z)


def oscillator_data():
    system = HarmonicOscillator()
    z0 = system.default_initial_conditions(jnp.float64)
    return system, gl.TrajectoryData(integrate(system, z0, DT, 10, method="gauss_legendre6"), DT)


@pytest.fixture(scope="module")
def exact():
    system, data = oscillator_data()
    return work_precision(ExactFlow(DT), system, data, horizon=HORIZON, max_refinement=MAX_K)


def by_method(result, name):
    return [p for p in result.points if p.method == name]


def test_an_exact_flow_map_is_accurate_to_round_off_and_beats_every_run_at_the_data_step(exact):
    """The exact flow's error is round-off, far below every classical run at h = Δt; the
    reference converged; the ratios are those of `compare` on the measured points and
    say the model is the more accurate one at equal cost (when a classical run is as
    fast); the metrics are JSON."""
    m = exact.model_point
    assert exact.reference_error <= REFERENCE_TOLERANCE
    assert m.error_worst < 1e-12 and m.energy_error_worst < 1e-12 and m.k is None
    at_dt = [p for p in exact.points if p.k == 1]
    assert {p.method for p in at_dt} == set(wp.DEFAULT_METHODS)  # all apply: H is separable
    assert all(p.error_worst > 100 * m.error_worst for p in at_dt)
    assert exact.comparison == compare(m, exact.points)
    assert exact.frontier == pareto_frontier(exact.points)
    if exact.frontier_ratio is None:
        assert exact.verdict().startswith("the model is faster than every classical run")
    else:
        assert exact.frontier_ratio > 1
        assert exact.verdict().startswith("at equal cost the model is")
    if exact.equal_error_speedup is not None:  # a run as accurate as round-off
        assert exact.comparison.equal_error.error_worst <= m.error_worst
    metrics = json.loads(json.dumps(exact.metrics))
    assert metrics["reference_method"] == "yoshida6"  # explicit: the oscillator is separable
    assert exact.horizon == exact.requested_horizon == HORIZON and exact.horizon_cut is None
    assert metrics["frontier_ratio"] == exact.frontier_ratio
    assert len(metrics["points"]) == len(exact.points) and metrics["clock_components"] == []


def test_a_map_that_does_not_advance_loses_at_equal_cost():
    """Negative control: the identity map (at the cost of a thousand matrix products
    per step) is less accurate than every classical run at h = Δt, and the most accurate
    classical run as fast as it beats it: frontier_ratio < 1."""
    system, data = oscillator_data()
    result = work_precision(CostlyIdentity(DT), system, data, horizon=HORIZON,
                            methods=["euler", "stormer_verlet", "rk4"], max_refinement=MAX_K)
    m = result.model_point
    assert m.error_worst > 1.0  # ten radians round the circle, not moved
    assert all(p.error_worst < m.error_worst for p in result.points if p.k == 1)
    assert result.frontier_ratio is not None and result.frontier_ratio < 1
    assert " more accurate than the model" in result.verdict()


@pytest.mark.parametrize("name, symmetric", [("stormer_verlet", True), ("rk4", False)])
def test_the_classical_errors_fall_at_the_methods_order(exact, name, symmetric):
    """Halving h divides the error at the horizon by 2^p (Störmer–Verlet 4, RK4 16): the
    error is C h^p (1 + O(h^q)), with q = 2 for a symmetric method and q = 1 otherwise, so
    at ωh ≤ ωΔt = 0.1 the ratio is within a factor 1 ± (ωΔt)^q of 2^p (measured on the
    first halvings, far above the reference's error)."""
    points = by_method(exact, name)
    assert [p.k for p in points[:4]] == [1, 2, 4, 8]
    p, tolerance = ORDERS[name], DT ** (2 if symmetric else 1)
    for coarse, fine in zip(points[:3], points[1:4]):
        assert fine.error_worst > 1e3 * exact.reference_error
        ratio = coarse.error_worst / fine.error_worst
        assert abs(ratio / 2**p - 1) <= tolerance, (coarse.k, ratio)


def test_the_refinement_stops_at_the_reference_floor(exact):
    """A method refines until its error is within the floor (a high order reaches it
    before max_refinement), and never past max_refinement."""
    yoshida6 = by_method(exact, "yoshida6")
    assert yoshida6[-1].error_worst <= exact.error_floor < yoshida6[-2].error_worst
    assert yoshida6[-1].k < MAX_K
    assert all(p.k <= MAX_K for p in exact.points)
    assert [p.k for p in by_method(exact, "stormer_verlet")] == [2**i for i in range(7)]


def test_the_clock_of_a_driven_system_is_left_out():
    """Forced mass–spring (q, p, τ): the errors are those of (q, p) against the
    reference, recomputed here; measured with τ (which grows to the horizon's time) they
    would be several times smaller. The model (one RK4 step) and the classical RK4 run at
    k = 1 are the same arithmetic, so their errors agree; the system has no energy
    invariant."""
    system = ForcedMassSpring()
    z0 = system.default_initial_conditions(jnp.float64)
    states = integrate(system, z0, DT, 5, method="gauss_legendre6")
    result = work_precision(RK4Step(system, DT), system, np.asarray(states), dt=DT,
                            horizon=HORIZON, methods="rk4", max_refinement=1)
    assert result.clock_components == (2,) and result.reference_method == "gauss_legendre6"
    m, (rk4,) = result.model_point, result.points
    assert m.energy_error_worst is None and rk4.energy_error_worst is None
    assert m.error_worst == pytest.approx(rk4.error_worst, rel=1e-8)
    ref = np.asarray(integrate(system, z0, DT, HORIZON, method="gauss_legendre6",
                               substeps=result.reference_substeps))[:, -1]
    model = np.asarray(gl.iterate(RK4Step(system, DT), z0, HORIZON + 1))[:, -1]
    kept = np.linalg.norm((model - ref)[:, :2], axis=-1) / np.linalg.norm(ref[:, :2], axis=-1)
    whole = np.linalg.norm(model - ref, axis=-1) / np.linalg.norm(ref, axis=-1)
    assert m.error_worst == pytest.approx(np.max(kept), rel=1e-8)
    assert m.error_median == pytest.approx(np.median(kept), rel=1e-8)
    assert np.max(whole) < 0.5 * m.error_worst


# --- the reference and the horizon ----------------------------------------------------


def growth_integrate(rate):
    """A stand-in for `integrate`: each step multiplies the state by `1 + rate(s)` (`s`
    the substeps), so references with `s` and `2s` substeps agree at step t to
    |((1 + rate(s)) / (1 + rate(2s)))^t − 1|."""

    def run(system, z0, dt, n_steps, *, method, substeps):
        factors = (1.0 + rate(substeps)) ** np.arange(n_steps + 1)
        return jnp.asarray(np.asarray(z0)[:, None, :] * factors[None, :, None])

    return run


def agreement(rate, s, t):
    return abs(((1 + rate(s)) / (1 + rate(2 * s))) ** t - 1)


def test_a_reference_converging_at_its_order_keeps_the_horizon(monkeypatch):
    """Control: an error δ/s^6 (6th order) halves 64-fold per refinement; the
    refinement ends at REFERENCE_TOLERANCE, the horizon stays, and the error is the
    Richardson estimate of the last run's (the last agreement / 63)."""
    rate = lambda s: 1e-5 / s**6  # noqa: E731
    monkeypatch.setattr(rr, "integrate", growth_integrate(rate))
    ref = rr.reference(HarmonicOscillator(), np.ones((2, 2)), DT, 100, np.ones(2), None)
    s = ref.substeps
    assert ref.method == "yoshida6" and ref.horizon == 100 and ref.cut is None
    assert agreement(rate, s // 2, 100) <= rr.REFERENCE_TOLERANCE < agreement(rate, s // 4, 100)
    assert ref.error == pytest.approx(agreement(rate, s // 2, 100) / 63, rel=1e-6)
    assert ref.states.shape == (2, 101, 2)


def test_a_reference_that_stops_converging_is_cut_to_the_steps_it_resolves(monkeypatch):
    """An error that does not shrink with the substeps (round-off or chaos: ±δ
    alternating) ends the refinement at its second agreement; where the references
    disagree by more than REFERENCE_RESOLVED at the horizon, the horizon is cut to the
    last step they agree to it, and the error is the agreement there, a bound."""
    rate = lambda s: 1e-5 * (-1) ** int(np.log2(s))  # noqa: E731
    monkeypatch.setattr(rr, "integrate", growth_integrate(rate))
    ref = rr.reference(HarmonicOscillator(), np.ones((2, 2)), DT, 100, np.ones(2), None)
    resolved = [t for t in range(101) if agreement(rate, 2, t) <= rr.REFERENCE_RESOLVED]
    assert ref.substeps == 4 and ref.cut == "reference"
    assert 0 < ref.horizon == resolved[-1] < 100 and ref.states.shape == (2, ref.horizon + 1, 2)
    assert ref.error == pytest.approx(agreement(rate, 2, ref.horizon), rel=1e-6)
    assert ref.error <= rr.REFERENCE_RESOLVED < agreement(rate, 2, ref.horizon + 1)


def test_runs_beyond_their_stability_limit_do_not_end_the_refinement(monkeypatch):
    """At a long stride the first runs are beyond the method's stability limit and agree
    with each other by chance, not at its order; the refinement goes on until the runs
    agree on the first step, then converges as usual (the horizon kept). Control: the
    plateau of the test above, whose runs agree on the first step, ends it at once."""
    rate = lambda s: {1: 3e-3, 2: -3e-3}.get(s, 1e-5 / s**6)  # noqa: E731
    monkeypatch.setattr(rr, "integrate", growth_integrate(rate))
    ref = rr.reference(HarmonicOscillator(), np.ones((2, 2)), DT, 100, np.ones(2), None)
    assert agreement(rate, 2, 1) > rr.REFERENCE_RESOLVED  # would have ended it at s = 4
    assert ref.horizon == 100 and ref.cut is None and ref.substeps >= 8
    assert agreement(rate, ref.substeps // 2, 100) <= rr.REFERENCE_TOLERANCE


def test_a_time_budget_cuts_the_horizon_at_a_segment_end():
    """With a budget the reference's first run cannot keep (1 µs), the horizon is its
    second segment end (the first call, which compiles, is not counted), and the
    reference is its first two runs (its error their agreement, a bound); the
    comparison is measured there (the exact model's error within the reference's,
    Störmer–Verlet's that of its own run to that step) and the verdict says so."""
    system, data = oscillator_data()
    result = work_precision(ExactFlow(DT), system, data, horizon=HORIZON, max_refinement=1,
                            methods="stormer_verlet", budget=1e-6)
    n = 2 * rr.segment_length(HORIZON)
    assert result.horizon == n < HORIZON and result.horizon_cut == "budget"
    assert result.requested_horizon == HORIZON and result.reference_substeps == 2
    (verlet,) = result.points
    z0 = np.asarray(data.states[:, 0])
    exact = z0 @ np.linalg.matrix_power(np.asarray(rotation(DT)), n).T
    mine = np.asarray(integrate(system, z0, DT, n, method="stormer_verlet"))[:, -1]
    expected = np.linalg.norm(mine - exact, axis=-1) / np.linalg.norm(exact, axis=-1)
    assert result.reference_error < 1e-4 * verlet.error_worst
    assert verlet.error_worst == pytest.approx(np.max(expected), rel=1e-4)
    assert result.model_point.error_worst <= result.reference_error
    assert result.verdict().startswith(f"at step {n} of {HORIZON} (the time budget): ")
    assert json.loads(json.dumps(result.metrics))["horizon_cut"] == "budget"


# --- the ratios on hand-made points ----------------------------------------------------


def point(method, k, error, speed):
    return WorkPoint(method, k, DT / (k or 1), error, error, None, None, speed)


def result_of(model, points):
    """A `WorkPrecision` around hand-made points (for its verdict)."""
    return WorkPrecision(model, tuple(points), pareto_frontier(points), compare(model, points),
                         1e-14, 8, 4e-14, HORIZON, DT, 3, (), MAX_K, {}, "M", "S", "float64")


FAST_COARSE = point("verlet", 1, 1e-2, 200.0)
SLOW_FINE = point("yoshida6", 2, 1e-4, 50.0)
SLOWER_FINER = point("yoshida6", 4, 1e-5, 10.0)
DOMINATED = point("euler", 1, 2e-2, 150.0)
FAILED = point("euler", 1, math.inf, 1000.0)
POINTS = [FAST_COARSE, SLOW_FINE, SLOWER_FINER, DOMINATED, FAILED]


def test_the_frontier_keeps_the_runs_no_other_beats_in_both_error_and_speed():
    assert pareto_frontier(POINTS) == (FAST_COARSE, SLOW_FINE, SLOWER_FINER)
    assert pareto_frontier([FAILED]) == ()
    twin = point("twin", 1, 1e-2, 300.0)  # as accurate as FAST_COARSE, faster: beats it
    assert pareto_frontier([FAST_COARSE, twin]) == (twin,)


def test_the_model_wins_at_equal_cost_and_loses_at_equal_error():
    """Model at error 1e-3 and 100 states/s: the most accurate run as fast is the
    failed one or FAST_COARSE (1e-2, taken: the failed one's error is infinite) →
    frontier_ratio 10; the fastest run at least as accurate is SLOW_FINE (50 states/s)
    → equal_error_speedup 2."""
    model = point("M", None, 1e-3, 100.0)
    c = compare(model, POINTS)
    assert c.frontier_ratio == pytest.approx(10.0) and c.equal_cost == FAST_COARSE
    assert c.equal_error_speedup == pytest.approx(2.0) and c.equal_error == SLOW_FINE
    assert c.fastest == FAILED
    assert result_of(model, POINTS).verdict() == (
        "at equal cost the model is 10× more accurate than the best classical run, verlet "
        "(h = Δt); the model is 2× faster than the fastest classical run reaching its "
        "error, yoshida6 (h = Δt/2)")


def test_a_classical_run_wins_at_equal_cost_and_at_equal_error():
    model = point("M", None, 1e-2, 100.0)
    fine_fast = point("yoshida6", 1, 2.5e-4, 510.0)
    c = compare(model, [fine_fast, DOMINATED])
    assert c.frontier_ratio == pytest.approx(0.025) and c.equal_error_speedup == pytest.approx(
        100 / 510)
    assert result_of(model, [fine_fast, DOMINATED]).verdict() == (
        "at equal cost yoshida6 (h = Δt) is 40× more accurate than the model; reaching "
        "the model's error, it is 5.1× faster")


def test_a_shortened_horizon_is_named_first_in_the_verdict():
    """A horizon the reference cut says to which step and why, then the same sentence;
    an uncut one (the negative control) adds nothing."""
    model = point("M", None, 1e-3, 100.0)
    cut = dataclasses.replace(result_of(model, POINTS), horizon=40, requested_horizon=HORIZON,
                              horizon_cut="reference")
    plain = result_of(model, POINTS).verdict()
    assert cut.verdict() == (f"at step 40 of {HORIZON} (the last step the reference resolves "
                             f"to {rr.REFERENCE_RESOLVED:g}): " + plain)
    assert not plain.startswith("at step")


def test_a_run_within_the_timing_precision_of_the_model_is_of_equal_cost():
    """Throughputs closer than SPEED_TOLERANCE are one cost, and a tie goes to the
    classical side: a run a little slower than the model is its equal-cost run (here
    more accurate: frontier_ratio 0.5), not a faster one that diverged. The negative
    control: a run slower by more than the tolerance is not of equal cost."""
    model = point("M", None, 0.2, 100.0)
    diverged = point("verlet", 1, 1e13, 200.0)
    near = point("verlet", 2, 0.1, 100.0 / (1 + 0.9 * SPEED_TOLERANCE))
    c = compare(model, [diverged, near])
    assert c.equal_cost == near and c.frontier_ratio == pytest.approx(0.5)
    far = point("verlet", 2, 0.1, 100.0 / (1 + 1.1 * SPEED_TOLERANCE))
    c = compare(model, [diverged, far])
    assert c.equal_cost == diverged and c.frontier_ratio == pytest.approx(5e13)
    assert as_fast(near, model) and not as_fast(far, model)


def test_the_ratios_are_none_where_no_classical_run_qualifies():
    """A model faster than every run has no frontier_ratio (the verdict says how much
    faster than the fastest); one more accurate than every run has no
    equal_error_speedup."""
    model = point("M", None, 1e-7, 1e4)
    c = compare(model, [FAST_COARSE, SLOW_FINE])
    assert c.frontier_ratio is None and c.equal_error_speedup is None
    assert c.equal_cost is None and c.equal_error is None and c.fastest == FAST_COARSE
    assert result_of(model, [FAST_COARSE, SLOW_FINE]).verdict() == (
        "the model is faster than every classical run, 50× the fastest, verlet (h = Δt); "
        f"no classical run reaches the model's error with h ≥ Δt/{MAX_K}")
    assert compare(model, []) == (None, None, None, None, None)
    coarse_model = point("M", None, 0.1, 1e4)  # the fastest run is also more accurate
    assert result_of(coarse_model, [FAST_COARSE, SLOW_FINE]).verdict() == (
        "the model is faster than every classical run, 50× the fastest, verlet (h = Δt); "
        "that run is 10× more accurate than the model")


def test_ratio_conventions_at_zero_and_infinite_errors():
    """x/0 = ∞ for a model of error 0; a failed model (error ∞) has ratio 0 against a
    run that completed and says so in its verdict."""
    exact_model = point("M", None, 0.0, 100.0)
    assert compare(exact_model, [FAST_COARSE]).frontier_ratio == math.inf
    assert compare(exact_model, [point("GL", 1, 0.0, 200.0)]).frontier_ratio == 1.0
    failed = point("M", None, math.inf, 100.0)
    c = compare(failed, POINTS)
    assert c.frontier_ratio == 0.0 and c.equal_error == FAST_COARSE
    assert result_of(failed, POINTS).verdict().startswith(
        f"the model's rollout did not reach step {HORIZON}; the fastest classical run that "
        "did, verlet (h = Δt), runs at 2× the model's speed")


def test_the_refinement_stops_at_the_floor_or_at_a_plateau_below_its_band(monkeypatch):
    """The stopping rule on made-up errors e(k) (the integration replaced): a failed run
    and an error that grows while above PLATEAU_BELOW (not converging yet) are refined
    on; below it an error that stops falling ends the refinement (round-off), and so
    does an error within the floor."""
    sequence = {1: None, 2: 0.3, 4: 0.5, 8: 1e-4, 16: 1e-9, 32: 2e-9, 64: 1e-10}
    reference = np.ones((2, 2))

    def fake_integrate(system, z0, dt, n_steps, *, method, substeps):
        if sequence[substeps] is None:
            raise IntegrationError("made up")
        return jnp.asarray(np.broadcast_to(reference[:, None] * (1 + sequence[substeps]), (2, 3, 2)))

    monkeypatch.setattr(wp, "integrate", fake_integrate)
    judge = wp._Judge(final=reference, weights=np.ones(2), energy=None, energy0=None)
    run = lambda floor, k: wp._method_points(  # noqa: E731
        HarmonicOscillator(), RK4(), reference, DT, 2, judge, floor, k)
    points, _ = run(1e-12, 256)
    assert [p.k for p in points] == [1, 2, 4, 8, 16, 32]
    assert points[0].failed and points[-1].error_worst == pytest.approx(2e-9)
    assert [p.k for p in run(1e-8, 256)[0]] == [1, 2, 4, 8, 16]
    assert [p.k for p in run(1e-12, 10)[0]] == [1, 2, 4, 8]
    # once a run is as accurate as the model and slower, finer runs change no ratio
    faster_model = WorkPoint("model", None, DT, 1e-3, 1e-3, None, None, math.inf)
    settled = wp._method_points(HarmonicOscillator(), RK4(), reference, DT, 2, judge, 1e-12,
                                256, faster_model)[0]
    assert [p.k for p in settled] == [1, 2, 4, 8]  # 1e-4 ≤ 1e-3 at k = 8, and slower
    slower_model = WorkPoint("model", None, DT, 1e-3, 1e-3, None, None, 0.0)
    assert [p.k for p in wp._method_points(HarmonicOscillator(), RK4(), reference, DT, 2, judge,
                                           1e-12, 256, slower_model)[0]] == [1, 2, 4, 8, 16, 32]


def test_many_trajectories_are_thinned_to_a_sample_chosen_by_the_key(key):
    """Beyond MAX_TRAJECTORIES trajectories a sample of that many distinct ones, in
    their order, the same for the same key; fewer are all kept."""
    states = jnp.arange(2.0 * (wp.MAX_TRAJECTORIES + 6)).reshape(-1, 1, 2)
    k = key()
    chosen = np.asarray(wp._chosen(states, k))
    firsts = chosen[:, 0, 0]
    assert chosen.shape == (wp.MAX_TRAJECTORIES, 1, 2)
    assert np.all(np.diff(firsts) > 0) and set(firsts) <= set(np.asarray(states)[:, 0, 0])
    assert np.array_equal(chosen, np.asarray(wp._chosen(states, k)))
    assert not np.array_equal(chosen, np.asarray(wp._chosen(states, key())))
    assert wp._chosen(states[:5], k).shape == (5, 1, 2)


# --- bad input ---------------------------------------------------------------------------


def bad(match, model=None, system=None, data=None, **kwargs):
    system_, data_ = oscillator_data()
    with pytest.raises(ValueError, match=match):
        work_precision(ExactFlow(DT) if model is None else model, system or system_,
                       data_ if data is None else data, **kwargs)


def test_bad_input_is_a_value_error_naming_what_was_expected():
    bad(r"dimensions disagree: the data's states have d=3, HarmonicOscillator has dim=2",
        data=np.zeros((2, 4, 3)), dt=DT)
    bad(r"horizon must be >= 1, got 0", horizon=0)
    bad(r"method must be one of .* got 'rk5'", methods=["rk4", "rk5"])
    bad(r"methods must name at least one integrator", methods=[])
    bad(r"'yoshida4' needs a separable", model=RK4Step(ForcedMassSpring(), DT),
        system=ForcedMassSpring(), data=np.zeros((2, 4, 3)), dt=DT, methods="yoshida4")
    bad(r"model must be a geomlearn integrator .* got function", model=lambda z: z)
    bad(r"system must be a geomlearn.systems.AbstractSystem", system="oscillator")
    bad(r"the data's time step is needed", data=np.zeros((2, 4, 2)))
    bad(r"initial states must be finite", data=np.full((2, 4, 2), np.nan), dt=DT)


def test_the_command_line_keeps_its_results_when_no_comparison_can_be_made(monkeypatch,
                                                                            capsys):
    """No system: nothing is compared. A comparison whose reference fails is said on
    stderr and recorded as None, the rest of the evaluation kept; any other error is
    not swallowed."""
    from geomlearn.cli import _evaluations

    assert _evaluations._against_classical({"model": "m"}, None, None, None) == {"model": "m"}

    def failing(error):
        def run(*args, **kwargs):
            raise error
        return run

    monkeypatch.setattr(_evaluations, "work_precision",
                        failing(IntegrationError("the reference failed at step 7")))
    out = _evaluations._against_classical({"model": "m"}, "model", HarmonicOscillator(), "data")
    assert out == {"model": "m", "work_precision": None}
    assert ("geomlearn: no comparison with the classical integrators: the reference failed "
            "at step 7") in capsys.readouterr().err
    monkeypatch.setattr(_evaluations, "work_precision", failing(RuntimeError("a bug")))
    with pytest.raises(RuntimeError, match="a bug"):
        _evaluations._against_classical({}, "model", HarmonicOscillator(), "data")


def test_the_panel_draws_a_diverged_run_at_the_cap_not_at_its_error():
    """A classical run whose error passed _DIVERGED_ERROR is drawn at it, as a triangle,
    and the error axis stays within a few decades; a panel without one (the negative
    control) has no triangle and keeps every error as measured."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from geomlearn.plotting import _DIVERGED_ERROR, _work_precision_panel

    model = point("M", None, 0.2, 100.0)

    def drawn(points):
        fig, ax = plt.subplots()
        _work_precision_panel(ax, result_of(model, points).metrics)
        ys = [y for line in ax.get_lines() for y in line.get_ydata()]
        markers = [line.get_marker() for line in ax.get_lines()]
        bottom, top = ax.get_ylim()
        plt.close(fig)
        return ys, markers, top

    ys, markers, top = drawn([point("verlet", 1, 1.9e13, 200.0), point("verlet", 2, 0.17, 90.0)])
    assert max(ys) == _DIVERGED_ERROR and "^" in markers and top < 1e3
    ys, markers, _ = drawn([point("verlet", 2, 0.17, 90.0), point("verlet", 4, 0.05, 45.0)])
    assert sorted(ys) == [0.05, 0.17, 0.2] and "^" not in markers
