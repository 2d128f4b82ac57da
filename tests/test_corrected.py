"""Corrected integrators: a classical symplectic step between learned symplectic maps
(geomlearn.models.corrected)."""

import copy
import json
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn import cli
from geomlearn.cli._own_data import DataFile
from geomlearn.integrators import RK4, ImplicitMidpoint, StormerVerlet, Yoshida4, integrate
from geomlearn.io import PersistenceError, _container
from geomlearn.models import corrected
from geomlearn.systems import AbstractSeparableSystem

from _helpers import normal, randomize

RNG_SEED = 52
DT = 0.3


def gsympnet(key, dim=2, **options):
    return gl.GSympNet(dim, n_layers=2, width=3, identity_init=True, key=key, **options)


# (placement, method, substeps, system) of the structure and identity tests: every
# placement, a higher-order composition with substeps, an implicit method
CONFIGS = [
    ("before", StormerVerlet(), 1, gl.systems.Pendulum(g=0.8)),
    ("after", StormerVerlet(), 1, gl.systems.Pendulum(g=0.8)),
    ("around", Yoshida4(), 2, gl.systems.Pendulum(g=0.8)),
    ("around", ImplicitMidpoint(), 1, gl.systems.Pendulum(g=0.8)),
]


def build(key, placement, method, substeps, system, **options):
    return gl.CorrectedIntegrator(system, gsympnet(key, system.dim, **options), method=method,
                                  placement=placement, substeps=substeps, dt=DT)


def symplecticity(model, points):
    task = model.rollout_task(points.shape)
    return model.structure_residuals(points, task)["symplecticity"]


# --------------------------------------------------------------------------- the start


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c[0]}-{c[1].name}")
def test_identity_correction_gives_the_classical_step(rng, key, config):
    placement, method, substeps, system = config
    model = build(key(), placement, method, substeps, system)
    assert model.placement == placement and model.method == method.name
    Z = normal(rng, (3, system.dim), scale=0.5)
    for c in (model.before, model.after):  # a correction at its start is the identity, bit for bit
        if c is not None:
            np.testing.assert_array_equal(eqx.filter_jit(eqx.filter_vmap(c))(Z), Z)
    assert (model.before is None) != corrected.placement_named(placement).before
    assert (model.after is None) != corrected.placement_named(placement).after
    classical = integrate(system, Z, DT, 1, method=method, substeps=substeps)[:, 1]
    got = eqx.filter_jit(eqx.filter_vmap(model))(Z)
    # the same operations as the classical step, compiled in another program: equal to
    # the last bits of the arithmetic
    np.testing.assert_allclose(got, classical, rtol=0, atol=8 * np.finfo(np.float64).eps)
    assert np.max(np.abs(got - Z)) > 1e-2  # the step does move the states


# --------------------------------------------------------------------------- structure


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c[0]}-{c[1].name}")
def test_symplectic_for_random_parameters(rng, key, config):
    placement, method, substeps, system = config
    model = randomize(build(key(), placement, method, substeps, system), rng, 0.5)
    points = normal(rng, (4, system.dim), scale=0.5)
    assert model.structure == "symplectic"
    assert symplecticity(model, points) <= 1e-12


def test_a_non_symplectic_part_breaks_the_structure(rng, key):
    """The negative controls: the same composition with a ResNet as a correction, or with
    RK4 as the classical step, forced past the constructor's checks, is not symplectic."""
    system = gl.systems.Pendulum(g=0.8)
    model = randomize(build(key(), "around", StormerVerlet(), 1, system), rng, 0.5)
    points = normal(rng, (4, 2), scale=0.5)  # (the composition as built: the test above)
    resnet = randomize(gl.ResNet(2, width=3, depth=1, key=key()), rng, 0.5)
    with_resnet = eqx.tree_at(lambda m: m.before, model, resnet)
    assert symplecticity(with_resnet, points) > 1e-3
    with_rk4 = copy.copy(model)
    object.__setattr__(with_rk4, "integrator", RK4())
    check = gl.check_structure(with_rk4, points, dt=DT)
    assert not check.passed and check.residuals["symplecticity"] > 1e-8


