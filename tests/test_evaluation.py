"""Tests for geomlearn.evaluate: exact values on a model with a known flow, every field."""

import json
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn.evaluation import default_horizons
from geomlearn.models import AbstractFeedForwardIntegrator
from geomlearn.systems import HarmonicOscillator, RigidBody

from _tiny_models import TinyHamiltonian, TinyWindow

DT = 0.1


class ScaledRotation(AbstractFeedForwardIntegrator):
    """z ↦ s R(θ) z: the exact harmonic-oscillator flow over θ when s = 1."""

    structure: ClassVar[str] = "symplectic"
    dim: int = eqx.field(static=True)
    theta: float = eqx.field(static=True)
    s: jax.Array

    def __init__(self, dim=2, theta=DT, *, scale=1.0, key=None, dtype=None):
        self.dim, self.theta = dim, theta
        self.s = jnp.asarray(scale, dtype=jnp.float64)

    def __call__(self, z, h=None):
        c, s = np.cos(self.theta), np.sin(self.theta)
        R = jnp.asarray(np.array([[c, s], [-s, c]]), dtype=z.dtype)
        return self.s.astype(z.dtype) * (R @ z)


def exact_reference(n_steps=50):
    z0 = np.array([[1.0, 0.0], [0.3, -0.8]])
    t = np.arange(n_steps + 1) * DT
    q = z0[:, :1] * np.cos(t) + z0[:, 1:] * np.sin(t)
    p = z0[:, 1:] * np.cos(t) - z0[:, :1] * np.sin(t)
    return gl.TrajectoryData(jnp.asarray(np.stack([q, p], axis=-1)), DT)


def test_exact_model_has_zero_error_and_drift():
    ref = exact_reference()
    metrics = gl.evaluate(ScaledRotation(), HarmonicOscillator(), ref)
    json.dumps(metrics)
    assert set(metrics["trajectory_error"]) == {"1", "10", "50"}
    assert max(metrics["trajectory_error"].values()) < 1e-13
    assert metrics["invariant_drift"]["energy"] < 1e-13
    assert metrics["reference_invariant_drift"]["energy"] < 1e-13
    assert metrics["structure_residual"]["symplecticity"] < 1e-14
    assert metrics["structure_residual"]["volume"] < 1e-14
    assert metrics["rollout_states_per_second"] > 0
    assert metrics["reference_states_per_second"] > 0
    assert metrics["reference_method"] == "implicit_midpoint"
    assert (metrics["model"], metrics["system"], metrics["structure"]) == (
        "ScaledRotation", "HarmonicOscillator", "symplectic")
    assert (metrics["n_trajectories"], metrics["n_steps"], metrics["dt"]) == (2, 50, DT)


def test_known_errors_of_a_scaled_rotation():
    s, N = 1.001, 50
    ref = exact_reference(N)
    metrics = gl.evaluate(ScaledRotation(scale=s), HarmonicOscillator(), ref, horizons=[1, 7, N])
    # H(s^n R^n z0) = s^{2n} H(z0): the largest relative drift is s^{2N} - 1
    np.testing.assert_allclose(metrics["invariant_drift"]["energy"], s ** (2 * N) - 1, rtol=1e-10)
    # every rollout state is s^n times the exact one: |err_n| = (s^n - 1)|z_n| with |z_n| = |z_0|
    n = np.arange(N + 1)
    norms = np.sum(np.asarray(ref.states[:, 0]) ** 2)
    for k in (1, 7, N):
        expected = np.sqrt(np.sum((s ** n[: k + 1] - 1) ** 2) / (k + 1))
        np.testing.assert_allclose(metrics["trajectory_error"][str(k)], expected, rtol=1e-9)
    # M = s R: MᵀJM = s² J, det M = s²
    np.testing.assert_allclose(metrics["structure_residual"]["symplecticity"], s**2 - 1, rtol=1e-9)
    np.testing.assert_allclose(metrics["structure_residual"]["volume"], s**2 - 1, rtol=1e-9)
    assert norms > 0


