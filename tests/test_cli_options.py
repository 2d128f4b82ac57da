"""The command line's composition: `TrainOptions` parsed once and read back from run.json,
`ModelSpec` final and built from policies, `choose_trainer` in `geomlearn.cli`."""

import abc
import argparse
import ast
import dataclasses
import json
import pathlib
import sys

import jax
import numpy as np
import pytest

import geomlearn as gl
from geomlearn import cli
from geomlearn._files import write_json
from geomlearn.cli._main import _parser, _wants_x64
from geomlearn.cli._policy import AbstractPolicy

CLI = pathlib.Path(cli.__file__).parent


def options_of(*flags):
    return cli.TrainOptions.from_args(_parser().parse_args(["train", *flags]))


# ------------------------------------------------------------------------ TrainOptions


def test_train_options_round_trip_through_run_json(tmp_path):
    """Parsed once from the flags, written as run.json writes them, read back equal (less
    where the run is written, which run.json does not record)."""
    options = options_of("--system", "Rigid-Body", "--model", "VolumePreservingTransformer",
                         "--seq-length", "4", "--positional-encoding", "bias", "--epochs", "7",
                         "--model-option", "L=2", "pair=(1, 2)", "--x64", "--seed", "3",
                         "--out", str(tmp_path / "o"), "--force")
    assert (options.system, options.model) == ("rigid_body", "vp-transformer")  # by CLI name
    assert options.model_options == {"L": 2, "pair": (1, 2)} and options.x64 and options.force
    recorded = options.to_run()
    assert "out" not in recorded and "force" not in recorded
    path = tmp_path / "run.json"
    write_json(path, {"model": "vp-transformer", "options": recorded})
    back = cli.TrainOptions.from_run(json.loads(path.read_text()))
    expected = dataclasses.replace(options, out=None, force=False, model_options={"L": 2, "pair": [1, 2]})
    assert back == expected
    # a data file's columns, comma- or space-separated, come back as one tuple
    data = options_of("--data", "traj.csv", "--q-columns", "x,y", "--p-columns", "px", "py")
    assert data.system is None and (data.q_columns, data.p_columns) == (("x", "y"), ("px", "py"))
    assert cli.TrainOptions.from_run(json.loads(json.dumps({"options": data.to_run()}))) == data


def test_train_options_read_a_run_json_of_the_flat_format():
    """A run.json written before `"options"` records the options under their own keys; they
    are read from there (the trainer's choice, never recorded, reads "auto"). When both
    are there, `"options"` wins (the negative control: the flat keys say otherwise)."""
    flat = {"system": "pendulum", "model": "symplectic-transformer", "model_class": "SymplecticTransformer",
            "epochs": 500, "batch_size": 256, "trainer": "Levenberg–Marquardt (300 parameters)",
            "time_budget": 150.0, "seq_length": 3, "prediction_window": 2,
            "positional_encoding": True, "model_options": {}, "n_trajectories": None, "seed": 4,
            "x64": True, "dtype": "float64", "labels": ["q", "p"], "dt": 0.1}
    options = cli.TrainOptions.from_run(flat)
    assert (options.system, options.model, options.epochs, options.seq_length,
            options.prediction_window, options.seed, options.x64, options.trainer) == (
        "pendulum", "symplectic-transformer", 500, 3, 2, 4, True, "auto")
    assert options.task_options() == {"seq_length": 3, "prediction_window": 2}
    data_run = {"system": None, "data_file": {"path": "/d/traj.csv", "sha256": "0"},
                "q_columns": ["x"], "p_columns": ["px"], "val_fraction": 0.4, "seed": 1}
    options = cli.TrainOptions.from_run(data_run)
    assert (options.data, options.q_columns, options.val_fraction) == ("/d/traj.csv", ("x",), 0.4)
    both = dict(flat, options=dataclasses.replace(cli.TrainOptions.from_run(flat),
                                                  seq_length=5, prediction_window=5).to_run())
    assert cli.TrainOptions.from_run(both).task_options() == {"seq_length": 5, "prediction_window": 5}
    assert cli.TrainOptions.from_run({}) == cli.TrainOptions() == cli.TrainOptions.from_run(None)
    with pytest.raises(ValueError, match="run.json.*--seq-length must be at least 1"):
        cli.TrainOptions.from_run({"options": {"seq_length": 0}})


