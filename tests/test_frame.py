"""The frame of the escape test for particles: a cluster that drifts with its total
momentum has not escaped; one whose particles fly apart has."""

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from _helpers import RK4Step
from geomlearn.evaluation import frame_projection, long_horizon
from geomlearn.integrators import RK4, integrate
from geomlearn.models import AbstractFeedForwardIntegrator
from geomlearn.systems import HarmonicOscillator, TodaLattice

HORIZON = 4_000


class SpreadStep(AbstractFeedForwardIntegrator):
    """One RK4 step of `system` (`RK4Step`), then the particles' positions about their
    mean stretched by `spread`."""

    structure: ClassVar[str] = "none"
    dim: int = eqx.field(static=True)
    exact: RK4Step
    spread: float = eqx.field(static=True)

    def __init__(self, system, dt, spread, *, key=None, dtype=None):
        self.dim, self.exact, self.spread = system.dim, RK4Step(system, dt), spread

    def __call__(self, z, h=None):
        z = self.exact(z)
        n = self.dim // 2
        q = z[:n]
        return z.at[:n].set(jnp.mean(q) + self.spread * (q - jnp.mean(q)))


def drifting_ring():
    """A Toda ring of 4 particles with total momentum 2: the cluster moves by 0.5 per
    unit time, 500 over the horizon, far beyond the data's radius (about 10)."""
    ring = TodaLattice(n_particles=4)
    z0 = jnp.asarray([[0.3, -0.1, 0.0, -0.2, 0.6, 0.4, 0.5, 0.5]])
    return ring, gl.TrajectoryData(integrate(ring, z0, 0.1, 200, method=RK4()), 0.1)


def test_the_projection_takes_particles_about_their_centre_of_mass():
    P = frame_projection(9, clock=(8,), particles=2)  # 2 particles in 2-D and a clock
    assert np.allclose(P @ P, P)  # a projection
    z = np.arange(9.0)
    shifted = z + np.array([5.0, -3.0] * 2 + [1.0, 2.0] * 2 + [7.0])  # whole cluster moved
    assert np.allclose(P @ shifted, P @ z)
    # positions and momenta about their means, per axis; the clock left out
    assert np.allclose(P @ z, [-1, -1, 1, 1, -1, -1, 1, 1, 0])
    # negative control: without particles only the clock goes
    assert not np.allclose(frame_projection(9, (8,)) @ shifted, frame_projection(9, (8,)) @ z)
    with pytest.raises(ValueError, match=r"2·n·3 state components besides the clock; got 8"):
        frame_projection(9, clock=(8,), particles=3)


def test_a_drifting_cluster_has_not_escaped_but_one_flying_apart_has():
    ring, data = drifting_ring()
    assert ring.particle_dimension == 1
    m = gl.evaluate(RK4Step(ring, 0.1), ring, data, horizon=HORIZON,
                    horizon_method=RK4())["long_horizon"]  # the frame from the system
    assert m["n_escaped"] == 0 and m["valid_time"] == [None]
    assert m["particle_dimension"] == 1

    def escaped(model, particles):
        return long_horizon(model, model.task(data_dt=0.1), data.states, horizon=HORIZON,
                            invariants={}, particles=particles).metrics["n_escaped"]

    # negative control: measured about the data's mean alone, the same rollout escapes
    assert escaped(RK4Step(ring, 0.1), particles=0) == 1
    # and in the centre-of-mass frame, particles that fly apart escape
    assert escaped(SpreadStep(ring, 0.1, 1.002), particles=1) == 1
    # a centre given outside the frame is taken into it: the data's plain mean (which
    # carries the cluster's mean position) gives the frame's centre
    model = RK4Step(ring, 0.1)
    plain_mean = np.mean(np.asarray(data.states).reshape(-1, 8), axis=0)
    given = long_horizon(model, model.task(data_dt=0.1), data.states, horizon=10,
                         invariants={}, particles=1, centre=plain_mean).metrics
    default = long_horizon(model, model.task(data_dt=0.1), data.states, horizon=10,
                           invariants={}, particles=1).metrics
    assert np.allclose(given["data_centre"], default["data_centre"], atol=1e-14)
    assert not np.allclose(plain_mean, default["data_centre"])  # the control differs


def test_particles_that_do_not_fit_the_state_are_refused():
    data = gl.TrajectoryData(integrate(HarmonicOscillator(), jnp.asarray([[1.0, 0.0]]), 0.1, 20,
                                       method=RK4()), 0.1)
    model = gl.GSympNet(2, key=jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="particles in 2 dimensions need 2·n·2"):
        gl.evaluate(model, HarmonicOscillator(), data, horizon=10, particles=2)