def test_refused_parts_name_what_was_expected_and_got(key):
    system, good = gl.systems.Pendulum(), gsympnet(key())
    cases = [
        ((system, gl.ResNet(2, width=3, depth=1, key=key())), {}, r"symplectic feed-forward.*got ResNet"),
        ((system, gl.VolumePreservingFeedForward(2, n_blocks=1, key=key())), {},
         r"got VolumePreserving.*'volume'"),
        ((system, gl.HamiltonianNeuralNetwork(2, width=3, depth=1, key=key())), {}, "not a feed-forward"),
        ((system, gsympnet(key(), 4)), {}, r"expected dim=2, got a correction with dim=4"),
        ((system, good), {"method": RK4()}, r"symplectic integrator: expected one of .*got 'rk4'"),
        ((system, good), {"method": "euler"}, r"got 'euler'"),
        ((gl.systems.DoublePendulum(), gsympnet(key(), 4)), {}, "separable"),
        ((gl.systems.RigidBody(), good), {}, r"canonical.*got RigidBody"),
        ((system, good), {"placement": "in"}, r"placement must be one of \('before', 'after', 'around'\)"),
        ((system, good), {"substeps": 0}, "substeps"),
        ((system, good), {"dt": -0.1}, "dt"),
    ]
    for args, options, match in cases:
        with pytest.raises(ValueError, match=match):
            gl.CorrectedIntegrator(*args, **options)
    with pytest.raises(TypeError, match="AbstractSystem"):
        gl.CorrectedIntegrator("pendulum", good)
    no_step = gl.CorrectedIntegrator(system, good)
    with pytest.raises(ValueError, match="needs the time step"):
        no_step(jnp.ones(2))
    with pytest.raises(ValueError, match="needs the time step dt"):
        gl.iterate(no_step, jnp.ones(2), 3)
    assert gl.CorrectedIntegrator(system, good, placement=corrected.Before()).config()["placement"] == "before"


# --------------------------------------------------------------------------- training


class ArrayPendulum(AbstractSeparableSystem):
    """A pendulum whose gravity is a float array (the package's systems hold Python
    floats): the case in which a system's parameter is a leaf that training must leave
    alone."""

    g: jax.Array
    dim: ClassVar[int] = 2

    def __init__(self, g):
        self.g = jnp.asarray(g, jnp.float64)

    def kinetic(self, p):
        return 0.5 * jnp.sum(p * p)

    def potential(self, q):
        return -jnp.sum(self.g.astype(q.dtype) * jnp.cos(q))

    def default_initial_conditions(self, dtype=None):
        return jnp.asarray([[1.0, 0.0]], dtype)


@pytest.fixture(scope="module")
def pendulum_data():
    """Pairs of the true pendulum (g = 1) at a step where the model's physics (g = 0.8,
    one Störmer–Verlet step) is visibly wrong: 3 trajectories of 6 states."""
    z0 = jnp.asarray([[1.0, 0.0], [0.5, 0.5], [-0.3, 1.0]])
    states = integrate(gl.systems.Pendulum(), z0, DT, 5, method="yoshida6", substeps=4)
    return gl.TrajectoryData.from_arrays(list(states), DT)


@pytest.mark.parametrize("optimizer", [None, gl.LevenbergMarquardt()], ids=["adam", "lm"])
def test_training_lowers_the_loss_and_leaves_the_system(key, pendulum_data, optimizer):
    model = gl.CorrectedIntegrator(ArrayPendulum(0.8), gsympnet(key()))
    trained, history = gl.fit(model, pendulum_data, epochs=15, optimizer=optimizer, key=key(),
                              progress=False)
    assert history["loss"][-1] < 0.7 * history["loss"][0], history["loss"]
    np.testing.assert_array_equal(trained.system.g, model.system.g)
    assert float(trained.system.g) == 0.8
    for c in ("before", "after"):  # both corrections trained, each on its own
        before, after = (jax.tree_util.tree_leaves(getattr(m, c)) for m in (model, trained))
        assert max(np.max(np.abs(a - b)) for a, b in zip(before, after)) > 0
    first, second = (jax.tree_util.tree_leaves(c) for c in (trained.before, trained.after))
    assert max(np.max(np.abs(a - b)) for a, b in zip(first, second)) > 0  # independent networks


