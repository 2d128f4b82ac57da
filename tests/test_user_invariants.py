"""The user's invariants and a symmetry's momentum map in `evaluate`, and the median and
worst trajectory next to the pooled figures."""

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from _helpers import RK4Step, randomize
from geomlearn.evaluation import TREND_STEPS
from geomlearn.integrators import RK4, integrate
from geomlearn.models import AbstractFeedForwardIntegrator
from geomlearn.symmetries import Rotation
from geomlearn.systems import TodaLattice

DT, KICK = 0.1, 1e-7


class KickedStep(AbstractFeedForwardIntegrator):
    """One RK4 step of `system`, then the first momentum kicked by `kick`: the total
    momentum grows by `kick` a step (`kick = 0`: the RK4 step itself, and the same
    compiled program for both)."""

    structure: ClassVar[str] = "none"
    dim: int = eqx.field(static=True)
    exact: RK4Step
    kick: jax.Array

    def __init__(self, system, dt, kick, *, key=None, dtype=None):
        self.dim, self.exact = system.dim, RK4Step(system, dt)
        self.kick = jnp.asarray(kick, jnp.float64)

    def __call__(self, z, h=None):
        return self.exact(z).at[self.dim // 2].add(self.kick.astype(z.dtype))


class Drift(AbstractFeedForwardIntegrator):
    """`z ↦ z + (h, 0)`: a hand-made map whose errors are known in closed form; states
    with `y > blow_above` are multiplied by 1e300 as well (they overflow)."""

    structure: ClassVar[str] = "none"
    dim: int = eqx.field(static=True)
    h: float = eqx.field(static=True)
    blow_above: float = eqx.field(static=True)

    def __init__(self, h, blow_above=np.inf, *, key=None, dtype=None):
        self.dim, self.h, self.blow_above = 2, h, blow_above

    def __call__(self, z, h=None):
        factor = jnp.where(z[1] > self.blow_above, 1e300, 1.0).astype(z.dtype)
        return z.at[0].add(jnp.asarray(self.h, z.dtype)) * factor


class Refuses(AbstractFeedForwardIntegrator):
    """A model that fails if it is ever stepped: the invariants are checked first."""

    structure: ClassVar[str] = "none"
    dim: int = eqx.field(static=True)

    def __init__(self, dim, *, key=None, dtype=None):
        self.dim = dim

    def __call__(self, z, h=None):
        raise RuntimeError("the model was stepped")


def total_momentum(z):
    return jnp.sum(z[z.shape[0] // 2:])


def toda_data():
    ring = TodaLattice(n_particles=3)
    z0 = jnp.asarray([[0.3, -0.1, 0.0, 0.6, 0.4, 0.5], [0.0, 0.2, -0.2, -0.3, 0.1, 0.1]])
    return ring, gl.TrajectoryData(integrate(ring, z0, DT, 40, method=RK4()), DT)


def test_a_user_invariant_is_conserved_by_an_exact_map_and_not_by_a_kicked_one():
    ring, data = toda_data()
    options = dict(horizon=400, invariants={"P": total_momentum}, method="rk4",
                   horizon_method="rk4")
    exact = gl.evaluate(KickedStep(ring, DT, 0.0), ring, data, **options)
    kicked = gl.evaluate(KickedStep(ring, DT, KICK), ring, data, **options)
    scale = float(np.max(np.abs(np.sum(np.asarray(data.states)[:, 0, 3:], axis=-1))))
    # RK methods keep linear invariants: round-off only, along the data and far beyond it
    assert exact["invariant_drift"]["P"] <= 1e-13
    assert exact["long_horizon"]["invariants"]["P"]["worst_max_drift"] <= 1e-13
    assert abs(exact["long_horizon"]["invariants"]["P"]["worst_trend"]) <= 1e-12
    assert set(exact.series) == {"energy", "momentum", "P"}  # the system's and the user's
    # negative control: the kicks add up to a drift of 40 kicks, a trend of one per step
    assert kicked["invariant_drift"]["P"] == pytest.approx(40 * KICK / scale, rel=1e-6)
    long = kicked["long_horizon"]["invariants"]["P"]
    assert long["worst_max_drift"] == pytest.approx(400 * KICK / scale, rel=1e-6)
    assert long["median_trend"] == pytest.approx(KICK / scale * TREND_STEPS, rel=1e-6)


def test_without_a_system_the_user_invariants_are_measured():
    ring, data = toda_data()
    for kick, small in ((0.0, True), (KICK, False)):
        m = gl.evaluate(KickedStep(ring, DT, kick), None, data,
                        invariants={"P": total_momentum})
        assert set(m["invariant_drift"]) == {"P"}
        assert (m["invariant_drift"]["P"] <= 1e-13) == small


@pytest.mark.parametrize("family, horizon", [(gl.GSympNet, 300), (gl.HenonNet, None)])
def test_a_symmetric_model_reports_its_momentum_map_without_being_asked(family, horizon, rng):
    states = jnp.asarray(0.5 * rng.standard_normal((3, 6, 4)))  # unknown dynamics in 2-D
    lz = {"Lz": lambda z: z[0] * z[3] - z[1] * z[2]}  # the same quantity, given by hand
    found = {}
    for symmetry in (Rotation(plane=(0, 1)), None):
        model = randomize(family(4, n_layers=2, width=4, symmetry=symmetry,
                                 key=jax.random.PRNGKey(0), dtype=jnp.float64), rng, 0.5)
        found[symmetry is not None] = gl.evaluate(
            model, None, states, dt=DT, invariants=lz, horizon_method="rk4",
            horizon=horizon if symmetry is not None else None)
    kept, plain = found[True], found[False]
    for name in ("momentum_map_0", "Lz"):
        assert kept["invariant_drift"][name] <= 1e-12
        if horizon:
            assert kept["long_horizon"]["invariants"][name]["worst_max_drift"] <= 1e-12
            assert abs(kept["long_horizon"]["invariants"][name]["worst_trend"]) <= 1e-10
    # negative control: without the symmetry there is no momentum map, and L_z drifts
    assert "momentum_map_0" not in plain["invariant_drift"]
    assert plain["invariant_drift"]["Lz"] > 1e-6


def test_a_name_already_measured_is_refused():
    ring, data = toda_data()
    with pytest.raises(ValueError, match=r"invariant 'momentum' is already measured "
                                         r"\(an invariant of TodaLattice\)"):
        gl.evaluate(RK4Step(ring, DT), ring, data, invariants={"momentum": total_momentum})
    model = gl.GSympNet(6, symmetry="translation:0/1", key=jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match=r"'momentum_map_0' is already measured \(the momentum"):
        gl.evaluate(model, None, data, invariants={"momentum_map_0": total_momentum})


def _fails(z):
    raise KeyError("no such coordinate")


@pytest.mark.parametrize("name, fn, message", [
    ("E", _fails, r"invariant 'E' fails on the data's first state: KeyError"),
    ("E", lambda z: float(z[0]), r"invariant 'E' fails on the data's first state: \w+"),
    ("q", lambda z: z[:2], r"invariant 'q' must return one number .* got shape \(2,\)"),
    ("log", lambda z: jnp.log(z[0] - 100.0), r"invariant 'log' is not finite .* \(got nan\)"),
    ("E", 3.0, r"invariant 'E' must be a function of one state, got 3.0"),
    ("", total_momentum, r"an invariant's name must be a non-empty string"),
    ("c", lambda z: z[0].astype(jnp.complex128), r"invariant 'c' must return a real number"),
])
def test_a_bad_invariant_is_a_one_line_error_before_any_rollout(name, fn, message):
    _, data = toda_data()
    with pytest.raises(ValueError, match=message) as info:
        gl.evaluate(Refuses(6), None, data, invariants={name: fn})
    assert "\n" not in str(info.value)


def test_invariants_must_be_a_dict():
    _, data = toda_data()
    with pytest.raises(ValueError, match=r"invariants must be a dict .* got list"):
        gl.evaluate(Refuses(6), None, data, invariants=[total_momentum])
    # negative control: the same model is stepped (and fails) once the invariants are good
    with pytest.raises(RuntimeError, match="the model was stepped"):
        gl.evaluate(Refuses(6), None, data, invariants={"P": total_momentum})


def test_median_and_worst_trajectory_on_a_hand_made_case():
    """Three still reference states at heights 1, 2, 10 and a map that moves by h a
    step: trajectory i's error over steps 0…k is h·sqrt(Σ t²) / (y_i·sqrt(k + 1)), the
    product x·y drifts by h·y_i per step; it starts at 0 everywhere, so its scale is the
    size of its terms, max |∇(xy)|·|z| = max y_i² = 100."""
    h, heights = 1e-3, np.array([1.0, 2.0, 10.0])
    states = jnp.asarray(np.stack([np.tile([0.0, y], (3, 1)) for y in heights]))
    m = gl.evaluate(Drift(h), None, states, dt=DT, horizon=100,
                    invariants={"xy": lambda z: z[0] * z[1]})
    for k in (1, 2):
        per = h * np.sqrt(np.sum(np.arange(k + 1) ** 2)) / (heights * np.sqrt(k + 1))
        pooled = h * np.sqrt(3 * np.sum(np.arange(k + 1) ** 2) / ((k + 1) * np.sum(heights**2)))
        assert m["trajectory_error_median"][str(k)] == pytest.approx(per[1], rel=1e-12)
        assert m["trajectory_error_worst"][str(k)] == pytest.approx(per[0], rel=1e-12)
        assert m["trajectory_error"][str(k)] == pytest.approx(pooled, rel=1e-12)
        assert np.mean(per) != pytest.approx(per[1], rel=1e-3)  # the mean is not the median
    scale = 100.0
    assert m["invariant_drift"]["xy"] == pytest.approx(2 * h * 10 / scale, rel=1e-12)
    assert m["invariant_drift_median"]["xy"] == pytest.approx(2 * h * 2 / scale, rel=1e-12)
    long = m["long_horizon"]["invariants"]["xy"]
    assert long["median_max_drift"] == pytest.approx(100 * h * 2 / scale, rel=1e-9)
    assert long["worst_max_drift"] == pytest.approx(100 * h * 10 / scale, rel=1e-9)
    assert long["median_trend"] == pytest.approx(h * 2 * TREND_STEPS / scale, rel=1e-9)
    assert m["long_horizon"]["n_escaped"] == 0
    text = m.summary(title="hand-made")
    assert "median trajectory" in text and "worst trajectory" in text and "median rollout" in text


def test_a_rollout_that_overflows_is_the_worst_not_the_median():
    """The rollout from height 10 overflows: the pooled error and the largest drift are
    not finite, the medians are the finite middle values (errors fall with the height,
    drifts grow with it; x·y starts at 0: its scale is max y_i² = 100)."""
    h, heights = 1e-3, np.array([1.0, 2.0, 10.0])
    states = jnp.asarray(np.stack([np.tile([0.0, y], (4, 1)) for y in heights]))
    m = gl.evaluate(Drift(h, blow_above=5.0), None, states, dt=DT, horizons=[3],
                    invariants={"xy": lambda z: z[0] * z[1]})
    per = h * np.sqrt(np.sum(np.arange(4) ** 2)) / (heights * 2)
    assert not np.isfinite(m["trajectory_error"]["3"])
    assert m["trajectory_error_median"]["3"] == pytest.approx(per[0], rel=1e-12)
    assert m["trajectory_error_worst"]["3"] == np.inf
    assert not np.isfinite(m["invariant_drift"]["xy"])
    assert m["invariant_drift_median"]["xy"] == pytest.approx(3 * h * 2 / 100.0, rel=1e-12)


def test_an_invariant_that_is_zero_is_scaled_by_the_size_of_its_terms():
    """A total momentum of zero is measured against the size of its terms, not against its
    own rounding; an invariant with a value keeps its largest initial magnitude (negative
    control), and one that is identically zero has the scale 1."""
    from geomlearn.evaluation._states import invariant_scale

    z0 = jnp.array([[1.0, -1.0, 2.0, -2.0], [0.5, -0.5, 3.0, -3.0]])  # momenta sum to 0
    terms = max(np.sqrt(2.0) * np.linalg.norm(z) for z in np.asarray(z0))
    assert invariant_scale(lambda z: z[2] + z[3], z0) == pytest.approx(terms, rel=1e-12)
    energy = lambda z: 0.5 * (z[2] ** 2 + z[3] ** 2)  # noqa: E731
    assert invariant_scale(energy, z0) == pytest.approx(9.0, rel=1e-12)
    assert invariant_scale(lambda z: 0.0 * z[0], z0) == 1.0


def test_a_momentum_map_the_system_measures_is_measured_once():
    """On the Kepler problem the rotation's momentum map is the system's angular momentum:
    reported under the system's name only; on a system without it (the Hénon–Heiles
    potential has no rotation symmetry) it is reported as the momentum map (control)."""
    from geomlearn.evaluation._invariants import invariants_of

    model = gl.GSympNet(4, n_layers=1, width=2, symmetry="rotation:0,1", key=jax.random.PRNGKey(0))
    state = jnp.array([1.0, 0.2, -0.1, 0.9])
    on_kepler = invariants_of(model, gl.systems.Kepler(), state=state)
    assert "angular_momentum" in on_kepler and "momentum_map_0" not in on_kepler
    assert "momentum_map_0" in invariants_of(model, gl.systems.HenonHeiles(), state=state)
