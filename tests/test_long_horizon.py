"""Tests for the long-horizon evaluation (`evaluate(..., horizon=N)`) and for evaluation
without a system: exact escape steps (independent of the origin), valid times and trends
of maps with known orbits, streaming against a direct computation, and the command
line's warning."""

import json
import math
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn import cli
from geomlearn.cli._commands import DEFAULT_HORIZON
from geomlearn.cli._main import _parser
from geomlearn.evaluation import (
    ESCAPE_FACTOR,
    TREND_STEPS,
    VALID_FLOOR,
    VALID_TOLERANCE,
    escape_warning,
    long_horizon,
)
from geomlearn.integrators import GaussLegendre6, ImplicitMidpoint, integrate
from geomlearn.io import register
from geomlearn.models import AbstractFeedForwardIntegrator
from geomlearn.systems import AbstractSystem, HarmonicOscillator

from _tiny_models import TinyShear, TinyWindow

DT = 0.1
Z0 = np.array([[1.0, 0.0], [0.3, -0.8]])  # norms 1 and 0.854: the data's bound is 1


class LinearMap(AbstractFeedForwardIntegrator):
    """z ↦ s R(θ) z + (c, 0): a scaled rotation, shifted in q by `c` (arrays, so that one
    compiled rollout serves every map)."""

    structure: ClassVar[str] = "none"
    dim: int = eqx.field(static=True)
    M: jax.Array
    b: jax.Array

    def __init__(self, dim=2, *, theta=DT, scale=1.0, shift=0.0, key=None, dtype=None):
        c, s = np.cos(theta), np.sin(theta)
        self.dim = dim
        self.M = jnp.asarray(scale * np.array([[c, s], [-s, c]]), dtype=jnp.float64)
        self.b = jnp.asarray([shift, 0.0], dtype=jnp.float64)

    def __call__(self, z, h=None):
        return self.M.astype(z.dtype) @ z + self.b.astype(z.dtype)


class AffineMap(AbstractFeedForwardIntegrator):
    """z ↦ s R(θ) (z − c) + c: a scaled rotation about the point c."""

    structure: ClassVar[str] = "none"
    dim: int = eqx.field(static=True)
    M: jax.Array
    c: jax.Array

    def __init__(self, dim=2, *, theta=DT, scale=1.0, centre=(0.0, 0.0), key=None, dtype=None):
        c, s = np.cos(theta), np.sin(theta)
        self.dim = dim
        self.M = jnp.asarray(scale * np.array([[c, s], [-s, c]]), dtype=jnp.float64)
        self.c = jnp.asarray(centre, dtype=jnp.float64)

    def __call__(self, z, h=None):
        c = self.c.astype(z.dtype)
        return self.M.astype(z.dtype) @ (z - c) + c


class NaNBelowHalf(AbstractFeedForwardIntegrator):
    """NaN where q < 0.5, else the identity."""

    structure: ClassVar[str] = "none"
    dim: int = eqx.field(static=True)

    def __init__(self, dim=2, *, key=None, dtype=None):
        self.dim = dim

    def __call__(self, z, h=None):
        return jnp.where(z[0] < 0.5, jnp.nan, 1.0) * z


class Position(AbstractSystem):
    """At rest (a zero vector field), with the 'invariant' q: a test system whose
    invariant a map can drift in a known way."""

    dim: ClassVar[int] = 2

    def vector_field(self, z):
        return jnp.zeros_like(z)

    def hamiltonian(self, z):
        return z[0]

    def default_initial_conditions(self, dtype=None):
        return jnp.asarray(Z0)

    @property
    def invariants(self):
        return {"position": self.hamiltonian}


def oscillator_data(n_steps=20):
    """Exact harmonic-oscillator trajectories from `Z0` (the rotation by `DT` per step)."""
    t = np.arange(n_steps + 1) * DT
    q = Z0[:, :1] * np.cos(t) + Z0[:, 1:] * np.sin(t)
    p = Z0[:, 1:] * np.cos(t) - Z0[:, :1] * np.sin(t)
    return gl.TrajectoryData(jnp.asarray(np.stack([q, p], axis=-1)), DT)


def symmetric_data(n_steps=20):
    """`oscillator_data` from `Z0` and from `-Z0`: the data's mean is the origin, its
    radius about it 1."""
    data = oscillator_data(n_steps)
    return gl.TrajectoryData(jnp.concatenate([data.states, -data.states]), DT)