def test_array_reference_and_dt(key):
    ref = exact_reference(20)
    metrics = gl.evaluate(ScaledRotation(), HarmonicOscillator(), ref.states)
    assert metrics["dt"] is None and metrics["reference_states_per_second"] is None
    single = gl.evaluate(ScaledRotation(), HarmonicOscillator(), ref.states[0], dt=DT)
    assert single["n_trajectories"] == 1 and single["reference_states_per_second"] > 0
    with pytest.raises(ValueError, match="disagrees"):
        gl.evaluate(ScaledRotation(), HarmonicOscillator(), ref, dt=0.2)
    with pytest.raises(ValueError, match="beyond the reference's 20 steps"):
        gl.evaluate(ScaledRotation(), HarmonicOscillator(), ref, horizons=[21])
    with pytest.raises(ValueError, match="dimensions disagree"):
        gl.evaluate(ScaledRotation(), RigidBody(), ref)
    assert default_horizons(1000) == [1, 10, 100, 1000]
    assert default_horizons(250) == [1, 10, 100, 250]


def test_rigid_body_invariants_and_volume(key):
    rb = RigidBody()
    ref = gl.TrajectoryData.from_system(rb, rb.default_initial_conditions(), 0.2, 30)
    model = gl.VolumePreservingFeedForward(3, key=key())
    metrics = gl.evaluate(model, rb, ref)
    assert set(metrics["invariant_drift"]) == {"energy", "casimir"}
    assert metrics["reference_invariant_drift"]["casimir"] < 1e-12  # midpoint keeps |z|²
    assert set(metrics["structure_residual"]) == {"volume"}  # odd dimension: no symplecticity
    assert metrics["structure_residual"]["volume"] < 1e-12
    assert metrics["structure"] == "volume"


def test_transformer_and_hamiltonian_network(key):
    ref = exact_reference(12)
    tr = TinyWindow(2, key=key())
    with pytest.raises(ValueError, match="seq_length"):
        gl.evaluate(tr, HarmonicOscillator(), ref)
    metrics = gl.evaluate(tr, HarmonicOscillator(), ref, seq_length=4, prediction_window=2,
                          horizons=[3, 12])
    assert metrics["trajectory_error"]["3"] == 0.0  # the first T = 4 states are given
    assert metrics["trajectory_error"]["12"] > 0.0
    assert metrics["structure_residual"]["volume"] > 1e-6  # an unconstrained window map
    hnn = TinyHamiltonian(2, key=key())
    metrics = gl.evaluate(hnn, HarmonicOscillator(), ref)
    # with a system, the learned energy is measured next to the system's invariants
    assert set(metrics["invariant_drift"]) == {"energy", "learned_energy"}
    # the implicit midpoint step of a Hamiltonian field is symplectic (to the solver's accuracy)
    assert metrics["structure_residual"]["symplecticity"] < 1e-10
    assert metrics["trajectory_error"]["12"] < 0.2


def test_reference_method_is_an_integrator_or_its_name():
    from geomlearn.integrators import StormerVerlet

    ref = exact_reference(10)
    metrics = gl.evaluate(ScaledRotation(), HarmonicOscillator(), ref, method=StormerVerlet())
    assert metrics["reference_method"] == "stormer_verlet"  # the name: metrics stay JSON
    json.dumps(metrics)
    with pytest.raises(ValueError, match="method must be one of"):
        gl.evaluate(ScaledRotation(), HarmonicOscillator(), ref, method="leapfrog")


