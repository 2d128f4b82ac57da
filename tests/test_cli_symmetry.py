"""`geomlearn train --symmetry SPEC`: parsed once, checked against the model family and the
data's dimension before anything is written, recorded in run.json, listed by
`geomlearn list`; a trained model keeps its momentum map (slow tier)."""

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn import cli
from geomlearn.cli import _inspect
from geomlearn.cli._main import _parser


def options_of(*flags):
    return cli.TrainOptions.from_args(_parser().parse_args(["train", *flags]))


def error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("geomlearn: error: "), err
    return err[0]


# ------------------------------------------------------------------ parsing, recording


@pytest.mark.parametrize("flags", [("--symmetry", "Rotation: 0, 1"),
                                   ("--model-option", "symmetry=rotation:0,1")])
def test_the_symmetry_is_parsed_once_to_its_spec_and_recorded(flags):
    """`--symmetry` and `--model-option symmetry=` are one option: its canonical spec in
    `TrainOptions.symmetry` (not among the model options), in run.json's options, and
    read back from them; a run.json written before it reads `None`."""
    options = options_of("--system", "kepler", "--model-option", "width=8", *flags)
    assert options.symmetry == "rotation:0,1"
    assert options.model_options == {"width": 8}
    recorded = json.loads(json.dumps(options.to_run()))
    assert recorded["symmetry"] == "rotation:0,1"
    assert cli.TrainOptions.from_run({"options": recorded}) == options
    del recorded["symmetry"]
    assert cli.TrainOptions.from_run({"options": recorded}).symmetry is None
    with pytest.raises(ValueError, match="run.json"):
        cli.TrainOptions.from_run({"options": {**recorded, "symmetry": "rotation:9"}})


@pytest.mark.parametrize("name", ["gsympnet", "henonnet", "hnn", "corrected"])
def test_build_for_gives_the_model_its_symmetry(name):
    """The spec builds the model with the symmetry (without: none), and refuses one that
    does not fit the system's positions."""
    kepler, spec = gl.systems.Kepler(), cli.MODELS[name]
    small = {"hnn": {"width": 2, "depth": 1}, "corrected": {}}.get(name, {"n_layers": 1,
                                                                         "width": 2})
    model, _ = spec.build_for(kepler, key=jax.random.PRNGKey(0), symmetry="rotation:0,1",
                              model_options=small)
    assert model.symmetry == "rotation:0,1"
    plain, _ = spec.build_for(kepler, key=jax.random.PRNGKey(0), model_options=small)
    assert plain.symmetry is None
    with pytest.raises(ValueError, match="below 2"):
        spec.build_for(kepler, key=jax.random.PRNGKey(0), symmetry="rotation:0,2")


# ------------------------------------------------------------------------- bad input

BAD = {
    "unknown form": (["--system", "kepler", "--symmetry", "bogus"],
                     ["expects translation:AXES[/D], rotation:I,J[/D], rotation3, particles:N/K or "
                      "permutation:I,J;K,L[/D]", "'bogus'"]),
    "a plane needs two indices": (["--system", "kepler", "--symmetry", "rotation:0"],
                                  ["rotation:I,J[/D]", "'rotation:0'"]),
    "plane beyond the dimension": (["--system", "kepler", "--symmetry", "rotation:0,2"],
                                   ["rotation:0,2", "below 2", "phase-space dim 4"]),
    "plane beyond one degree of freedom": (["--system", "pendulum", "--symmetry", "rotation:0,1"],
                                           ["rotation:0,1", "below 1", "phase-space dim 2"]),
    "axis beyond the dimension": (["--system", "kepler", "--symmetry", "translation:3"],
                                  ["translation:3", "below 2"]),
    "particles of 3 on 2 positions": (["--system", "kepler", "--model", "henonnet",
                                       "--symmetry", "rotation3"], ["3 coordinates", "dim 4"]),
    "a plane twice the same": (["--system", "kepler", "--symmetry", "rotation:1,1"],
                               ["two different indices", "(1, 1)"]),
    "a family without symmetry": (["--system", "kepler", "--model", "lasympnet", "--symmetry",
                                   "rotation:0,1"], ["gsympnet, henonnet", "not lasympnet"]),
    "given twice": (["--system", "kepler", "--symmetry", "rotation:0,1", "--model-option",
                     "symmetry=rotation3"], ["given twice"]),
    "as a model option": (["--system", "kepler", "--model-option", "symmetry=rotation:0,5"],
                          ["rotation:0,5", "below 2"]),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_symmetry_is_one_line_exit_2_nothing_written(case, tmp_path, monkeypatch, capsys):
    argv, expected = BAD[case]
    monkeypatch.chdir(tmp_path)  # the default run folder would be tmp_path/runs/
    assert cli.main(["train", *argv, "--epochs", "2"]) == 2
    line = error_line(capsys)
    for part in expected:
        assert part in line, line
    assert list(tmp_path.iterdir()) == []  # no run folder, no runs/


def test_a_symmetry_beyond_a_files_positions_is_refused(tmp_path, monkeypatch, capsys):
    """Own data: three positions (6 columns) take rotation:1,2, not rotation:0,3."""
    z = np.random.default_rng(0).normal(size=(12, 6))
    data = tmp_path / "orbits.npz"
    np.savez(data, dt=0.1, traj_0=z, traj_1=z + 1.0)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["train", "--data", str(data), "--symmetry", "rotation:0,3"]) == 2
    assert "below 3" in error_line(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["orbits.npz"]
    options = options_of("--data", str(data), "--symmetry", "rotation:1,2")  # the control
    assert options.symmetry == "rotation:1,2"


# ------------------------------------------------------------------------------ list


def test_list_shows_each_symmetry_and_the_families_that_take_it(monkeypatch, capsys):
    monkeypatch.setattr(_inspect, "SYSTEMS", {"kepler": gl.systems.Kepler})  # one system: fast
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(out) if line.startswith("symmetries"))
    rows = out[start + 1:]
    assert [row.split()[0] for row in rows] == ["translation:AXES[/D]", "rotation:I,J[/D]",
                                                 "rotation3", "particles:N/K",
                                                 "permutation:I,J;K,L[/D]"]
    for row in rows[:-1]:
        assert row.endswith("models: gsympnet, henonnet, hnn, corrected"), row
        assert "lasympnet" not in row
    # a corrected integrator checks the system against the momentum map: no finite group
    assert rows[-1].endswith("models: gsympnet, henonnet, hnn"), rows[-1]


