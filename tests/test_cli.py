"""Tests for the `geomlearn` command: end to end on tiny configurations."""

import dataclasses
import importlib.metadata
import json
import os
import subprocess
import sys
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn import cli
from geomlearn.cli import _runs
from geomlearn.cli._runs import NOT_TRAINED
from geomlearn.io import register
from geomlearn.models import AbstractFeedForwardIntegrator


def strict_json(path):
    def reject(token):
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(path.read_text(), parse_constant=reject)


@pytest.fixture(scope="module")
def pendulum_run(tmp_path_factory):
    """`geomlearn train` with the default system and model, ten iterations: a run that
    learns (exit status 0)."""
    out = tmp_path_factory.mktemp("run") / "pendulum"
    rc = cli.main(["train", "--epochs", "10", "--out", str(out)])
    assert rc == 0
    return out


def test_train_writes_every_file(pendulum_run, capsys):
    out = pendulum_run
    for name in ("model.geomlearn", "run.json", "history.json", "metrics.json", "report.png"):
        assert (out / name).is_file(), name
    assert (out / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    metrics = strict_json(out / "metrics.json")
    assert metrics["model"] == "GSympNet" and metrics["system"] == "Pendulum"
    assert metrics["epochs"] == 10 and metrics["training_seconds"] > 0
    assert metrics["stop_reason"] == "epochs"  # why training stopped, also in history.json
    # the budget ended it (10 iterations); the model learned: below half the identity map's
    # loss on the same samples and below 0.9 × where it started
    assert metrics["budget_ended_run"] is True and metrics["loss_still_falling"] in (True, False)
    assert metrics["trained"] is True and "not_trained_reason" not in metrics
    assert metrics["final_val_loss"] < 0.5 * metrics["identity_loss"]
    assert metrics["final_val_loss"] < 0.9 * metrics["start_loss"]
    assert set(metrics["trajectory_error"]) == {"1", "10", "100"}
    assert "energy" in metrics["invariant_drift"]
    assert metrics["structure_residual"]["symplecticity"] < 1e-12  # float64 in the test suite
    # a known system: the model against the classical integrators at equal cost
    measured = metrics["work_precision"]
    assert measured["verdict"] == metrics["against_classical"] and measured["horizon"] == 1000
    assert (metrics["frontier_ratio"], metrics["equal_error_speedup"]) == (
        measured["frontier_ratio"], measured["equal_error_speedup"])
    assert {"stormer_verlet", "rk4", "gauss_legendre6"} <= {p["method"] for p in measured["points"]}
    assert measured["model_point"]["method"] == "GSympNet"
    history = strict_json(out / "history.json")
    assert history["epoch"] == list(range(1, 11)) and len(history["val_loss"]) == 10
    run = strict_json(out / "run.json")
    assert (run["system"], run["model"], run["epochs"]) == ("pendulum", "gsympnet", 10)
    # the options, parsed once, resolved by the run (its minibatch size) and read back
    options = cli.TrainOptions.from_run(run)
    assert run["options"] == options.to_run() and run["options"]["model"] == "gsympnet"
    assert (options.epochs, options.batch_size, options.trainer) == (10, run["batch_size"], "auto")
    # the budget rule: at most --epochs iterations and at most 150 s (the default seconds)
    assert options.batch_size is not None and options.time_budget == 150.0
    model = gl.load(out / "model.geomlearn")
    assert isinstance(model, gl.GSympNet)
    assert model.config()["n_layers"] == cli.MODELS["gsympnet"].defaults["n_layers"]


def test_evaluate_and_check_a_run(pendulum_run, capsys):
    out = pendulum_run
    before = strict_json(out / "metrics.json")
    # evaluating again keeps what only the training knew (how long, how it stopped)
    assert cli.main(["evaluate", str(out)]) == 0
    again = strict_json(out / "metrics.json")
    # the run's --epochs 10 ended it: ten iterations, none stalled
    assert (before["stop_reason"], before["epochs"]) == ("epochs", 10)
    for k in ("training_seconds", "epochs", "stop_reason", "final_loss", "trained",
              "identity_loss", "start_loss", "budget_ended_run", "loss_still_falling"):
        assert again[k] == before[k], k
    (out / "metrics.json").unlink()
    assert cli.main(["evaluate", str(out)]) == 0
    after = strict_json(out / "metrics.json")
    assert after["trajectory_error"] == pytest.approx(before["trajectory_error"], rel=1e-12)
    text = capsys.readouterr().out
    assert "trajectory error" in text and "energy drift" in text
    assert f"vs classical            {after['against_classical']}" in text
    assert cli.main(["check", str(out)]) == 0
    text = capsys.readouterr().out
    assert "symplecticity" in text and "PASS" in text and "FAIL" not in text
    # a model file works as well as a folder
    assert cli.main(["check", str(out / "model.geomlearn"), "--points", "3"]) == 0


@pytest.mark.slow  # a command-line training run
def test_a_run_that_did_not_learn_is_reported_and_kept(tmp_path, capsys):
    # a time budget so small that no iteration runs: every file is written, the summary,
    # metrics.json and the exit status say the model is not a result
    out = tmp_path / "none"
    rc = cli.main(["train", "--time-budget", "1e-9", "--horizon", "0", "--out", str(out)])
    captured = capsys.readouterr()
    assert rc == NOT_TRAINED == 4
    assert "at most 500 iterations and 1e-09 s, whichever comes first" in captured.err  # banner
    assert "NOT TRAINED: no iteration ran" in captured.out
    assert "validation n/a   identity map 0.0938   before training" in captured.out
    for name in ("model.geomlearn", "run.json", "history.json", "metrics.json"):
        assert (out / name).is_file(), name
    metrics = strict_json(out / "metrics.json")
    assert metrics["trained"] is False and metrics["not_trained_reason"] == "no iteration ran"
    assert metrics["epochs"] == 0 and metrics["stop_reason"] == "budget"
    assert metrics["identity_loss"] > 0 and metrics["start_loss"] > 0
    assert cli.main(["evaluate", str(out), "--horizon", "0"]) == NOT_TRAINED
    assert "not trained: no iteration ran" in capsys.readouterr().out
    assert strict_json(out / "metrics.json")["trained"] is False  # kept by evaluate


def _history(losses, val=None):
    return {"epoch": list(range(1, len(losses) + 1)), "loss": list(losses),
            "val_loss": list(val) if val is not None else [None] * len(losses)}


def test_whether_a_run_learned_is_one_rule():
    learned = _runs.learned
    assert learned(_history([0.5, 0.1], [0.5, 0.1]), start=1.0, identity=1.0) is None
    # the validation loss is compared when there is one, not the training loss
    why = learned(_history([0.5, 0.01], [0.7, 0.6]), start=1.0, identity=1.0)
    assert why.startswith("the validation loss 0.6 is not below 0.5 × the identity map's 1")
    assert learned(_history([0.5, 0.49], [0.5, 0.49]), start=1.0, identity=1.0) is None
    assert learned(_history([0.5, 0.5], [0.5, 0.5]), start=1.0, identity=1.0) is not None
    # below half the identity map's but hardly moved from where it started
    why = learned(_history([0.1, 0.095], [0.1, 0.095]), start=0.1, identity=1.0)
    assert "not below 0.9 × its value before training (0.1)" in why
    assert learned(_history([0.1, 0.089], [0.1, 0.089]), start=0.1, identity=1.0) is None
    # no identity map (time-derivative samples, reductions): the start alone; without
    # a start, the loss after the first iteration
    assert learned(_history([0.5, 0.3]), start=1.0, identity=None) is None
    assert "training hardly moved it" in learned(_history([0.5, 0.3]), start=0.3, identity=None)
    assert "after the first epoch (0.5)" in learned(_history([0.5, 0.46]), start=None,
                                                    identity=None, unit="epochs")
    assert learned(_history([]), start=1.0, identity=1.0) == "no iteration ran"


def test_how_a_run_ended_is_one_rule():
    how = _runs.how_it_ended
    falling = {"loss": [1.0] * 9 + [0.98, 0.9], "stop_reason": "epochs"}
    text, entries = how(falling, epochs=11, time_budget=150.0, unit="iterations")
    # the last 10 % of 11 iterations are the last 2: 1.0 → 0.9, a fall of 10 %
    assert entries == {"budget_ended_run": True, "loss_still_falling": True,
                       "loss_recent_decrease": pytest.approx(0.1)}
    assert text == ("stopped by the limit of 11 iterations; the loss was still falling: it "
                    "fell 10.0% over the last 10% of the iterations")
    # a fall of 0.5 % over the last 10 of 100 is not "still falling" (the rule: more than
    # 1 %), though the loss halved before them
    flat = {"loss": [2.0] * 89 + [1.0] * 10 + [0.995], "stop_reason": "budget"}
    text, entries = how(flat, epochs=500, time_budget=60.0, unit="iterations")
    assert entries["loss_still_falling"] is False and entries["budget_ended_run"] is True
    assert text.startswith("stopped by the time limit of 60 s; the loss had levelled off")
    # a stall is not the budget, whatever the loss did before it
    text, entries = how({"loss": [1.0, 0.5], "stop_reason": "stalled"}, epochs=500,
                        time_budget=150.0, unit="iterations")
    assert entries["budget_ended_run"] is False and entries["loss_still_falling"] is True
    assert text.startswith("stopped by a stall")
    _, entries = how({"loss": [0.3], "stop_reason": "epochs"}, epochs=1, time_budget=None,
                     unit="epochs")
    assert entries["loss_still_falling"] is None and entries["loss_recent_decrease"] is None


def test_the_budget_is_one_rule(key):
    model = gl.GSympNet(2, n_layers=1, width=2, key=key())
    for given, (n, seconds) in (({}, (500, 150.0)), ({"epochs": 7}, (7, 150.0)),
                                ({"time_budget": 20.0}, (500, 20.0)),
                                ({"epochs": 7, "time_budget": 20.0}, (7, 20.0))):
        _, epochs, budget, how = cli.choose_trainer(model, 100, trainer="lm", **given)
        assert (epochs, budget) == (n, seconds), given
        assert f"at most {n} iterations and {seconds:g} s, whichever comes first" in how
    _, epochs, budget, how = cli.choose_trainer(model, 100, trainer="adam", time_budget=20.0)
    assert (epochs, budget) == (3000, 20.0) and "at most 3000 epochs and 20 s" in how
    _, epochs, budget, how = cli.choose_trainer(model, 1000, trainer="adam")
    assert (epochs, budget) == (100, None) and "at most 100 epochs (no time limit)" in how


def test_the_loss_before_training_and_the_identity_map_loss(key):
    train, _ = gl.datasets.pendulum_sympnets()
    Z = np.asarray(train.states)
    before, after = Z[:, :-1].reshape(-1, 2), Z[:, 1:].reshape(-1, 2)
    pairs = np.linalg.norm(after - before) / np.linalg.norm(after)
    plan = cli.IntegratorPlan()
    model = gl.GSympNet(2, n_layers=1, width=2, key=key())
    identity, why = plan.identity_loss(model, train, fit_options={})
    assert identity == pytest.approx(pairs, rel=1e-12) and why == ""
    predicted = np.asarray(jax.vmap(model)(jnp.asarray(before)))
    start = plan.start_loss(model, train, fit_options={})
    assert start == pytest.approx(np.linalg.norm(predicted - after) / np.linalg.norm(after), rel=1e-10)
    # a window model predicting one row: the row before it, the window unchanged
    spec = cli.MODELS["transformer"]
    window = spec.build(2, key=key())
    identity, _ = plan.identity_loss(window, train, fit_options={"seq_length": 3,
                                                                  "prediction_window": 1})
    rows = np.linalg.norm(Z[:, 3:] - Z[:, 2:-1]) / np.linalg.norm(Z[:, 3:])
    assert identity == pytest.approx(rows, rel=1e-12)
    # predicting all three rows: each is the one three steps before it
    identity, _ = plan.identity_loss(window, train, fit_options={"seq_length": 3,
                                                                  "prediction_window": 3})
    n = Z.shape[1]
    shifted = [(Z[:, t + 3:t + 6], Z[:, t:t + 3]) for t in range(n - 5)]
    rows = (np.sqrt(sum(np.sum((a - b) ** 2) for a, b in shifted))
            / np.sqrt(sum(np.sum(a**2) for a, _ in shifted)))
    assert identity == pytest.approx(rows, rel=1e-12) and identity > 2 * pairs
    # the step-residual samples of a port-Hamiltonian network: its input is the pair
    phnn = gl.PortHamiltonianNN(2, width=4, depth=1, key=key()).with_dt(train.dt)
    identity, _ = plan.identity_loss(phnn, train, fit_options={})
    assert identity == pytest.approx(pairs, rel=1e-12)
    # samples whose targets are time derivatives, and reductions: no identity map
    hnn = gl.HamiltonianNeuralNetwork(2, width=4, depth=1, key=key())
    states = jnp.asarray(before)
    identity, why = plan.identity_loss(hnn, (states, states), fit_options={})
    assert identity is None and "time derivatives" in why
    assert cli.ReductionPlan().identity_loss(None, train, fit_options={})[0] is None
    assert cli.LiftPlan().identity_loss(None, train, fit_options={})[0] is None


def test_the_exit_statuses_are_documented(capsys):
    assert cli.main(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "4 train or evaluate: trained but did not learn" in text
    assert "5 predict: some trajectories failed (all written, with their status)" in text


@register
class PretendSymplectic(AbstractFeedForwardIntegrator):
    """Claims to be symplectic but scales by 1.01: `geomlearn check` must fail it."""

    structure: ClassVar[str] = "symplectic"
    dim: int = eqx.field(static=True)
    w: jax.Array

    def __init__(self, dim, *, key=None, dtype=None):
        self.dim = dim
        self.w = jnp.ones((), dtype=jnp.float64) * 1.01

    def __call__(self, z, h=None):
        return self.w.astype(z.dtype) * z


def test_check_fails_a_model_that_breaks_its_claim(tmp_path, capsys):
    gl.save(tmp_path / "model.geomlearn", PretendSymplectic(2))
    assert cli.main(["check", str(tmp_path)]) == 1
    text = capsys.readouterr().out
    assert "FAIL" in text
    gl.save(tmp_path / "model.geomlearn", gl.ResNet(2, width=3, depth=1, key=jax.random.PRNGKey(0)))
    assert cli.main(["check", str(tmp_path)]) == 3  # claims nothing: nothing to verify
    assert "no structure claimed; nothing to verify" in capsys.readouterr().out


@pytest.mark.slow  # a command-line training run
def test_volume_preserving_transformer_on_the_rigid_body(tmp_path, capsys, monkeypatch):
    # the README's second example, with a smaller network to keep the test fast
    spec = cli.MODELS["vp-transformer"]
    monkeypatch.setitem(cli.MODELS, "vp-transformer", dataclasses.replace(
        spec, defaults={"n_blocks": 1, "n_linear": 1, "L": 1}))
    out = tmp_path / "vpt"
    rc = cli.main(["train", "--system", "rigid_body", "--model", "vp-transformer",
                   "--positional-encoding", "--n-trajectories", "5", "--epochs", "2",
                   "--seq-length", "3", "--out", str(out)])
    # two iterations leave the model far from the identity map's error on these slowly
    # changing states: all written, reported as not trained
    assert rc == NOT_TRAINED
    metrics = strict_json(out / "metrics.json")
    assert metrics["final_val_loss"] >= 0.5 * metrics["identity_loss"]
    assert set(metrics["invariant_drift"]) == {"energy", "casimir"}
    assert set(metrics["structure_residual"]) == {"volume"}
    assert metrics["structure_residual"]["volume"] < 1e-12
    model = gl.load(out / "model.geomlearn")
    # the model stores the placement `--positional-encoding` resolved to, never `True`
    assert model.positional_encoding == gl.VolumePreservingTransformer.default_placement
    run = strict_json(out / "run.json")
    # structure-preserving transformers roll out with pw = T by default (the rollout keeps
    # the structure of the model map)
    assert run["seq_length"] == 3 and run["prediction_window"] == 3
    assert "casimir drift" in capsys.readouterr().out


def test_list_names_systems_models_and_structures(capsys):
    assert cli.main(["list"]) == 0
    text = capsys.readouterr().out
    for name in ("pendulum", "rigid_body", "gsympnet", "vp-transformer", "resnet"):
        assert name in text
    line = next(l for l in text.splitlines() if l.strip().startswith("gsympnet"))
    assert "symplectic" in line and "rigid_body" not in line
    line = next(l for l in text.splitlines() if l.strip().startswith("vp-feedforward"))
    assert "volume" in line and "rigid_body" in line
    # the systems whose data drop the clock (τ, E) name the rows the models act on, and
    # the models that fit are those that fit those rows (the pulsating rigid body's 3-d
    # rows, not its 5-d extended state)
    line = next(l for l in text.splitlines() if l.strip().startswith("parametric_pendulum"))
    assert "dim 4 (trained on its q, p rows)" in line
    line = next(l for l in text.splitlines() if l.strip().startswith("symplectic-transformer"))
    assert "parametric_pendulum" in line and "forced_rigid_body" not in line
    line = next(l for l in text.splitlines() if l.strip().startswith("lpnet"))
    assert "forced_rigid_body" in line  # 3-d rows, as the rigid body's


@pytest.mark.slow  # command-line trainings
def test_a_driven_system_trains_on_its_rows_without_the_clock(tmp_path, capsys):
    """The driven pendulum is written in extended phase space (q, τ, p, E), but its data
    are the (q, p) rows, the drive phase being the row's place in a window: the command
    line builds the model for 2-d states and evaluates it against the data alone (no
    system of that dimension: no invariants, the energy of a driven system is not
    conserved)."""
    out = tmp_path / "driven"
    argv = ["train", "--system", "parametric_pendulum", "--model", "symplectic-transformer",
            "--positional-encoding", "--epochs", "2", "--horizon", "20", "--out", str(out)]
    # two iterations are not a result: every file is written, the exit status says so
    assert cli.main(argv) == NOT_TRAINED
    assert "SymplecticTransformer on ParametricPendulum" in capsys.readouterr().out
    run = strict_json(out / "run.json")
    assert run["labels"] == ["q", "p"] and run["canonical"] and run["seq_length"] == 3
    model = gl.load(out / "model.geomlearn")
    assert model.config()["dim"] == 2
    assert model.config()["positional_encoding"] == gl.SymplecticTransformer.default_placement
    metrics = strict_json(out / "metrics.json")
    assert metrics["system"] is None and metrics["invariant_drift"] == {}
    assert metrics["structure_residual"]["symplecticity"] < 1e-12  # float64 in the test suite
    assert set(metrics["long_horizon"]["valid_time"]) == {None}  # no reference solution
    assert cli.main(["evaluate", str(out), "--horizon", "0"]) == NOT_TRAINED
    assert "SymplecticTransformer on parametric_pendulum" in capsys.readouterr().out
    assert strict_json(out / "metrics.json")["trajectory_error"] == pytest.approx(
        metrics["trajectory_error"], rel=1e-12)
    assert cli.main(["check", str(out), "--points", "3"]) == 0


def test_a_placement_by_name_and_a_wrong_one(tmp_path, capsys):
    """`--positional-encoding PLACEMENT` builds that placement (recorded by name in the
    model and run.json); a name that is none is refused naming the choices."""
    out = tmp_path / "named"
    argv = ["train", "--system", "parametric_pendulum", "--model", "linear-symplectic-transformer",
            "--epochs", "1", "--horizon", "0", "--out", str(out)]
    assert cli.main(argv + ["--positional-encoding", "amplitude"]) == NOT_TRAINED  # 1 iteration
    assert gl.load(out / "model.geomlearn").config()["positional_encoding"] == "amplitude"
    assert strict_json(out / "run.json")["positional_encoding"] == "amplitude"
    capsys.readouterr()
    assert cli.main(argv[:-1] + [str(tmp_path / "bad"), "--positional-encoding", "front"]) == 2
    err = capsys.readouterr().err
    assert "positional_encoding must be a bool or one of" in err and "'front'" in err
    assert not (tmp_path / "bad").exists()


@pytest.mark.slow  # command-line trainings
def test_model_options_choose_the_size(tmp_path, capsys):
    """`--model-option NAME=VALUE` replaces the registry's size (read as Python literals,
    strings otherwise), reaches the saved model and run.json; without it the registry's
    defaults stand (the negative control)."""
    base = ["train", "--system", "parametric_pendulum", "--model", "symplectic-transformer",
            "--positional-encoding", "--epochs", "1", "--horizon", "0"]
    assert cli.main(base + ["--out", str(tmp_path / "plain")]) == NOT_TRAINED  # 1 iteration
    assert cli.main(base + ["--out", str(tmp_path / "large"), "--model-option", "width=20",
                            "L=3", "--model-option", "activation=sigmoid"]) == NOT_TRAINED
    capsys.readouterr()
    plain = gl.load(tmp_path / "plain" / "model.geomlearn").config()
    large = gl.load(tmp_path / "large" / "model.geomlearn").config()
    assert (plain["width"], plain["L"]) == (12, 2)  # the registry's size
    assert (large["width"], large["L"]) == (20, 3)
    assert large["positional_encoding"] == gl.SymplecticTransformer.default_placement
    assert large["activation"] != plain["activation"]
    run = strict_json(tmp_path / "large" / "run.json")
    assert run["model_options"] == {"width": 20, "L": 3, "activation": "sigmoid"}
    assert strict_json(tmp_path / "plain" / "run.json")["model_options"] == {}
    assert cli.main(["check", str(tmp_path / "large"), "--points", "3"]) == 0


@pytest.mark.parametrize("name", ["symplectic-transformer", "linear-symplectic-transformer"])
def test_the_symplectic_transformers_sizes_follow_the_data(name):
    """Up to 12 dimensions the symplectic transformers are built at width 12 with two
    units; above (the 400-dimensional Toda lattice and wave, trained by Adam) at width
    `dim` with one unit, where width 12 was measured less accurate (benchmarks/RESULTS.md).
    A `--model-option` still wins; the 12-dimensional three-body data are the boundary."""
    from geomlearn.cli._recipes import phase_space

    spec = cli.MODELS[name]

    def built(system_name, **options):
        system = cli.SYSTEMS[system_name]()
        model = eqx.filter_eval_shape(lambda: spec.build_for(
            phase_space(system_name, system), key=jax.random.PRNGKey(0), seq_length=3,
            model_options=options)[0])
        return model.config()["width"], model.config()["L"], system.dim

    assert built("henon_heiles")[:2] == (12, 2)
    assert built("three_body")[:2] == (12, 2)
    width, L, dim = built("toda_lattice")
    assert (L, dim) == (1, 400) and width in (None, 400)
    assert built("toda_lattice", width=12, L=2)[:2] == (12, 2)  # the user's choice wins


def test_model_options_parse_literals_and_refuse_malformed_pairs():
    from geomlearn.cli._options import parse_model_options

    assert parse_model_options(["n=3", "x=0.5", "flag=False", "none=None", "name=tanh",
                                "pair=(16, 16)"]) == {
        "n": 3, "x": 0.5, "flag": False, "none": None, "name": "tanh", "pair": (16, 16)}
    assert parse_model_options(None) == {}
    for bad in ("width", "=3", "width=", "2w=3"):
        with pytest.raises(ValueError, match="NAME=VALUE"):
            parse_model_options([bad])
    with pytest.raises(ValueError, match="given twice"):
        parse_model_options(["width=2", "width=3"])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "--model", "sympnet9"], "unknown model 'sympnet9'; valid models: gsympnet, "),
        (["train", "--system", "moon"], "unknown system 'moon'; valid systems: "),
        (["train", "--system", "rigid_body"], "GSympNet needs a canonical phase space.*3-dimensional.*not canonical"),
        (["train", "--system", "rigid_body", "--model", "hnn"], "Hamiltonian"),
        # the pulsating rigid body's data are its 3-d rows z (the clock dropped), not the
        # 5-d extended state
        (["train", "--system", "forced_rigid_body", "--model", "symplectic-transformer"],
         r"forced_rigid_body \(its z1, z2, z3 rows\).*even dimension 2n.*3 components"),
        # canonical momenta that are not velocities: a Lagrangian network would read
        # (q, p) as (q, q̇) and fit the wrong dynamics
        (["train", "--system", "double_pendulum", "--model", "lnn"], "DoublePendulum's data are canonical .q, p. with p ≠ q̇"),
        (["train", "--system", "coupled_oscillator", "--model", "lnn"], "p ≠ q̇"),
        (["train", "--seq-length", "3"], "--seq-length applies to transformer models only"),
        (["train", "--positional-encoding"], "--positional-encoding applies to transformer"),
        (["train", "--model", "transformer", "--seq-length", "3", "--prediction-window", "4"],
         "between 1 and --seq-length=3"),
        (["evaluate", "/no/such/dir"], "no model.geomlearn"),
        (["train", "--model-option", "widht=8"],
         "--model-option widht: GSympNet takes n_layers, width, .*not 'widht'"),
        (["train", "--model-option", "dim=3"], "not 'dim' .the dimension comes from the data"),
        (["train", "--model", "symplectic-transformer", "--model-option", "positional_encoding=True"],
         "--model-option positional_encoding: set it with --positional-encoding"),
        (["train", "--model-option", "dtype=float64"], "set it with --x64"),
        (["train", "--model-option", "width"], "expects NAME=VALUE"),
        (["train", "--model-option", "width=-1"], "cannot build gsympnet.*width"),
    ],
)
def test_user_errors(argv, message, capsys, tmp_path):
    assert cli.main(argv + (["--out", str(tmp_path / "o")] if argv[0] == "train" else [])) == 2
    err = capsys.readouterr().err
    assert err.startswith("geomlearn: error: ")
    import re

    assert re.search(message, err), err
    assert not (tmp_path / "o").exists()  # nothing written for a rejected command