def first_escape(norm0, s, bound=1.0):
    """The first t with norm0 · s^t > 10 · bound (or None for s ≤ 1): the escape of a
    scaled rotation about the data's centre."""
    if s <= 1.0:
        return None
    t = math.floor(math.log(ESCAPE_FACTOR * bound / norm0) / math.log(s)) + 1
    assert norm0 * s ** (t - 1) < ESCAPE_FACTOR * bound * (1 - 1e-9)  # far from the boundary
    return t


# ------------------------------------------------------------------------ escape


@pytest.mark.parametrize("scale", [1.01, 1.0, 0.9])
def test_escape_step_of_a_scaled_rotation_is_exact(scale):
    result = gl.evaluate(LinearMap(scale=scale), HarmonicOscillator(), symmetric_data(),
                         horizon=400)
    m = result["long_horizon"]
    norms = np.linalg.norm(np.concatenate([Z0, -Z0]), axis=1)
    expected = [first_escape(r, scale) for r in norms]
    assert m["escape_step"] == expected
    np.testing.assert_allclose(m["data_centre"], [0.0, 0.0], rtol=0, atol=1e-15)
    assert m["data_bound"] == pytest.approx(1.0, rel=1e-15)
    assert m["escape_bound"] == pytest.approx(ESCAPE_FACTOR, rel=1e-15)
    assert m["time_components"] == []
    escaped = [e for e in expected if e is not None]
    assert m["n_escaped"] == len(escaped)
    assert m["min_escape_step"] == (min(escaped) if escaped else None)
    if scale > 1:  # all four escaped, the median between 232 and 248
        assert expected == [232, 248, 232, 248] and m["median_escape_step"] == 240
        line = escape_warning(m)
        assert line.startswith("warning: 4 of 4 rollouts escaped") and "first at step 232" in line
        assert "from the data's mean" in line
    else:
        assert m["median_escape_step"] is None and escape_warning(m) is None
    json.dumps(dict(result))


@pytest.mark.parametrize("scale", [1.01, 0.99])
def test_escapes_do_not_depend_on_the_origin(scale):
    """Data and model translated by a constant vector escape at the same steps; a
    translation far beyond the data's size would otherwise decide the escapes."""
    data = oscillator_data()
    shift = np.array([30.0, -20.0])
    moved = gl.TrajectoryData(data.states + jnp.asarray(shift)[None, None], DT)
    here = gl.evaluate(AffineMap(scale=scale), None, data, horizon=400)["long_horizon"]
    there = gl.evaluate(AffineMap(scale=scale, centre=shift), None, moved,
                        horizon=400)["long_horizon"]
    assert there["escape_step"] == here["escape_step"]
    assert there["data_bound"] == pytest.approx(here["data_bound"], rel=1e-12)
    np.testing.assert_allclose(np.subtract(there["data_centre"], here["data_centre"]), shift,
                               rtol=1e-12)
    # the escapes are those about the data's centre: a growing rotation about the origin
    # leaves the radius 10 B about the mean of the data at a step computed directly
    if scale > 1:
        states = np.asarray(data.states, dtype=np.float64)
        centre = states.reshape(-1, 2).mean(axis=0)
        bound = np.max(np.linalg.norm(states - centre, axis=-1))
        roll = np.asarray(gl.iterate(AffineMap(scale=scale), data.states[:, 0], 401))
        far = np.linalg.norm(roll - centre, axis=-1) > ESCAPE_FACTOR * bound
        assert here["escape_step"] == [int(np.argmax(row)) for row in far]
    else:
        assert here["escape_step"] == [None, None]


def test_a_non_finite_state_escapes_and_the_median_counts_survivors():
    m = gl.evaluate(NaNBelowHalf(), HarmonicOscillator(), oscillator_data(), horizon=50)
    lh = m["long_horizon"]
    assert lh["escape_step"] == [None, 1] and lh["n_escaped"] == 1
    assert lh["median_escape_step"] is None  # the median of (1, beyond the horizon)
    assert lh["valid_time"][1] == 1  # a NaN state is not valid
    # the invariant statistics stop before the escape: the second rollout has none
    assert lh["invariants"]["energy"]["max_drift"][1] is None
    assert lh["invariants"]["energy"]["trend"][1] is None


