"""`geomlearn train --invariants / --test-data / --reference / --plot-columns`: parsed
once and recorded in run.json, every file and name checked before anything is written
(one line, exit status 2), and used by `train` and again by `evaluate` (slow tier)."""

import json
import re

import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn import cli
from geomlearn.cli._main import _parser

INVARIANTS = '''
import jax.numpy as jnp

def invariants():
    return {"radius": lambda z: z[0] ** 2 + z[1] ** 2}

def not_finite():
    return {"log": lambda z: jnp.log(-1.0 - z[0] ** 2)}

def vector():
    return {"state": lambda z: z}

def clash():
    return {"energy": lambda z: z[0]}

def not_a_dict():
    return [lambda z: z[0]]

def raises():
    raise RuntimeError("no invariants today")
'''


def options_of(*flags):
    return cli.TrainOptions.from_args(_parser().parse_args(["train", *flags]))


def error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("geomlearn: error: "), err
    return err[0]


@pytest.fixture
def here(tmp_path, monkeypatch):
    """A working folder with `inv.py` and pendulum trajectories at the quickstart's step
    (`long.npz`, 400 steps) and of another dimension and step."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "inv.py").write_text(INVARIANTS)
    pendulum, z0 = gl.systems.Pendulum(), jnp.asarray([[0.5, 0.0], [-0.3, 0.4]])
    gl.TrajectoryData.from_system(pendulum, z0, 0.1, 400).write(tmp_path / "long.npz")
    gl.TrajectoryData.from_system(pendulum, z0, 0.2, 50).write(tmp_path / "coarse.npz")
    kepler = gl.systems.Kepler()
    named = gl.TrajectoryData.from_system(kepler, kepler.default_initial_conditions()[:2], 0.1,
                                          20)
    named.write(tmp_path / "kepler.npz")
    # an archive without column names: read by position
    np.savez(tmp_path / "unnamed.npz", states=np.asarray(named.states), dt=0.1)
    return tmp_path


def test_the_options_are_parsed_once_and_recorded(here):
    options = options_of("--invariants", "inv.py:invariants", "--reference", "long.npz",
                         "--plot-columns", "p", "q")
    assert options.invariants == f"{here / 'inv.py'}:invariants"  # absolute, for evaluate
    assert options.reference == str(here / "long.npz") and options.test_data is None
    assert options.plot_columns == ("p", "q")
    recorded = json.loads(json.dumps(options.to_run()))
    assert cli.TrainOptions.from_run({"options": recorded}) == options
    assert cli.TrainOptions.from_run({"options": {}}).invariants is None


@pytest.mark.parametrize("flags, message", [
    (("--invariants", "inv.py:not_finite"), "'log'.*not finite"),
    (("--invariants", "inv.py:vector"), "'state'"),
    (("--invariants", "inv.py:clash"), "energy"),
    (("--invariants", "inv.py:not_a_dict"), "expected a non-empty dict"),
    (("--invariants", "inv.py:raises"), "raised RuntimeError: no invariants today"),
    (("--invariants", "inv.py:missing"), "has no function 'missing'"),
    (("--invariants", "nowhere.py:invariants"), "no file"),
    (("--invariants", "inv.py"), "expects MODULE:FUNCTION"),
    (("--reference", "unnamed.npz"), "--reference .*unnamed.npz: states of dimension 4; the "
                                     "run's have 2 \\(q, p\\)"),
    (("--reference", "kepler.npz"), "--reference .*kepler.npz: no column 'q'"),
    (("--reference", "coarse.npz"), "time step 0.2; the run's data have 0.1"),
    (("--test-data", "absent.npz"), "--test-data .*absent.npz: no such file"),
    (("--test-data", "long.npz", "--reference", "long.npz"), "exclude each other"),
    (("--test-data", "long.npz", "--horizon", "0"), "give --horizon N > 0"),
    (("--plot-columns", "q", "x"), "no state column 'x'; the run's state is q, p"),
])
def test_bad_input_is_one_line_exit_2_nothing_written(here, capsys, flags, message):
    status = cli.main(["train", "--epochs", "1", "--out", str(here / "run"), *flags])
    assert status == 2
    assert re.search(message, error_line(capsys))
    assert not (here / "run").exists()


def test_a_reduction_refuses_the_options(here, capsys):
    status = cli.main(["train", "--system", "linear_wave", "--model", "cotangent-lift",
                       "--reduced-dim", "2", "--out", str(here / "run"),
                       "--invariants", "inv.py:invariants"])
    assert status == 2 and "--invariants applies to integrators" in error_line(capsys)
    assert not (here / "run").exists()


# ---------------------------------------------------------------- slow: a real training


@pytest.mark.slow  # a command-line training run and its evaluation
def test_train_and_evaluate_use_the_invariants_and_the_reference(here, capsys):
    run = here / "run"
    assert cli.main(["train", "--epochs", "3", "--horizon", "600", "--out", str(run),
                     "--invariants", "inv.py:invariants", "--reference", "long.npz",
                     "--plot-columns", "p", "q"]) in (0, 4)
    out = capsys.readouterr().out
    metrics = json.loads((run / "metrics.json").read_text())
    assert "radius" in metrics["invariant_drift"] and "radius drift" in out
    long = metrics["long_horizon"]
    assert long["n_trajectories"] == 2 and long["reference_steps"] == 400
    assert long["reference_method"] == "the given trajectories"
    assert "radius" in long["invariants"]
    assert "they end at step 400: not measured beyond" in out
    options = json.loads((run / "run.json").read_text())["options"]
    assert options["reference"] == str(here / "long.npz")
    assert options["plot_columns"] == ["p", "q"]
    assert (run / "report.png").exists()
    # evaluate reads them back from run.json
    assert cli.main(["evaluate", str(run), "--horizon", "500"]) in (0, 4)
    again = json.loads((run / "metrics.json").read_text())
    assert "radius" in again["invariant_drift"]
    assert again["long_horizon"]["reference_steps"] == 400
    assert again["long_horizon"]["horizon"] == 500
    np.testing.assert_allclose(again["invariant_drift"]["radius"],
                               metrics["invariant_drift"]["radius"], rtol=1e-6)