# ---------------------------------------------------------------- slow: a real training


def _angular_momentum(z):
    return z[..., 0] * z[..., 3] - z[..., 1] * z[..., 2]


@pytest.mark.slow  # a command-line training run
def test_a_trained_symmetric_model_conserves_its_momentum_map(tmp_path, capsys):
    """Kepler with `--symmetry rotation:0,1` (float64): the saved model keeps the symmetry,
    its rollout conserves L = x p_y - y p_x to round-off (a model of the same size without
    the symmetry does not: the negative control), and metrics.json gives its drift under
    the system's name (the momentum map is Kepler's angular momentum, measured once);
    `evaluate` reads the run back."""
    out = tmp_path / "run"
    rc = cli.main(["train", "--system", "kepler", "--symmetry", "rotation:0,1", "--epochs", "2",
                   "--n-trajectories", "8", "--horizon", "100", "--x64", "--out", str(out)])
    assert rc in (0, cli.NOT_TRAINED), capsys.readouterr().err
    run = json.loads((out / "run.json").read_text())
    assert run["options"]["symmetry"] == "rotation:0,1"
    model = gl.load(out / "model.geomlearn")
    assert model.symmetry == "rotation:0,1"
    z0 = jnp.asarray([[1.0, 0.1, 0.05, 0.9], [0.7, -0.4, 0.3, 1.1]])
    with jax.enable_x64(True):
        L = _angular_momentum(gl.iterate(model, z0, 1000))
        assert float(jnp.max(jnp.abs(L - L[:, :1]))) <= 1e-12 * float(jnp.max(jnp.abs(L[:, 0])))
        plain = gl.GSympNet(4, n_layers=4, width=16, key=jax.random.PRNGKey(1))
        L = _angular_momentum(gl.iterate(plain, z0, 1000))
        assert float(jnp.max(jnp.abs(L - L[:, :1]))) > 1e-6
    metrics = json.loads((out / "metrics.json").read_text())
    assert "momentum_map_0" not in metrics["invariant_drift"]
    assert metrics["invariant_drift"]["angular_momentum"] <= 1e-12
    assert metrics["long_horizon"]["invariants"]["angular_momentum"]["worst_max_drift"] <= 1e-12
    capsys.readouterr()
    assert cli.main(["evaluate", str(out), "--horizon", "0"]) in (0, cli.NOT_TRAINED)
    assert "angular_momentum drift" in capsys.readouterr().out


# ------------------------------------------------------ pair-sympnet: particles by design


def test_pair_sympnet_is_built_for_the_particles_of_the_system():
    """`pair-sympnet` reads N and k from a system of particles (or `spatial_dim=` for
    states it cannot tell apart) and refuses states that are not particles."""
    spec, small = cli.MODELS["pair-sympnet"], {"n_layers": 1, "width": 2}
    cluster = gl.systems.LennardJonesCluster(4, spatial_dim=2)
    model, _ = spec.build_for(cluster, key=jax.random.PRNGKey(0), model_options=small)
    assert (model.n_particles, model.spatial_dim) == (4, 2)
    assert model.kept_symmetry() == gl.symmetries.Particles(4, 2)
    with pytest.raises(ValueError, match="particles"):
        spec.build_for(gl.systems.Pendulum(), key=jax.random.PRNGKey(0), model_options=small)