# -------------------------------------------------------------------- valid time


@pytest.mark.parametrize("eps", [3e-3, -3e-3])
def test_valid_time_is_relative_to_the_reference_norm(eps):
    """The map z ↦ (1 + ε) R(h) z against the oscillator's flow R(h): the error at step n
    is exactly |(1 + ε)^n − 1| relative to the reference's norm (the model's norm would
    give |1 − (1 + ε)^{-n}| and another crossing)."""
    m = gl.evaluate(LinearMap(scale=1 + eps), HarmonicOscillator(), oscillator_data(),
                    horizon=400)["long_horizon"]
    n = np.arange(1, 401)
    against_reference = np.abs((1 + eps) ** n - 1)
    against_model = np.abs(1 - (1 + eps) ** -n)
    expected = int(n[np.argmax(against_reference > VALID_TOLERANCE)])
    other = int(n[np.argmax(against_model > VALID_TOLERANCE)])
    assert min(abs(against_reference[expected - 1 - k] - VALID_TOLERANCE) for k in (0, 1)) > 1e-6
    assert expected != other  # the two norms tell different valid times
    assert m["valid_time"] == [expected] * 2
    assert m["valid_floor"] == VALID_FLOOR


def crossing(delta_angle):
    """The first t with 2 sin(t Δ / 2) > VALID_TOLERANCE: the relative error between two
    rotations whose angles per step differ by Δ."""
    t = 2 * math.asin(VALID_TOLERANCE / 2) / abs(delta_angle)
    assert abs(t - round(t)) > 1e-3  # not at a tie
    return math.floor(t) + 1


def test_valid_time_of_a_detuned_rotation_against_the_oscillator():
    # the model rotates by DT (1 + 7e-3) per step, the oscillator's flow by DT
    theta = DT * (1 + 7e-3)
    m = gl.evaluate(LinearMap(theta=theta), HarmonicOscillator(), oscillator_data(),
                    horizon=400)["long_horizon"]
    assert m["valid_time"] == [crossing(theta - DT)] * 2 == [143, 143]
    assert m["reference_method"] == "gauss_legendre6" and m["escape_step"] == [None, None]
    assert m["median_valid_time"] == 143 and m["min_valid_time"] == 143
    # the exact flow stays valid against the 6th-order reference
    exact = gl.evaluate(LinearMap(), HarmonicOscillator(), oscillator_data(), horizon=400)
    assert exact["long_horizon"]["valid_time"] == [None, None]


def test_valid_time_measures_the_reference_integrator_too():
    # the implicit midpoint rule rotates the oscillator by 2 arctan(h/2) per step exactly,
    # so the exact flow leaves it when the accumulated phase difference reaches the tolerance
    m = gl.evaluate(LinearMap(), HarmonicOscillator(), oscillator_data(), horizon=1300,
                    horizon_method=ImplicitMidpoint())["long_horizon"]
    expected = crossing(DT - 2 * math.atan(DT / 2))
    assert m["valid_time"] == [expected] * 2 == [1203, 1203]
    assert m["reference_method"] == "implicit_midpoint"


# ------------------------------------------------------------------------- trend


def test_trend_of_a_linear_drift_is_its_slope():
    c, N = 1e-3, 2000
    data = gl.TrajectoryData(jnp.asarray(np.stack([Z0, Z0], axis=1)), DT)  # at rest
    m = gl.evaluate(LinearMap(theta=0.0, shift=c), Position(), data, horizon=N)["long_horizon"]
    inv = m["invariants"]["position"]
    # δ_t = c t / max|q0| = c t exactly: slope c per step
    np.testing.assert_allclose(inv["trend"], [c * TREND_STEPS] * 2, rtol=1e-9)
    np.testing.assert_allclose(inv["max_drift"], [c * N] * 2, rtol=1e-9)
    assert inv["worst_trend"] == pytest.approx(c * TREND_STEPS, rel=1e-9)
    # a steady drift: the fitted line's change over the horizon is the whole drift
    for trend, top in zip(inv["trend"], inv["max_drift"]):
        assert trend * N / TREND_STEPS == pytest.approx(top, rel=1e-9)


