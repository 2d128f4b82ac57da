"""Long horizons of driven and damped systems: the clock is left out of every norm, an
exact model never escapes and stays valid, and a damped reference that decays to its
equilibrium does not end the valid time of a model whose equilibrium is a little off."""

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from _helpers import RK4Step as ExactStep
from geomlearn import cli
from geomlearn.evaluation import ESCAPE_FACTOR, VALID_FLOOR, VALID_TOLERANCE
from geomlearn.evaluation._frame import clock_components
from geomlearn.integrators import RK4, GaussLegendre6, integrate
from geomlearn.models import AbstractFeedForwardIntegrator
from geomlearn.systems import (
    AbstractSystem,
    DampedPendulum,
    Duffing,
    ForcedMassSpring,
    ForcedRigidBody,
    HarmonicOscillator,
    ParametricPendulum,
)

HORIZON = 10_000


def cli_data(name):
    """The held-out data `geomlearn train --system name` evaluates on."""
    system = cli.SYSTEMS[name]()
    _, held_out, _ = cli.for_system(name, system)
    return system, held_out


def extended_data(system, z0):
    """200 steps of 0.1 from `z0`, the whole extended state (clock included)."""
    z0 = jnp.asarray(z0, jnp.float64)
    return system, gl.TrajectoryData(integrate(system, z0, 0.1, 200, method=GaussLegendre6()), 0.1)