def test_summary_marks_what_the_map_does_not_claim():
    ref = exact_reference(10)
    metrics = gl.evaluate(ScaledRotation(), HarmonicOscillator(), ref)
    text = metrics.summary(title="rotation", extra=[("extra row", "value")])
    lines = text.splitlines()
    # the values are aligned after the longest name, "symplecticity residual"
    assert lines[0] == "rotation" and lines[1] == "  " + "extra row".ljust(22) + "  value"
    assert "(not claimed)" not in text  # a symplectic map claims both residuals
    shown = dict(metrics, iterated_structure="volume")
    assert "symplecticity residual" in metrics.summary(title="t", metrics=shown)
    assert "(not claimed)" in metrics.summary(title="t", metrics=shown)
    assert metrics.structure_check.claimed("symplecticity") and metrics.structure_check.passed


def test_fmt_and_the_moved_reduction_names():
    from geomlearn.evaluation import fmt

    assert (fmt(None), fmt(0.0), fmt(0.123456), fmt(1.5e-7), fmt(3)) == (
        "n/a", "0", "0.123", "1.50e-07", "3")
    for name in ("evaluate_reduction", "check_immersion", "ImmersionCheck",
                 "ReductionEvaluation"):
        assert getattr(gl, name) is getattr(gl.evaluation, name)
        with pytest.raises(AttributeError, match=f"use geomlearn.evaluation.{name}"):
            getattr(gl.reduction, name)


def test_timed_interleaved_times_each_computation_in_turns():
    """Each median belongs to its own computation (a slow and a fast one, in either
    order), and the computations alternate: a warm-up call of each, then rounds."""
    import time

    from geomlearn.evaluation._timing import timed_interleaved

    calls = []

    def slow():
        calls.append("slow")
        time.sleep(0.03)
        return jnp.zeros(())

    def fast():
        calls.append("fast")
        return jnp.zeros(())

    s, f = timed_interleaved([slow, fast], repeats=3)
    assert s >= 0.03 > f
    assert calls == ["slow", "fast"] * 4
    f, s = timed_interleaved([fast, slow], repeats=1)
    assert s >= 0.03 > f


# ------------------------------------------------- the scale of every number


def test_the_identity_map_and_one_classical_step_are_reported_next_to_the_model():
    ref = exact_reference(30)
    metrics = gl.evaluate(ScaledRotation(scale=1.001), HarmonicOscillator(), ref,
                          horizons=[1, 10, 30])
    states = np.asarray(ref.states)
    # the do-nothing map z_t = z_0, measured as the model's trajectory error
    diff = states - states[:, :1]
    for k in (1, 10, 30):
        expected = np.sqrt(np.sum(diff[:, : k + 1] ** 2) / np.sum(states[:, : k + 1] ** 2))
        np.testing.assert_allclose(metrics["identity_trajectory_error"][str(k)], expected,
                                   rtol=1e-12)
    assert metrics["identity_trajectory_error"]["30"] > 10 * metrics["trajectory_error"]["30"]
    # one Störmer–Verlet step (the oscillator is separable) from every state
    assert metrics["classical_step_method"] == "stormer_verlet"
    here, after = states[:, :-1].reshape(-1, 2), states[:, 1:].reshape(-1, 2)
    stepped = np.asarray(gl.integrators.integrate(HarmonicOscillator(), here, DT, 1,
                                                  method="stormer_verlet"))[:, 1]
    expected = np.sqrt(np.sum((stepped - after) ** 2) / np.sum(after**2))
    np.testing.assert_allclose(metrics["classical_step_error"], expected, rtol=1e-10)
    assert 0 < metrics["classical_step_error"] < 1e-2
    text = metrics.summary(title="rotation")
    assert "identity map" in text and "one classical step" in text and "stormer_verlet" in text
    json.dumps(metrics)
    # a system that is not separable: the implicit midpoint rule; none without a system
    rb = RigidBody()
    data = gl.TrajectoryData.from_system(rb, rb.default_initial_conditions(), 0.2, 10)
    m = gl.evaluate(gl.VolumePreservingFeedForward(3, key=jax.random.PRNGKey(0)), rb, data)
    assert m["classical_step_method"] == "implicit_midpoint"
    assert m["classical_step_error"] < 1e-12  # the data are implicit-midpoint steps
    bare = gl.evaluate(ScaledRotation(), None, ref)
    assert bare["classical_step_error"] is None and bare["classical_step_method"] is None
    assert "one classical step" not in bare.summary(title="bare")
    assert bare["identity_trajectory_error"] == metrics["identity_trajectory_error"]