def test_trend_of_a_bounded_oscillation_is_near_zero():
    # q oscillates: q_t = r cos(θ t + φ) over 40 whole periods of 50 steps
    N, theta = 2000, 2 * math.pi / 50
    data = gl.TrajectoryData(jnp.asarray(np.stack([Z0, Z0], axis=1)), DT)
    m = gl.evaluate(LinearMap(theta=theta), Position(), data, horizon=N)["long_horizon"]
    inv = m["invariants"]["position"]
    t = np.arange(1, N + 1)
    for i, (q0, p0) in enumerate(Z0):
        q = q0 * np.cos(theta * t) + p0 * np.sin(theta * t)
        delta = (q - q0) / 1.0
        slope = np.polyfit(t, delta, 1)[0]
        np.testing.assert_allclose(inv["trend"][i], slope * TREND_STEPS, rtol=1e-6, atol=1e-12)
        np.testing.assert_allclose(inv["max_drift"][i], np.max(np.abs(delta)), rtol=1e-12)
        # bounded: the fitted line changes over the horizon by a small part of the drift
        assert abs(inv["trend"][i]) * N / TREND_STEPS < 0.05 * inv["max_drift"][i]
    assert inv["worst_max_drift"] > 1.0


# ------------------------------------------------------ streaming against direct


def direct(model, system, data, horizon, invariants, *, n_init=1, **iterate_options):
    """Every long-horizon figure computed from the whole rollout and the whole reference:
    escapes about the data's mean, errors over the reference's norm with its floor."""
    states = np.asarray(data.states)
    init = data.states[:, :n_init] if n_init > 1 else data.states[:, 0]
    roll = np.asarray(gl.iterate(model, init, horizon + 1, **iterate_options))
    ref = np.asarray(integrate(system, data.states[:, n_init - 1], DT, horizon + 1 - n_init,
                               method=GaussLegendre6()))
    centre = states.reshape(-1, states.shape[-1]).mean(axis=0)
    bound = np.max(np.linalg.norm(states - centre, axis=-1))
    new, t = roll[:, n_init:], np.arange(n_init, horizon + 1)
    out = {"states": roll, "escape": [], "valid": [], "max": {}, "trend": {}}
    start = {k: np.asarray(jax.vmap(fn)(data.states[:, 0])) for k, fn in invariants.items()}
    for b in range(len(states)):
        far = np.linalg.norm(new[b] - centre, axis=-1) > ESCAPE_FACTOR * bound
        bad = ~np.isfinite(new[b]).all(-1) | far
        out["escape"].append(int(t[np.argmax(bad)]) if bad.any() else None)
        size = np.maximum(np.linalg.norm(ref[b, 1:], axis=-1),
                          VALID_FLOOR * np.linalg.norm(ref[b, 0]))
        err = np.linalg.norm(new[b] - ref[b, 1:], axis=-1) / size
        cross = ~(err <= VALID_TOLERANCE)
        out["valid"].append(int(t[np.argmax(cross)]) if cross.any() else None)
    for k, fn in invariants.items():  # up to the escape
        vals = np.asarray(jax.vmap(jax.vmap(fn))(jnp.asarray(new)))
        delta = (vals - start[k][:, None]) / np.max(np.abs(start[k]))
        alive = [t < (horizon + 1 if e is None else e) for e in out["escape"]]
        out["max"][k] = np.array([np.max(np.abs(d[a])) for d, a in zip(delta, alive)])
        out["trend"][k] = np.array([np.polyfit(t[a], d[a], 1)[0] * TREND_STEPS
                                    for d, a in zip(delta, alive)])
    return out


def check_against_direct(lh, expected, names):
    np.testing.assert_allclose(lh.states, expected["states"], rtol=0, atol=1e-13)
    assert lh.metrics["escape_step"] == expected["escape"]
    assert lh.metrics["valid_time"] == expected["valid"]
    for k in names:
        inv = lh.metrics["invariants"][k]
        np.testing.assert_allclose(inv["max_drift"], expected["max"][k], rtol=1e-10)
        np.testing.assert_allclose(inv["trend"], expected["trend"][k], rtol=1e-7, atol=1e-12)