def test_iterate_evaluate_and_the_inference_form(key, pendulum_data):
    model = gl.CorrectedIntegrator(gl.systems.Pendulum(g=0.8), gsympnet(key()), placement="after")
    z0 = pendulum_data.states[:, 0]
    traj = gl.iterate(model, z0, 6, dt=DT)
    assert traj.shape == (3, 6, 2)
    np.testing.assert_allclose(traj, integrate(model.system, z0, DT, 5, method="stormer_verlet"),
                               rtol=0, atol=1e-14)
    assert isinstance(model.inference_form(), gl.CorrectedIntegrator)
    metrics = gl.evaluate(model, gl.systems.Pendulum(), pendulum_data, n_structure_points=2)
    assert metrics["structure_passed"] and metrics["iterated_structure"] == "symplectic"
    assert "C ∘ S" in metrics["iterated_map"] and "dt=0.3" in metrics["iterated_map"]


# --------------------------------------------------------------------------- persistence


def test_save_and_load_keep_the_system_method_and_placement(rng, key, tmp_path):
    model = randomize(gl.CorrectedIntegrator(gl.systems.Pendulum(l=1.5), gsympnet(key(), symmetric=True),
                                             method="yoshida4", placement="around", substeps=2, dt=0.2),
                      rng, 0.5)
    path = gl.save(tmp_path / "m", model)
    loaded = gl.load(path)
    assert loaded.config() == model.config()
    assert loaded.system == gl.systems.Pendulum(l=1.5) and loaded.integrator == Yoshida4()
    assert loaded.placing == corrected.Around() and loaded.correction.identity_init
    z = normal(rng, (2,))
    np.testing.assert_array_equal(loaded(z), model(z))
    header, sections = _container.read_container(path)
    assert header["config"]["system"] == {"__system__": {"class": "Pendulum",
                                                         "config": {"m": 1.0, "l": 1.5, "g": 1.0}}}
    assert header["config"]["method"] == "yoshida4" and header["config"]["placement"] == "around"

    def edited(change):
        h = copy.deepcopy(header)
        change(h["config"]["system"]["__system__"])
        return _container.write_container(tmp_path / "bad", h, sections)

    with pytest.raises(PersistenceError, match="unknown system class 'Path'"):
        gl.load(edited(lambda s: s.update({"class": "Path"})))
    with pytest.raises(PersistenceError, match="cannot rebuild the system Pendulum"):
        gl.load(edited(lambda s: s["config"].update({"l": -1.0})))
    with pytest.raises(PersistenceError, match="expected a system of geomlearn.systems"):
        gl.save(tmp_path / "array", gl.CorrectedIntegrator(ArrayPendulum(0.8), gsympnet(key())))


# ---------------------------------------------------------------------- the command line


def test_the_command_line_builds_it_for_a_known_separable_system_only(key):
    """`--model corrected` is Störmer–Verlet of the named system between two G-SympNets
    that start as the identity; a rigid body (not canonical), a driven system's rows and
    a data file (no equations) are refused before anything is built."""
    spec = cli.MODELS["corrected"]
    system = cli.SYSTEMS["pendulum"]()
    model, _ = spec.build_for(system, key=key(), model_options={"substeps": 2})
    assert (model.system, model.method, model.placement, model.substeps) == (
        system, "stormer_verlet", "around", 2)
    z = jnp.asarray([0.4, -0.2])
    step = z
    for _ in range(2):
        step, _ = StormerVerlet().step(system, step, DT / 2)
    np.testing.assert_allclose(model(z, DT), step, rtol=0, atol=1e-15)
    assert spec.incompatibility(system) is None
    assert "canonical" in spec.incompatibility(cli.SYSTEMS["rigid_body"]())
    assert "brings none" in spec.incompatibility(DataFile(dim=2, canonical=True, labels=("q", "p")))
    with pytest.raises(ValueError, match="not 'width'"):
        spec.build_for(system, key=key(), model_options={"width": 4})


@pytest.mark.slow  # a command-line training
def test_geomlearn_train_model_corrected_compares_with_the_classical_step(tmp_path):
    """The corrected integrator trains at the command line on the pendulum, stores the
    data's step, and is compared with the classical integrators like any model."""
    out = tmp_path / "run"
    rc = cli.main(["train", "--model", "corrected", "--epochs", "3", "--horizon", "0",
                   "--out", str(out)])
    assert rc in (0, 4)  # 4: three iterations may not be enough to learn
    model = gl.load(out / "model.geomlearn")
    assert isinstance(model, gl.CorrectedIntegrator) and model.dt is not None
    metrics = json.loads((out / "metrics.json").read_text())
    assert "frontier_ratio" in metrics and metrics["against_classical"]