def test_train_options_refuse_bad_numbers_in_one_line(tmp_path, capsys):
    for flags, message in ((["--epochs", "0"], "--epochs must be at least 1, got 0"),
                           (["--time-budget", "0"], "--time-budget must be positive"),
                           (["--horizon", "-1"], "--horizon must be at least 0"),
                           (["--model-option", "width"], "expects NAME=VALUE")):
        assert cli.main(["train", *flags, "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("geomlearn: error: ") and message in err
    assert not (tmp_path / "o").exists()
    with pytest.raises(TypeError):
        cli.TrainOptions("pendulum")  # keyword-only


def _transformer_run(folder, run: dict):
    folder.mkdir()
    gl.save(folder / "model.geomlearn", gl.Transformer(2, n_heads=1, L=1, n_blocks=1,
                                                       key=jax.random.PRNGKey(0)))
    (folder / "run.json").write_text(json.dumps({"dt": 0.1, "labels": ["q", "p"], **run}))
    return folder


@pytest.mark.parametrize("form", ["options", "flat", "both"])
def test_predict_reads_the_window_from_run_json(form, tmp_path, capsys):
    """`predict` starts a transformer from the run's window length T: recorded under
    `"options"`, under the flat keys of earlier runs, and `"options"` first when a
    run.json has both (the flat keys then say T = 2, which would start from 2 states)."""
    options = {"options": {"seq_length": 4, "prediction_window": 4, "x64": True}}
    flat = {"seq_length": 2 if form == "both" else 4, "prediction_window": 2 if form == "both" else 4,
            "x64": True}
    run = {"options": options, "flat": flat, "both": {**flat, **options}}[form]
    folder = _transformer_run(tmp_path / "run", run)
    starts = tmp_path / "starts.npz"
    np.savez(starts, states=np.zeros((2, 4, 2)))
    out = tmp_path / "p.npz"
    assert cli.main(["predict", str(folder), "--initial", str(starts), "--steps", "3",
                     "--out", str(out)]) == 0
    assert gl.TrajectoryData.read(out).lengths == (4 + 3, 4 + 3)
    assert _wants_x64(argparse.Namespace(command="predict", dir=str(folder)))


@pytest.mark.slow  # a command-line evaluation with its classical comparison
def test_evaluate_reads_the_system_and_seed_from_run_json(tmp_path, capsys):
    """`evaluate` rebuilds the held-out data of the run's system and seed from
    `"options"`; a run.json of the flat format names them under their own keys (the
    negative control: the flat keys name another system, which `"options"` overrides)."""
    model = gl.GSympNet(2, n_layers=1, width=2, key=jax.random.PRNGKey(0))
    seen = {}
    for name, run in (("flat", {"system": "pendulum", "seed": 0}),
                      ("options", {"system": "pendulum", "seed": 0,
                                   "options": {"system": "harmonic_oscillator", "seed": 0}})):
        folder = tmp_path / name
        folder.mkdir()
        gl.save(folder / "model.geomlearn", model)
        (folder / "run.json").write_text(json.dumps(run))
        assert cli.main(["evaluate", str(folder), "--horizon", "0"]) == 0
        seen[name] = json.loads((folder / "metrics.json").read_text())["system"]
    assert seen == {"flat": "Pendulum", "options": "HarmonicOscillator"}


# ------------------------------------------------------------------------- ModelSpec


def test_model_spec_is_final_frozen_and_keyword_only():
    spec = cli.MODELS["gsympnet"]
    with pytest.raises(TypeError, match="final"):
        type("Sub", (cli.ModelSpec,), {})
    with pytest.raises(TypeError):
        cli.ModelSpec("gsympnet", gl.GSympNet, {})  # keyword-only
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.name = "other"
    assert all(type(s) is cli.ModelSpec for s in cli.MODELS.values())


def test_structure_is_read_from_the_model_class():
    """What `geomlearn list` shows is the class's `structure` (a reduction shows the
    symplectic immersion `check` verifies); the negative control is that the specs'
    policies differ while their structures still follow the classes."""
    for spec in cli.MODELS.values():
        if isinstance(spec.evaluation, cli.ReductionEvaluation):
            assert spec.structure == "symplectic"
        else:
            assert spec.structure == spec.cls.structure, spec.name
    assert cli.MODELS["conformal-sympnet"].structure == "conformal-symplectic"
    assert cli.MODELS["phnn"].structure == "energy-balance"
    assert cli.MODELS["symplectic-autoencoder"].cls.structure == "none"  # its full-space step


def _policy_classes():
    seen, todo = [], [AbstractPolicy]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub.__module__.startswith("geomlearn.cli"):
                seen.append(sub)
                todo.append(sub)
    return seen


def overridden_concrete_methods(cls) -> list[str]:
    """`Base.name` for each method `cls` defines over a concrete method of a base."""
    found = []
    for name, value in vars(cls).items():
        if name.startswith("__") or not (callable(value) or isinstance(value, property)):
            continue
        for base in cls.__mro__[1:]:
            if name in vars(base):
                if not getattr(vars(base)[name], "__isabstractmethod__", False):
                    found.append(f"{base.__name__}.{name}")
                break
    return found


def test_policies_are_abstract_or_final():
    """Every policy implements abstract methods only, and a concrete policy cannot be
    subclassed. Negative controls: the check finds an override in plain classes, and
    subclassing a concrete policy raises."""
    classes = _policy_classes()
    assert {c.__name__ for c in classes} >= {"Canonical", "IntegratorPlan", "LiftPlan",
                                             "ReductionEvaluation", "LatentStride"}
    for cls in classes:
        assert overridden_concrete_methods(cls) == [], cls
        if not getattr(cls, "__abstractmethods__", None):
            assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls

    class Base(abc.ABC):
        def step(self):
            return 1

    class Derived(Base):
        def step(self):
            return 2

    assert overridden_concrete_methods(Derived) == ["Base.step"]
    with pytest.raises(TypeError, match="IntegratorPlan is final"):
        type("Staged", (cli.IntegratorPlan,), {})


def _positional_flags(tree) -> list[str]:
    """Positional parameters with a boolean default or a `bool` annotation."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args.posonlyargs + node.args.args
            defaults = [None] * (len(args) - len(node.args.defaults)) + node.args.defaults
            for arg, default in zip(args, defaults):
                boolean = (isinstance(default, ast.Constant) and isinstance(default.value, bool)) \
                    or (isinstance(arg.annotation, ast.Name) and arg.annotation.id == "bool")
                if boolean:
                    found.append(f"{node.name}({arg.arg})")
    return found


def test_no_positional_booleans_in_the_command_line():
    assert _positional_flags(ast.parse("def f(x, flag=False):\n    pass\n")) == ["f(flag)"]
    assert _positional_flags(ast.parse("def f(x, *, flag=False):\n    pass\n")) == []
    for path in sorted(CLI.glob("*.py")):
        assert _positional_flags(ast.parse(path.read_text())) == [], path.name
    # and no boolean field of a dataclass of the command line is positional
    classes = {c for m in list(sys.modules.values()) if m and m.__name__.startswith("geomlearn.cli")
               for c in vars(m).values() if dataclasses.is_dataclass(c) and isinstance(c, type)
               and c.__module__.startswith("geomlearn.cli")}
    flags = [(c.__name__, f.name) for c in classes for f in dataclasses.fields(c)
             if f.type in ("bool", "bool | str")]
    assert ("TrainOptions", "x64") in flags and ("DataFile", "canonical") in flags
    assert [(c.__name__, f.name) for c in classes for f in dataclasses.fields(c)
            if f.type in ("bool", "bool | str") and not f.kw_only] == []


# ---------------------------------------------------------------- names that moved


def test_choose_trainer_lives_in_the_command_line():
    assert gl.choose_trainer is cli.choose_trainer
    assert cli.choose_trainer.__module__ == "geomlearn.cli._trainer_choice"
    with pytest.raises(ImportError, match="moved to geomlearn.cli.choose_trainer"):
        gl.training.choose_trainer  # noqa: B018
    with pytest.raises(ImportError, match="moved to geomlearn.cli.choose_trainer"):
        from geomlearn.training import choose_trainer  # noqa: F401
    with pytest.raises(ImportError, match=r"geomlearn.cli.ModelSpec\(.*ReductionPlan"):
        from geomlearn.cli import ReductionSpec  # noqa: F401
    with pytest.raises(ImportError, match=r"LiftPlan"):
        cli.LiftSpec  # noqa: B018
    with pytest.raises(AttributeError):
        cli.NoSuchName  # noqa: B018
    solver, epochs, budget, how = cli.choose_trainer(gl.GSympNet(2, key=jax.random.PRNGKey(0)), 100)
    assert isinstance(solver, gl.LevenbergMarquardt) and "Levenberg" in how