def test_streaming_equals_the_whole_rollout_for_a_point_model(key):
    model, system, data, N = TinyShear(2, key=key()), HarmonicOscillator(), oscillator_data(), 333
    task = model.task()
    lh = long_horizon(model, task, data.states, horizon=N, invariants=system.invariants,
                      system=system, integrator=GaussLegendre6(), dt=DT,
                      keep_states=True, chunk=7)  # many chunks, the last one partly beyond N
    expected = direct(model, system, data, N, system.invariants)
    assert any(v is not None for v in expected["valid"])  # a crossing to compare
    check_against_direct(lh, expected, ["energy"])
    # the decimated series are the deviation (and its running maximum) at their steps,
    # NaN from the escape on
    states = jnp.asarray(expected["states"])
    H = np.asarray(jax.vmap(jax.vmap(system.hamiltonian))(states))
    delta = (H - H[:, :1]) / np.max(np.abs(H[:, 0]))
    running = np.maximum.accumulate(np.abs(delta), axis=1)
    for b, escape in enumerate(expected["escape"]):
        alive = lh.steps < (N + 1 if escape is None else escape)
        assert alive.sum() > 10 and np.all(np.isnan(lh.drift["energy"][b, ~alive]))
        np.testing.assert_allclose(lh.drift["energy"][b, alive], delta[b, lh.steps[alive]],
                                   rtol=1e-10)
        np.testing.assert_allclose(lh.max_drift["energy"][b, alive],
                                   running[b, lh.steps[alive]], rtol=1e-10)


def test_streaming_equals_the_whole_rollout_for_a_transformer(key):
    # windows of T = 4 advanced by pw = 3 rows: chunks are cut at whole model steps
    model, system, data, N = TinyWindow(2, key=key()), HarmonicOscillator(), oscillator_data(), 200
    task = model.task(seq_length=4, prediction_window=3)
    lh = long_horizon(model, task, data.states, horizon=N, invariants=system.invariants,
                      system=system, integrator=GaussLegendre6(), dt=DT,
                      keep_states=True, chunk=10)
    expected = direct(model, system, data, N, system.invariants, n_init=4, prediction_window=3)
    check_against_direct(lh, expected, ["energy"])
    with pytest.raises(ValueError, match="does not go beyond the 4 given states"):
        long_horizon(model, task, data.states, horizon=3, invariants={}, bound=1.0)


def test_evaluate_rolls_a_volume_preserving_transformer_out(key):
    rb = gl.systems.RigidBody()
    data = gl.TrajectoryData.from_system(rb, rb.default_initial_conditions(), 0.2, 8)
    model = gl.VolumePreservingTransformer(3, n_blocks=1, n_linear=1, L=1, key=key())
    result = gl.evaluate(model, rb, data, seq_length=3, horizon=300, keep_states=True)
    lh = result["long_horizon"]
    assert set(lh["invariants"]) == {"energy", "casimir"} and lh["horizon"] == 300
    assert result.long_horizon.states.shape == (2, 301, 3)
    # the given window, then the rollout that the short evaluation also made
    np.testing.assert_allclose(result.long_horizon.states[:, :9], result.rollout, rtol=0,
                               atol=1e-13)
    assert "casimir, long" in result.summary(title="vpt")


# --------------------------------------------------------------- without a system


def test_evaluate_without_a_system_for_a_sympnet(key):
    data = oscillator_data(30)
    model = gl.GSympNet(2, n_layers=2, width=4, key=key())
    result = gl.evaluate(model, None, data, horizon=500)
    assert result["system"] is None and result["invariant_drift"] == {}
    assert result["reference_states_per_second"] is None and result["reference_method"] is None
    assert set(result["trajectory_error"]) == {"1", "10", "30"}
    assert result["structure_residual"]["symplecticity"] < 1e-12
    lh = result["long_horizon"]
    assert lh["invariants"] == {} and lh["valid_time"] == [None, None]
    assert lh["reference_method"] is None and len(lh["escape_step"]) == 2
    text = result.summary(title="no system")
    assert "valid time" in text and "n/a (no reference solution)" in text
    json.dumps(dict(result))
    with pytest.raises(ValueError, match="dimensions disagree: model.dim=2, reference"):
        gl.evaluate(model, None, jnp.zeros((2, 5, 4)))