def test_class_names_are_accepted_and_usage_errors_return_2(capsys):
    assert cli.model_by_name("GSympNet").name == "gsympnet"
    assert cli.model_by_name("VolumePreservingTransformer").name == "vp-transformer"
    assert cli.system_by_name("rigid-body") == "rigid_body"
    assert cli.main(["train", "--epochs", "many"]) == 2  # argparse's own message
    assert "invalid int value" in capsys.readouterr().err
    assert cli.main([]) == 2


@pytest.mark.slow  # a command-line training run
def test_missing_matplotlib_is_explained(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib → ImportError
    out = tmp_path / "noplot"
    assert cli.main(["train", "--epochs", "10", "--out", str(out)]) == 0
    assert not (out / "report.png").exists() and (out / "metrics.json").exists()
    assert 'pip install "geomlearn[plot]"' in capsys.readouterr().err


@pytest.mark.slow  # starts a process
def test_console_script_and_x64_in_a_fresh_process(pendulum_run):
    (script,) = [e for e in importlib.metadata.entry_points(group="console_scripts")
                 if e.name == "geomlearn"]
    assert script.value == "geomlearn.cli:main"
    # A fresh process starts with JAX's 32-bit default; the saved model has float64
    # parameters (this test process runs in 64-bit mode), which only load once the command
    # has switched 64-bit mode on for itself, as `check` (and `train --x64`) do.
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env.pop("JAX_ENABLE_X64", None)
    proc = subprocess.run(
        [sys.executable, "-m", "geomlearn.cli", "check", str(pendulum_run), "--points", "2"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS" in proc.stdout
    assert gl.load(pendulum_run / "model.geomlearn").config()["dtype"] == jnp.float64


@pytest.mark.slow  # starts a process
def test_version_help_examples_and_a_closed_pipe(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"geomlearn {gl.__version__}"
    for command in ("train", "evaluate", "check", "list"):
        assert cli.main([command, "--help"]) == 0
        text = capsys.readouterr().out
        assert "example:" in text and f"geomlearn {command}" in text
    assert cli.main(["--help"]) == 0
    assert "exit status: 0 success, 1 a failed check or training, 2 a usage error" in capsys.readouterr().out
    # `geomlearn list | head`: the reader has gone before the command writes; it ends quietly
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.Popen([sys.executable, "-m", "geomlearn.cli", "list"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader leaves at once
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 0
    assert "Traceback" not in err and "BrokenPipe" not in err, err


# ------------------------------------------------------------ model reduction (issue 15)


@pytest.fixture(scope="module")
def autoencoder_run(tmp_path_factory):
    """`geomlearn train --system toda_lattice --model symplectic-autoencoder-network` for
    one epoch."""
    out = tmp_path_factory.mktemp("run") / "toda"
    rc = cli.main(["train", "--system", "toda_lattice", "--model", "symplectic-autoencoder-network",
                   "--reduced-dim", "2", "--epochs", "1", "--out", str(out)])
    # one epoch leaves the reconstruction no better than the centred PSD it starts from:
    # every file is written, and the run says it did not learn
    assert rc == NOT_TRAINED
    assert strict_json(out / "metrics.json")["trained"] is False
    return out


def test_train_a_symplectic_autoencoder_writes_a_reduction_run(autoencoder_run, capsys):
    out = autoencoder_run
    for name in ("model.geomlearn", "run.json", "history.json", "metrics.json", "report.png"):
        assert (out / name).is_file(), name
    assert (out / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    run = strict_json(out / "run.json")
    assert (run["model"], run["model_class"]) == ("symplectic-autoencoder-network", "SymplecticAutoencoder")
    assert run["epochs"] == 1 and "Riemannian Adam" in run["trainer"] and "PSD" in run["trainer"]
    model = gl.load(out / "model.geomlearn")
    assert isinstance(model, gl.SymplecticAutoencoder) and model.reduced_dim == 2
    m = strict_json(out / "metrics.json")
    times = {"t=100", "t=200", "t=400", "t=800", "all"}  # 1/8 … 1 of t ∈ [0, 800]
    assert set(m["projection_error"]) == set(m["psd_projection_error"]) == times
    assert set(m["reduction_error"]) == times and m["reduction_failed"] is None
    assert (m["full_dim"], m["reduced_dim"], m["n_steps"], m["epochs"]) == (400, 2, 8000, 1)
    # started from the PSD and trained one epoch: never worse than the PSD it started from
    assert m["projection_error"]["all"] < m["psd_projection_error"]["all"]
    assert 0.6 < m["psd_projection_error"]["all"] < 0.8  # the PSD "utterly fails" at 2n = 2
    assert m["immersion_residual"] < 1e-12 and m["immersion_passed"] is True
    assert m["reduced_energy_drift"] < 1e-6  # implicit midpoint: H∘Ψ_dec stays near its start
    assert m["full_order_seconds"] > 0 and m["reduced_seconds"] > 0
    # the diagnostics of a reduction that is meant to predict
    assert m["reduction_error_max"] >= m["reduction_error_mean"] > 0
    assert m["psd_reduction_error_max"] >= m["psd_reduction_error_mean"] > 0  # centred PSD
    assert m["online_speedup"] == pytest.approx(m["full_order_seconds"] / m["reduced_seconds"])
    assert m["period"] == pytest.approx(250.1) and m["full_action"] == pytest.approx(3.62, abs=0.01)
    assert m["code_loop_action"] is not None


def test_evaluate_and_check_an_autoencoder_run(autoencoder_run, capsys):
    out = autoencoder_run
    before = strict_json(out / "metrics.json")
    assert cli.main(["evaluate", str(out)]) == NOT_TRAINED  # what training found is kept
    after = strict_json(out / "metrics.json")
    assert after["trained"] is False and after["identity_loss"] is None
    assert after["projection_error"] == pytest.approx(before["projection_error"], rel=1e-12)
    assert after["epochs"] == before["epochs"]  # kept from training
    text = capsys.readouterr().out
    assert "projection error" in text and "PSD (2n = 2)" in text and "reduction error" in text
    assert cli.main(["check", str(out), "--points", "4"]) == 0
    text = capsys.readouterr().out
    assert "symplectic immersion" in text and "immersion" in text and "PASS" in text
    assert "FAIL" not in text


def test_check_fails_an_autoencoder_off_its_manifold(autoencoder_run, tmp_path, capsys):
    """Negative control: a decoder Stiefel matrix scaled by 1.1 (off the manifold) is no
    longer a symplectic immersion, and `check` must say so."""
    model = gl.load(autoencoder_run / "model.geomlearn")
    bad = eqx.tree_at(lambda m: m.decoder_blocks[-1][1].weight.value, model,
                      1.1 * model.decoder_blocks[-1][1].weight.value)
    gl.save(tmp_path / "model.geomlearn", bad)
    assert cli.main(["check", str(tmp_path), "--points", "3"]) == 1
    text = capsys.readouterr().out
    assert "FAIL" in text and "immersion" in text


@pytest.fixture(scope="module")
def lift_run(tmp_path_factory):
    """`geomlearn train --system toda_lattice --model symplectic-autoencoder --x64` (the
    cotangent lift and its latent GSympNet), 60 iterations."""
    out = tmp_path_factory.mktemp("run") / "toda-lift"
    rc = cli.main(["train", "--system", "toda_lattice", "--model", "symplectic-autoencoder", "--x64",
                   "--epochs", "60", "--out", str(out)])
    assert rc == 0
    return out


def test_train_the_cotangent_lift_writes_a_reduction_run_that_predicts(lift_run, capsys):
    """The lift (fitted in closed form) and its latent GSympNet (trained alone): the
    reduction run's files and metrics, the issue's accuracy goals at 2n = 2, the latent
    rollout's metrics, and `evaluate`/`check` on the run."""
    out = lift_run
    run = strict_json(out / "run.json")
    assert (run["model"], run["model_class"]) == ("symplectic-autoencoder", "LiftedIntegrator")
    assert "latent GSympNet alone" in run["trainer"] and run["epochs"] == 60
    model = gl.load(out / "model.geomlearn")
    assert isinstance(model, gl.LiftedIntegrator) and model.stride == 16
    assert float(jnp.max(jnp.abs(model.lift.coefficients))) > 0  # fitted, not the placeholder
    m = strict_json(out / "metrics.json")
    for key in ("reduction_error_mean", "reduction_error_max", "psd_reduction_error_mean",
                "psd_reduction_error_max", "code_loop_action", "full_action", "online_speedup",
                "latent_error_mean", "latent_online_speedup", "latent_online_speedup_every"):
        assert m[key] is not None and m[key] > 0, key
    assert m["reduction_error_mean"] < 0.5 * m["psd_reduction_error_mean"]
    assert abs(m["code_loop_action"] - m["full_action"]) < 0.1 * m["full_action"]
    assert (m["latent_stride"], m["latent_steps"], m["epochs"]) == (16, 500, 60)
    # the iterate kept is the best-scoring one on the first half of the data (every 5th and
    # the last are scored), not necessarily the last
    history = strict_json(out / "history.json")
    assert m["kept_epoch"] == history["kept_epoch"] and (m["kept_epoch"] % 5 == 0 or m["kept_epoch"] == 60)
    toda = gl.systems.TodaLattice(200)
    data, _, _ = cli.for_system("toda_lattice", toda, seed=0, dtype=jnp.float64)
    assert m["kept_score"] == pytest.approx(model.latent_rollout_error(data, fraction=0.5), rel=1e-9)
    assert m["immersion_passed"] is True
    assert cli.main(["evaluate", str(out)]) == 0
    assert "latent integrator" in capsys.readouterr().out
    assert cli.main(["check", str(out), "--points", "4"]) == 0


@pytest.mark.slow  # builds the 400-dimensional Toda data through the command line
def test_autoencoder_usage_errors(tmp_path, capsys):
    argv = ["train", "--system", "toda_lattice", "--model", "symplectic-autoencoder-network",
            "--out", str(tmp_path / "o")]
    assert cli.main(argv + ["--trainer", "lm"]) == 2
    assert "Riemannian Adam" in capsys.readouterr().err
    assert cli.main(argv + ["--reduced-dim", "3"]) == 2
    assert "reduced_dim must be even" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