def test_the_identity_map_of_a_window_model_keeps_the_given_window(key):
    ref = exact_reference(12)
    metrics = gl.evaluate(TinyWindow(2, key=key()), HarmonicOscillator(), ref, seq_length=4,
                          prediction_window=2, horizons=[3, 12])
    states = np.asarray(ref.states)
    identity = states.copy()
    identity[:, 4:] = states[:, 3:4]
    assert metrics["identity_trajectory_error"]["3"] == 0.0
    expected = np.sqrt(np.sum((identity - states) ** 2) / np.sum(states**2))
    np.testing.assert_allclose(metrics["identity_trajectory_error"]["12"], expected, rtol=1e-12)


def test_the_structure_points_of_a_window_model_are_windows_of_the_reference(key):
    from geomlearn.evaluation._integrator import _structure_points

    ref = np.random.default_rng(3).standard_normal((3, 12, 2))
    model = TinyWindow(2, key=key())
    task = model.task(seq_length=4, prediction_window=2, data_dt=DT)
    points = np.asarray(_structure_points(model, jnp.asarray(ref), task, 16, key()))
    assert points.shape == (16, 4, 2)
    starts = {(i, t) for i in range(3) for t in range(9)}
    found = [next((s for s in starts if np.array_equal(ref[s[0], s[1]:s[1] + 4], p)), None)
             for p in points]
    assert None not in found and len(set(found)) > 1
    # a negative control: a window shifted by one state is none of the reference's windows
    shifted = np.roll(ref, 1, axis=-1)[0, :4]
    assert not any(np.array_equal(ref[i, t:t + 4], shifted) for i, t in starts)


@pytest.mark.parametrize("horizon", [None, 300])
def test_a_learned_energy_drift_does_not_depend_on_its_constant(key, horizon):
    """H_θ and H_θ + c have the same flow; the drift is divided by the learned energy's
    range over the data, not by its value, so it is the same for both."""
    ref = exact_reference(20)
    hnn = gl.HamiltonianNeuralNetwork(2, width=8, depth=1, key=key())
    shifted = eqx.tree_at(lambda m: m.biases[-1], hnn, hnn.biases[-1] + 1700.0)
    z = ref.states[0, 3]
    assert float(shifted.hamiltonian(z) - hnn.hamiltonian(z)) == pytest.approx(1700.0)
    a, b = (gl.evaluate(m, None, ref, horizon=horizon) for m in (hnn, shifted))
    for key_ in ("invariant_drift", "reference_invariant_drift"):
        np.testing.assert_allclose(b[key_]["learned_energy"], a[key_]["learned_energy"],
                                   rtol=1e-6)
    H = np.asarray(jax.vmap(jax.vmap(hnn.hamiltonian))(ref.states))
    roll = np.asarray(jax.vmap(jax.vmap(hnn.hamiltonian))(a.rollout))
    np.testing.assert_allclose(a["invariant_drift"]["learned_energy"],
                               np.max(np.abs(roll - H[:, :1])) / np.ptp(H), rtol=1e-10)
    if horizon is not None:
        inv_a = a["long_horizon"]["invariants"]["learned_energy"]
        inv_b = b["long_horizon"]["invariants"]["learned_energy"]
        np.testing.assert_allclose(inv_b["max_drift"], inv_a["max_drift"], rtol=1e-6)
        np.testing.assert_allclose(inv_b["trend"], inv_a["trend"], rtol=1e-5, atol=1e-14)
        assert inv_a["scale"] == pytest.approx(np.ptp(H), rel=1e-12)