def test_evaluate_without_a_system_measures_a_learned_energy(key):
    data, N = oscillator_data(10), 200
    hnn = gl.HamiltonianNeuralNetwork(2, width=8, depth=1, key=key())
    result = gl.evaluate(hnn, None, data, horizon=N, keep_states=True)
    assert set(result["invariant_drift"]) == {"learned_energy"}
    assert set(result["reference_invariant_drift"]) == {"learned_energy"}
    inv = result["long_horizon"]["invariants"]["learned_energy"]
    # the learned energy along the model's own rollout, computed directly
    roll = jnp.asarray(result.long_horizon.states)
    np.testing.assert_allclose(roll[:, :11], result.rollout, rtol=0, atol=1e-13)
    H = np.asarray(jax.vmap(jax.vmap(hnn.hamiltonian))(roll))
    # over the learned energy's range on the data (its constant is arbitrary)
    span = np.ptp(np.asarray(jax.vmap(jax.vmap(hnn.hamiltonian))(data.states)))
    delta = (H[:, 1:] - H[:, :1]) / span
    np.testing.assert_allclose(inv["max_drift"], np.max(np.abs(delta), axis=1), rtol=1e-8)
    assert inv["scale"] == pytest.approx(span, rel=1e-12)
    assert 0 < max(inv["max_drift"]) < 1e-2  # the implicit midpoint rule: O(h²), bounded
    assert result.long_horizon.drift["learned_energy"].shape == (2, len(result.long_horizon.steps))


# ------------------------------------------------------------- report, options