CASES = {
    # name: (system and data, the clock components)
    "forced_mass_spring": (lambda: cli_data("forced_mass_spring"), [2]),
    "duffing": (lambda: cli_data("duffing"), [2]),
    "damped_pendulum": (lambda: cli_data("damped_pendulum"), []),
    # regular librations: a pendulum that goes over the top winds its angle without
    # bound, which no bound on the state tells from a blow-up, and in the chaotic layer
    # the reference's own rounding ends the valid time of any model
    "parametric_pendulum": (lambda: extended_data(
        ParametricPendulum(), [[1.0, 0.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0]]), [1]),
    "forced_rigid_body": (lambda: extended_data(
        ForcedRigidBody(), ForcedRigidBody().default_initial_conditions(jnp.float64)), [3]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_an_exact_model_of_a_driven_or_damped_system_neither_escapes_nor_loses_validity(name):
    """Over 10⁴ steps the reference integrator itself, as a model, has no escape and no
    end of its valid time: the clock τ (which grows to 10⁴ steps' time, far beyond the
    data's) is left out of the escape test and of the relative error."""
    make, clock = CASES[name]
    system, data = make()
    result = gl.evaluate(ExactStep(system, float(data.dt)), system, data, horizon=HORIZON,
                         horizon_method=RK4(), keep_states=True)
    m = result["long_horizon"]
    assert m["n_escaped"] == 0 and m["escape_step"] == [None] * data.n_trajectories
    assert m["valid_time"] == [None] * data.n_trajectories
    assert m["reference_failed_step"] == [None] * data.n_trajectories
    assert m["time_components"] == clock
    states = result.long_horizon.states
    if clock:  # the clock ran far beyond the data's: measured with it, the rollout escapes
        tau = states[:, :, clock[0]]
        assert np.max(tau) - np.max(np.asarray(data.states)[..., clock[0]]) > (
            2 * ESCAPE_FACTOR * m["data_bound"])
    assert "clock component" in result.summary(title=name) or not clock


def test_the_valid_time_of_a_driven_system_is_not_diluted_by_its_clock():
    """A forced mass–spring with a stiffer spring against the true one: the valid time
    is the first step whose (q, p) error exceeds the tolerance relative to the
    reference's (q, p) norm; with the clock in the norms (‖r_t‖ ≈ t) it would come much
    later."""
    true, stiff, dt, N = ForcedMassSpring(), ForcedMassSpring(k=1.02), 0.02, 3000
    z0 = jnp.asarray([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    data = gl.TrajectoryData(integrate(true, z0, dt, 100, method=RK4()), dt)
    m = gl.evaluate(ExactStep(stiff, dt), true, data, horizon=N,
                    horizon_method=RK4())["long_horizon"]
    model = np.asarray(integrate(stiff, z0, dt, N, method=RK4()))
    ref = np.asarray(integrate(true, z0, dt, N, method=RK4()))
    diff = np.linalg.norm(model - ref, axis=-1)
    size = np.maximum(np.linalg.norm(ref[..., :2], axis=-1),
                      VALID_FLOOR * np.linalg.norm(ref[:, :1, :2], axis=-1))
    err = np.linalg.norm((model - ref)[..., :2], axis=-1) / size
    expected = [int(np.argmax(row > VALID_TOLERANCE)) for row in err]
    assert all(abs(row[k] - VALID_TOLERANCE) > 1e-6 for row, k in zip(err, expected))
    assert m["valid_time"] == expected
    diluted = diff / np.linalg.norm(ref, axis=-1)
    assert all(not (row[: 3 * k] > VALID_TOLERANCE).any() for row, k in zip(diluted, expected))


def test_the_clock_components_of_the_systems():
    cases = {DampedPendulum(): (), Duffing(): (2,), ForcedMassSpring(): (2,),
             ParametricPendulum(): (1,), ForcedRigidBody(): (3,), HarmonicOscillator(): ()}
    for system, expected in cases.items():
        z0 = np.asarray(system.default_initial_conditions(jnp.float64))
        states = integrate(system, z0, 0.1, 10, method=RK4())  # the states' integrator is not at stake
        assert clock_components(system, states) == expected, type(system).__name__
    assert clock_components(None, np.zeros((2, 3, 2))) == ()
    # a field equal to 1 in a component at a single repeated state says nothing
    at_rest = np.tile(np.array([[0.0, 1.0]]), (4, 1))  # q̇ = p = 1 there
    assert clock_components(HarmonicOscillator(), at_rest) == ()


class DampedOscillator(AbstractSystem):
    """q̇ = p, ṗ = −q − γp: a linear damped oscillator (the energy is not conserved)."""

    dim: ClassVar[int] = 2
    invariant_methods: ClassVar[tuple] = ()
    gamma: float = eqx.field(static=True, default=0.1)

    def vector_field(self, z):
        return jnp.stack([z[1], -z[0] - self.gamma * z[1]])

    def hamiltonian(self, z):
        return 0.5 * jnp.sum(z * z)

    def default_initial_conditions(self, dtype=None):
        return jnp.asarray([[1.0, 0.0]], dtype)


def flow(h, gamma=0.1):
    """The exact flow matrix exp(A h) of `DampedOscillator`."""
    A = np.array([[0.0, 1.0], [-1.0, -gamma]])
    w, V = np.linalg.eig(A)
    return np.real(V @ np.diag(np.exp(w * h)) @ np.linalg.inv(V))


class OffsetFlow(AbstractFeedForwardIntegrator):
    """z ↦ E (z − z*) + z*: the exact damped flow with its equilibrium moved to z*."""

    structure: ClassVar[str] = "none"
    dim: int = eqx.field(static=True)
    E: jax.Array
    z_star: jax.Array

    def __init__(self, z_star, *, dt=0.1, key=None, dtype=None):
        self.dim = 2
        self.E = jnp.asarray(flow(dt))
        self.z_star = jnp.asarray(z_star, jnp.float64)

    def __call__(self, z, h=None):
        c = self.z_star.astype(z.dtype)
        return self.E.astype(z.dtype) @ (z - c) + c


def test_a_decayed_reference_does_not_end_the_valid_time_of_a_slightly_offset_equilibrium():
    """The reference decays to the origin, the model to z*: relative to ‖r_t‖ alone the
    error grows without bound once ‖r_t‖ is of the order of ‖z*‖; relative to at least
    `VALID_FLOOR` of the initial norm it stays below the tolerance for a small offset,
    and a larger offset still ends the valid time, at the step computed directly."""
    N, z0 = 3000, np.array([1.0, 0.0])
    exact = np.stack([np.linalg.matrix_power(flow(0.1), n) @ z0 for n in range(N + 1)])
    data = gl.TrajectoryData(jnp.asarray(exact[None, :21]), 0.1)
    small = np.array([0.0015, -0.001])  # ‖z*‖ < VALID_TOLERANCE · VALID_FLOOR / 2
    m = gl.evaluate(OffsetFlow(small), DampedOscillator(), data, horizon=N)["long_horizon"]
    assert np.linalg.norm(exact[-1]) < 1e-3 * np.linalg.norm(small)  # fully decayed
    assert m["valid_time"] == [None] and m["n_escaped"] == 0
    large = np.array([0.02, 0.0])
    m = gl.evaluate(OffsetFlow(large), DampedOscillator(), data, horizon=N)["long_horizon"]
    n = np.arange(N + 1)
    model = np.stack([np.linalg.matrix_power(flow(0.1), k) @ (z0 - large) + large for k in n])
    size = np.maximum(np.linalg.norm(exact, axis=1), VALID_FLOOR * np.linalg.norm(z0))
    err = np.linalg.norm(model - exact, axis=1) / size
    expected = int(np.argmax(err > VALID_TOLERANCE))
    assert abs(err[expected] - VALID_TOLERANCE) > 1e-6 and expected > 100
    assert m["valid_time"] == [expected]