def test_corrected_on_identical_particles_is_corrected_by_pair_sympnets(rng, tmp_path):
    """`corrected` on a system of identical particles (its `group` a `Particles`) gets a
    `PairSympNet` correction after the step (`placement=` still chooses) and keeps the
    group, so a step with any parameters
    conserves the total and the angular momentum; with `--symmetry` or on another system
    it gets `GSympNet`s, which do not."""
    from _helpers import randomize

    spec = cli.MODELS["corrected"]
    cluster = gl.systems.LennardJonesCluster(4, spatial_dim=2)
    model, _ = spec.build_for(cluster, key=jax.random.PRNGKey(0))
    assert (model.placement, model.before, type(model.after)) == ("after", None, gl.PairSympNet)
    assert (model.after.n_particles, model.after.spatial_dim) == (4, 2)
    around, _ = spec.build_for(cluster, key=jax.random.PRNGKey(0),
                               model_options={"placement": "around"})
    assert type(around.before) is type(around.after) is gl.PairSympNet
    assert model.group == cluster.group == gl.symmetries.Particles(4, 2)
    z = cluster.default_initial_conditions(jnp.float64)[0]
    momenta = cluster.group.momentum_map

    def change(m):  # of the momentum map over one step, relative to its terms
        m = randomize(m, rng, scale=0.3)
        return float(jnp.max(jnp.abs(momenta(m(z, 0.01)) - momenta(z))) / jnp.max(jnp.abs(z)))

    assert change(model) < 1e-13 and change(around) < 1e-13
    gl.save(tmp_path / "model.geomlearn", model)
    loaded = gl.load(tmp_path / "model.geomlearn")
    assert type(loaded.after) is gl.PairSympNet and loaded.group == model.group
    # negative control: a G-SympNet correction (as `--symmetry` or another system gets)
    # moves the momenta
    plain = gl.CorrectedIntegrator(cluster, gl.GSympNet(cluster.dim, n_layers=1, width=4,
                                                        identity_init=True, key=jax.random.PRNGKey(1)))
    assert change(plain) > 1e-6
    kepler, _ = spec.build_for(gl.systems.Kepler(), key=jax.random.PRNGKey(0))
    assert type(kepler.before) is gl.GSympNet and kepler.group is None
    chosen, _ = spec.build_for(cluster, key=jax.random.PRNGKey(0), symmetry="translation:0,1/2")
    assert type(chosen.before) is gl.GSympNet and chosen.symmetry == "translation:0,1/2"


def test_corrected_takes_the_substeps_that_keep_its_classical_step_stable():
    """At a data step beyond Verlet's stability limit the spec takes the fewest substeps
    with h·ω_max ≤ STABLE_STEP at the data's states; at a small step, or with
    `--model-option substeps=`, it keeps what was built."""
    from geomlearn.cli._classical_step import STABLE_STEP
    from geomlearn.cli._frequency import frequency_states

    spec = cli.MODELS["corrected"]
    cluster = gl.systems.LennardJonesCluster(4, spatial_dim=2)
    model, _ = spec.build_for(cluster, key=jax.random.PRNGKey(0))
    states = cluster.default_initial_conditions(jnp.float64)[:, None, :]
    omega = gl.integrators.fastest_frequency(cluster, states[:, 0])
    for dt, expected in ((0.1 / omega, 1), (3.5 / omega, 4)):
        data = gl.TrajectoryData(jnp.concatenate([states, states], axis=1), dt)
        assert frequency_states(data).shape == (8, cluster.dim)
        fitted = spec.sizing.for_data(model, data, {})
        assert fitted.substeps == expected == math.ceil(dt * omega / STABLE_STEP)
        assert fitted.before is model.before and fitted.after is model.after
        assert spec.sizing.for_data(model, data, {"substeps": 1}).substeps == 1
    kepler, _ = spec.build_for(gl.systems.Kepler(), key=jax.random.PRNGKey(0))
    z = gl.systems.Kepler().default_initial_conditions(jnp.float64)[:, None, :]
    slow = gl.TrajectoryData(jnp.concatenate([z, z], axis=1), 0.01)
    assert spec.sizing.for_data(kepler, slow, {}).substeps == 1


def test_pair_sympnet_on_a_system_without_particles_is_one_line_exit_2(tmp_path, monkeypatch,
                                                                      capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["train", "--system", "pendulum", "--model", "pair-sympnet"]) == 2
    assert "particles" in error_line(capsys)
    assert list(tmp_path.iterdir()) == []