def test_report_draws_the_long_horizon_panel(tmp_path):
    result = gl.evaluate(LinearMap(scale=1.01), HarmonicOscillator(), oscillator_data(),
                         horizon=400)
    history = {"epoch": [1, 2], "loss": [1.0, 0.5], "val_loss": [None, None]}
    assert gl.plotting.report(tmp_path / "r.png", history=history, evaluation=result)
    assert (tmp_path / "r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bare = gl.evaluate(LinearMap(), None, oscillator_data(), horizon=400)
    assert gl.plotting.report(tmp_path / "bare.png", history=history, evaluation=bare)


def test_option_checks():
    data = symmetric_data()
    with pytest.raises(ValueError, match="horizon must be"):
        gl.evaluate(LinearMap(), HarmonicOscillator(), data, horizon=0)
    with pytest.raises(ValueError, match="method must be one of"):
        gl.evaluate(LinearMap(), HarmonicOscillator(), data, horizon=10, horizon_method="rk5")
    with pytest.raises(ValueError, match="bound must be a finite number"):
        gl.evaluate(LinearMap(), HarmonicOscillator(), data, horizon=10, bound=-1.0)
    # an explicit bound moves the escape: 10 × 2 = 20 is reached at 1.01^t > 20
    m = gl.evaluate(LinearMap(scale=1.01), HarmonicOscillator(), data, horizon=400, bound=2.0)
    assert m["long_horizon"]["escape_step"][0] == first_escape(1.0, 1.01, bound=2.0)
    assert "long_horizon" not in gl.evaluate(LinearMap(), HarmonicOscillator(), data)


# ------------------------------------------------------------------ command line


@register
class Expanding(AbstractFeedForwardIntegrator):
    """z ↦ 1.01 z: leaves any bound at a known step."""

    structure: ClassVar[str] = "none"
    dim: int = eqx.field(static=True)
    w: jax.Array

    def __init__(self, dim, *, key=None, dtype=None):
        self.dim = dim
        self.w = jnp.ones((), dtype=jnp.float64) * 1.01

    def __call__(self, z, h=None):
        return self.w.astype(z.dtype) * z


@pytest.mark.slow  # command-line trainings
def test_command_line_horizon_and_escape_warning(tmp_path, capsys):
    assert _parser().parse_args(["train"]).horizon == DEFAULT_HORIZON == 10_000
    assert _parser().parse_args(["evaluate", "x"]).horizon == DEFAULT_HORIZON
    gl.save(tmp_path / "model.geomlearn", Expanding(2))
    (tmp_path / "run.json").write_text(json.dumps({"system": "pendulum", "seed": 0}))
    assert cli.main(["evaluate", str(tmp_path), "--horizon", "600"]) == 0
    text = capsys.readouterr().out
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    lh = metrics["long_horizon"]
    _, held_out, _ = cli.for_system("pendulum", gl.systems.Pendulum())
    states = np.asarray(held_out.states, dtype=np.float64)
    centre = states.reshape(-1, 2).mean(axis=0)
    bound = np.max(np.linalg.norm(states - centre, axis=-1))
    distance = np.linalg.norm(1.01 ** np.arange(601)[:, None] * states[0, 0] - centre, axis=-1)
    expected = int(np.argmax(distance > ESCAPE_FACTOR * bound))
    assert lh["horizon"] == 600 and lh["escape_step"] == [expected]
    assert (f"warning: 1 of 1 rollouts escaped (state not finite or farther than "
            f"{gl.evaluation.fmt(lh['escape_bound'])} from the data's mean") in text
    assert f"within 600 steps; first at step {expected}" in text
    assert cli.main(["evaluate", str(tmp_path), "--horizon", "0"]) == 0
    assert "long_horizon" not in json.loads((tmp_path / "metrics.json").read_text())
    assert "warning" not in capsys.readouterr().out
    assert cli.main(["evaluate", str(tmp_path), "--horizon", "-1"]) == 2
    assert "--horizon must be at least 0" in capsys.readouterr().err


# ------------------------------------------- independent starts and stored references


def test_a_stored_reference_gives_the_valid_time_beyond_the_data():
    # the reference is the oscillator's exact flow over 300 steps, the evaluation data 20
    theta = DT * (1 + 7e-3)
    long = oscillator_data(300)
    m = gl.evaluate(LinearMap(theta=theta), None, oscillator_data(), horizon=400,
                    horizon_reference=long)["long_horizon"]
    assert m["valid_time"] == [crossing(theta - DT)] * 2 == [143, 143]
    assert m["reference_method"] == "the given trajectories" and m["reference_steps"] == 300
    # the reference ends at step 300: the step is flagged, nothing is measured beyond
    assert m["reference_failed_step"] == [301, 301]
    exact = gl.evaluate(LinearMap(), None, oscillator_data(), horizon=400,
                        horizon_reference=long)
    assert exact["long_horizon"]["valid_time"] == [None, None]
    assert "they end at step 300: not measured beyond" in exact.summary(title="t")
    # negative control: a reference that is not the model's flow ends the valid time early
    wrong = gl.TrajectoryData(long.states * jnp.asarray([[[1.0, 1.2]]]), DT)
    m = gl.evaluate(LinearMap(), None, oscillator_data(), horizon=400,
                    horizon_reference=wrong)["long_horizon"]
    assert all(v is not None and v < 143 for v in m["valid_time"])


def test_horizon_data_start_the_long_horizon_from_independent_states():
    theta = DT * (1 + 7e-3)
    others = gl.TrajectoryData(jnp.asarray(oscillator_data(5).states[:, :, ::-1] * 0.5), DT)
    m = gl.evaluate(LinearMap(theta=theta), HarmonicOscillator(), oscillator_data(),
                    horizon=400, horizon_data=others)
    lh = m["long_horizon"]
    # the long horizon starts from the other trajectories, the system integrated from them
    assert lh["n_trajectories"] == 2 and lh["reference_method"] == "gauss_legendre6"
    assert lh["valid_time"] == [143, 143] and lh["reference_steps"] is None
    assert m["n_trajectories"] == 2 and m["n_steps"] == 20  # the short-term errors: the data's
    # the starts differ from the evaluation data's: the escape bound is the data's radius,
    # so states of half the norm (and swapped) are inside it
    assert lh["n_escaped"] == 0


def test_independent_starts_and_references_are_checked():
    data = oscillator_data()
    with pytest.raises(ValueError, match="dimension 4; the evaluation's have 2"):
        gl.evaluate(LinearMap(), None, data, horizon=10,
                    horizon_reference=jnp.zeros((2, 30, 4)))
    with pytest.raises(ValueError, match="time step 0.2; the evaluation's is 0.1"):
        gl.evaluate(LinearMap(), None, data, horizon=10,
                    horizon_data=gl.TrajectoryData(data.states, 0.2))
    with pytest.raises(ValueError, match="not both"):
        gl.evaluate(LinearMap(), None, data, horizon=10, horizon_data=data,
                    horizon_reference=data)
    with pytest.raises(ValueError, match="give horizon=N too"):
        gl.evaluate(LinearMap(), None, data, horizon_reference=data)
    with pytest.raises(ValueError, match="give no system"):
        long_horizon(LinearMap(), LinearMap().task(), data.states, horizon=10, invariants={},
                     system=HarmonicOscillator(), integrator=GaussLegendre6(), dt=DT,
                     stored_reference=True)
