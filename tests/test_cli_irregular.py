"""Irregularly sampled trajectories through the command line: `geomlearn train --data FILE
--irregular` (read, split and evaluated with the rows' times), `geomlearn evaluate` of
such a run, and `geomlearn predict --times FILE`. Every refusal is one line, exit status
2, nothing written; the one command-line training is in the slow tier."""

import json
import re
from pathlib import Path

import jax
import numpy as np
import pytest

import geomlearn as gl
from geomlearn import cli
from geomlearn.cli._main import _parser
from geomlearn.cli._own_data import (
    check_reads_times,
    file_record,
    one_run_segments,
    read_trajectories,
    split_by_trajectory,
)
from geomlearn.cli._plans import IntegratorPlan
from geomlearn.models import SymplecticTransformer

DT = 0.1
OMEGA = np.array([1.0, 1.3])
LABELS = ("q1", "q2", "p1", "p2")
# windows with pw < T are used on purpose (the rows and times still line up)
pytestmark = pytest.mark.filterwarnings("ignore:.*prediction_window=2 < seq_length")


def uneven(n_traj=5, n_rows=16, seed=0, jitter=0.5):
    r"""Two uncoupled harmonic oscillators by their exact flow at steps drawn from
    $[(1 - j)\,\Delta t, (1 + j)\,\Delta t]$: `(trajectories, times)`, float64."""
    rng = np.random.default_rng(seed)
    trajectories, times = [], []
    for i in range(n_traj):
        t = 0.5 * i + np.concatenate(
            [[0.0], np.cumsum(rng.uniform((1 - jitter) * DT, (1 + jitter) * DT, n_rows - 1))])
        q0, p0 = rng.normal(size=2), rng.normal(size=2)
        s = (t - t[0])[:, None] * OMEGA
        q = q0 * np.cos(s) + p0 / OMEGA * np.sin(s)
        p = -q0 * OMEGA * np.sin(s) + p0 * np.cos(s)
        trajectories.append(np.concatenate([q, p], axis=1))
        times.append(t)
    return trajectories, times


def write_csv(path, trajectories, times):
    """A CSV file `trajectory,t,q1,q2,p1,p2` (17 significant digits: read back exactly)."""
    lines = [",".join(["trajectory", "t", *LABELS])]
    for i, (z, t) in enumerate(zip(trajectories, times)):
        lines += [",".join([f"run{i}", repr(float(tk)), *map(repr, map(float, row))])
                  for tk, row in zip(t, z)]
    Path(path).write_text("\n".join(lines) + "\n")
    return path


def error_line(capsys) -> str:
    """The one line a refused command prints (and nothing on stdout)."""
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("geomlearn: error: "), captured.err
    assert captured.out == ""
    return lines[0]


def options_of(*flags):
    return cli.TrainOptions.from_args(_parser().parse_args(["train", *flags]))


@pytest.fixture
def csv(tmp_path):
    return write_csv(tmp_path / "uneven.csv", *uneven())


# ------------------------------------------------------------------------ train


def test_irregular_is_an_option_of_own_data_recorded_in_run_json(csv):
    options = options_of("--data", str(csv), "--irregular")
    assert options.irregular and not options_of("--data", str(csv)).irregular
    recorded = json.loads(json.dumps({"options": options.to_run()}))
    assert recorded["options"]["irregular"] is True
    assert cli.TrainOptions.from_run(recorded) == options
    del recorded["options"]["irregular"]  # a run written before the flag: regular
    assert not cli.TrainOptions.from_run(recorded).irregular
    with pytest.raises(ValueError, match=re.escape("--irregular applies to your own data "
                                                   "(--data FILE)")):
        cli.TrainOptions(system="pendulum", irregular=True)


@pytest.mark.parametrize("flags, message", [
    (("--irregular",), re.escape("--irregular applies to your own data (--data FILE)")),
    (("--data", "{csv}"), r"uneven.csv: trajectory 'run0': the time step from .* is .*, "
                          r"expected .*--irregular at the command line"),
    (("--data", "{csv}", "--irregular", "--model", "hnn"),
     r"--irregular: hnn \(HamiltonianNeuralNetwork\) cannot be trained on irregularly "
     r"sampled data; the feed-forward and transformer integrators can: gsympnet, .*"
     r"symplectic-transformer$"),
    (("--data", "{csv}", "--irregular", "--model", "lnn"), r"--irregular: lnn "),
    (("--data", "{csv}", "--irregular", "--test-data", "{csv}"),
     r"--test-data does not apply with --irregular"),
    (("--data", "{csv}", "--irregular", "--reference", "{csv}"),
     r"--reference does not apply with --irregular"),
])
def test_train_refusals_are_one_line_exit_2_nothing_written(csv, tmp_path, capsys, flags,
                                                            message):
    out = tmp_path / "run"
    argv = [f.format(csv=csv) for f in flags]
    assert cli.main(["train", *argv, "--epochs", "1", "--out", str(out)]) == 2
    assert re.search(message, error_line(capsys))
    assert not out.exists()


def test_only_models_that_read_times_take_irregular_data():
    """`check_reads_times` passes exactly the registered models whose class reads times:
    the feed-forward and transformer integrators, not the HNN, LNN, ... families."""
    takes = set()
    for name, spec in cli.MODELS.items():
        try:
            check_reads_times(spec)
            takes.add(name)
        except cli.CLIError as e:
            assert str(e).startswith(f"--irregular: {name} ")
    assert takes == {n for n, s in cli.MODELS.items() if s.cls.reads_times}
    assert {"gsympnet", "vp-feedforward", "transformer", "symplectic-transformer"} <= takes
    assert not {"hnn", "lnn", "phnn", "corrected"} & takes


def test_the_file_is_read_and_split_with_its_times(csv):
    trajectories, times = uneven()
    with pytest.raises(cli.CLIError, match="--irregular at the command line"):
        read_trajectories(csv)  # the negative control: a regular read refuses the file
    data = read_trajectories(csv, irregular=True)
    assert data.irregular and data.labels == LABELS
    for t, expected in zip(data.row_times, times):
        np.testing.assert_array_equal(t, expected)
    train, held_out, _ = split_by_trajectory(data, 0.4, seed=0, source=csv)
    assert train.irregular and held_out.irregular
    assert (train.n_trajectories, held_out.n_trajectories) == (3, 2)
    by_name = dict(zip(data.names, data.row_times))
    for part in (train, held_out):
        for name, t in zip(part.names, part.row_times):
            np.testing.assert_array_equal(t, by_name[name])
    # the nominal steps differ: the training data's is the one the model learns in
    assert train.dt != held_out.dt != data.dt


def test_a_run_cut_into_segments_keeps_its_times():
    """`one_run_segments` (an ASE `.traj` run) cuts irregular data into segments that keep
    their rows' times; regular data stay regular (the negative control)."""
    (z,), (t,) = uneven(n_traj=1, n_rows=13)
    segments = one_run_segments(gl.TrajectoryData.from_times([z], [t]), "md.traj", 0.25)
    assert segments.irregular and segments.n_trajectories == 4
    pieces = segments.row_times
    for a, b in zip(pieces[:-1], pieces[1:]):
        assert a[-1] == b[0]  # neighbours share their boundary state
    np.testing.assert_array_equal(np.concatenate([pieces[0]] + [p[1:] for p in pieces[1:]]), t)
    np.testing.assert_array_equal(
        np.concatenate([segments.trajectories[0]] + [s[1:] for s in segments.trajectories[1:]]), z)
    regular = one_run_segments(gl.TrajectoryData.from_arrays([z], DT), "md.traj", 0.25)
    assert not regular.irregular and regular.n_trajectories == 4


@pytest.mark.parametrize("seq_length", [None, 3])
def test_the_identity_baseline_reads_timed_samples(seq_length):
    r"""The identity map's loss on irregular data's samples: $\|Z - Y\|/\|Y\|$ over the
    states the samples start from (the times in the inputs' trailing columns dropped)."""
    trajectories, times = uneven(n_traj=2)
    data = gl.TrajectoryData.from_times(trajectories, times)
    if seq_length is None:
        model, options = gl.GSympNet(4, width=4, key=jax.random.PRNGKey(0)), {}
        x, y = data.pairs()
        guess, target = np.asarray(x), np.asarray(y)
    else:
        model = SymplecticTransformer(4, key=jax.random.PRNGKey(0))
        options = {"seq_length": 3, "prediction_window": 2}
        x, y = data.windows(3, 2)
        guess, target = np.asarray(x)[:, 1:], np.asarray(y)[:, 1:]
    loss, why = IntegratorPlan().identity_loss(model, data, fit_options=options)
    assert why == ""
    assert loss == pytest.approx(np.linalg.norm(guess - target) / np.linalg.norm(target),
                                 rel=1e-12)


# --------------------------------------------------------------------- evaluate


def _data_run(folder, csv, model, *, irregular=True):
    """A run folder as `train --data csv --irregular --val-fraction 0.4` writes it (the
    model untrained): `(folder, training data, held-out data)`."""
    options = cli.TrainOptions(data=str(csv), irregular=irregular, val_fraction=0.4, seed=0)
    data = gl.TrajectoryData.read(csv, irregular=True)
    train, held_out, _ = split_by_trajectory(data, 0.4, seed=0, source=csv)
    folder.mkdir()
    gl.save(folder / "model.geomlearn", model)
    (folder / "run.json").write_text(json.dumps({
        "dt": train.dt, "labels": list(LABELS), "data_file": file_record(csv),
        "options": options.to_run()}))
    return folder, train, held_out


def test_evaluate_rolls_the_held_out_data_out_in_the_training_step(csv, tmp_path, capsys):
    model = gl.GSympNet(4, n_layers=2, width=4, key=jax.random.PRNGKey(0))
    folder, train, held_out = _data_run(tmp_path / "run", csv, model)
    assert cli.main(["evaluate", str(folder), "--horizon", "0"]) == 0
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["dt"] == train.dt and metrics["n_trajectories"] == 2
    expected = gl.evaluate(model, None, held_out, dt=train.dt)
    assert metrics["trajectory_error"] == pytest.approx(expected["trajectory_error"], rel=1e-9)
    # the negative control: in the held-out data's own mean step the numbers differ
    own = gl.evaluate(model, None, held_out, dt=held_out.dt)["trajectory_error"]
    assert metrics["trajectory_error"] != pytest.approx(own, rel=1e-6)


def test_evaluate_of_a_run_without_the_flag_names_it(csv, tmp_path, capsys):
    model = gl.GSympNet(4, n_layers=1, width=2, key=jax.random.PRNGKey(0))
    folder, _, _ = _data_run(tmp_path / "run", csv, model, irregular=False)
    assert cli.main(["evaluate", str(folder), "--horizon", "0"]) == 2
    assert "--irregular" in error_line(capsys)
    assert not (folder / "metrics.json").exists()


# ---------------------------------------------------------------------- predict


def _run(folder, model, **options):
    folder.mkdir()
    gl.save(folder / "model.geomlearn", model)
    (folder / "run.json").write_text(json.dumps({"dt": DT, "labels": list(LABELS),
                                                 "options": {"x64": True, **options}}))
    return folder


def _starts(path, states):
    np.savez(path, states=states, columns=np.asarray(LABELS))
    return path


@pytest.fixture
def gsympnet_run(tmp_path):
    return _run(tmp_path / "run", gl.GSympNet(4, n_layers=2, width=4, key=jax.random.PRNGKey(0)))


@pytest.mark.parametrize("form", ["text", "npy"])
def test_predict_at_given_times(gsympnet_run, tmp_path, capsys, form):
    """Each rollout is `iterate(model, z0, len(times), times=times, dt=run's dt)`, written
    with the times in its `t` column (the initial states' own times are not used)."""
    times = np.array([0.0, 0.05, 0.2, 0.27, 0.5])
    if form == "text":
        path = tmp_path / "times.txt"
        path.write_text("# the initial state's time first\n0\n0.05\n\n0.2\n0.27 # a comment\n0.5\n")
    else:
        path = tmp_path / "times.npy"
        np.save(path, times)
    z0 = np.random.default_rng(1).normal(size=(3, 4))
    out = tmp_path / "p.csv"
    starts = _starts(tmp_path / "s.npz", z0)
    assert cli.main(["predict", str(gsympnet_run), "--initial", str(starts), "--times",
                     str(path), "--out", str(out)]) == 0
    assert f"3 rollouts at the 5 times of {path}" in capsys.readouterr().out
    prediction = gl.TrajectoryData.read(out, irregular=True)
    model = gl.load(gsympnet_run / "model.geomlearn")
    expected = gl.iterate(model, z0, 5, times=times, dt=DT)
    for i in range(3):
        np.testing.assert_array_equal(prediction.row_times[i], times)
        np.testing.assert_allclose(prediction.trajectories[i], expected[i], rtol=1e-14)
    # the negative control: the rollout at the run's step is another
    assert not np.allclose(gl.iterate(model, z0, 5), expected, rtol=1e-6)
    status = json.loads((tmp_path / "p.csv.status.json").read_text())
    assert status["steps"] == 4 and status["succeeded"] == 3


@pytest.mark.parametrize("text, extra, message", [
    ("0\n0.1\n0.1\n0.3\n", (), r"the times must increase strictly, but line 3 \(0.1\) does "
                                r"not come after line 2 \(0.1\)"),
    ("0\n0.2\n0.1\n", (), r"line 3 \(0.1\) does not come after line 2 \(0.2\)"),
    ("0\nabc\n", (), r"line 2 is not a number \('abc'\)"),
    ("0\nnan\n", (), r"line 2 is not finite"),
    ("0\n", (), r"1 time\(s\); expected the initial state's time and at least one"),
    ("0\n0.1\n", ("--steps", "3"), r"--times and --steps exclude each other"),
    (None, (), r"--times .*absent.txt: no such file"),
])
def test_predict_times_refusals(gsympnet_run, tmp_path, capsys, text, extra, message):
    path = tmp_path / ("absent.txt" if text is None else "times.txt")
    if text is not None:
        path.write_text(text)
    out = tmp_path / "p.csv"
    starts = _starts(tmp_path / "s.npz", np.zeros((2, 4)))
    assert cli.main(["predict", str(gsympnet_run), "--initial", str(starts), "--times",
                     str(path), *extra, "--out", str(out)]) == 2
    assert re.search(message, error_line(capsys))
    assert not out.exists() and not (tmp_path / "p.csv.status.json").exists()


def test_predict_needs_steps_or_times_and_a_model_that_reads_times(tmp_path, capsys):
    np.save(tmp_path / "times.npy", np.array([0.0, 0.3, 0.2]))
    hnn = _run(tmp_path / "hnn", gl.HamiltonianNeuralNetwork(4, width=4, depth=1,
                                                              key=jax.random.PRNGKey(0)))
    starts = _starts(tmp_path / "s.npz", np.zeros((2, 4)))
    out = tmp_path / "p.csv"
    for argv, message in (
            ([str(hnn), "--times", str(tmp_path / "times.npy")],
             r"--times: HamiltonianNeuralNetwork does not roll out at given times; the "
             r"feed-forward and transformer integrators do"),
            ([str(hnn)], r"give --steps N .* or --times FILE")):
        assert cli.main(["predict", *argv, "--initial", str(starts), "--out", str(out)]) == 2
        assert re.search(message, error_line(capsys))
    gsympnet = _run(tmp_path / "g", gl.GSympNet(4, n_layers=1, width=2, key=jax.random.PRNGKey(0)))
    assert cli.main(["predict", str(gsympnet), "--times", str(tmp_path / "times.npy"),
                     "--initial", str(starts), "--out", str(out)]) == 2
    assert re.search(r"index 2 \(0.2\) does not come after index 1 \(0.3\)", error_line(capsys))
    assert not out.exists()


def test_predict_a_transformer_at_given_times(tmp_path, capsys):
    """A window of T = 3 states, then steps of pw = 2 rows: 3 + 2k times, or one line."""
    model = SymplecticTransformer(4, key=jax.random.PRNGKey(0))
    folder = _run(tmp_path / "run", model, seq_length=3, prediction_window=2)
    window = np.random.default_rng(2).normal(size=(2, 3, 4))
    starts = _starts(tmp_path / "s.npz", window)
    times = np.array([0.0, 0.1, 0.15, 0.3, 0.32, 0.5, 0.61])
    out = tmp_path / "p.npz"
    for n, status in ((6, 2), (7, 0)):
        np.save(tmp_path / "t.npy", times[:n])
        assert cli.main(["predict", str(folder), "--initial", str(starts), "--times",
                         str(tmp_path / "t.npy"), "--out", str(out)]) == status
        if status:
            assert "appends 2 rows per step, so the times after them must be a positive " \
                   "multiple of 2, got 3" in error_line(capsys)
            assert not out.exists()
    prediction = gl.TrajectoryData.read(out, irregular=True)
    expected = gl.iterate(model, window, 7, times=times, dt=DT, prediction_window=2)
    for i in range(2):
        np.testing.assert_array_equal(prediction.row_times[i], times)
        np.testing.assert_allclose(prediction.trajectories[i], expected[i], rtol=1e-14)


# ---------------------------------------------------------- slow: a real training


@pytest.mark.slow  # a command-line training, its evaluation and a prediction
def test_train_evaluate_and_predict_on_an_irregular_file(csv, tmp_path, capsys):
    out = tmp_path / "run"
    assert cli.main(["train", "--data", str(csv), "--irregular", "--model", "gsympnet",
                     "--epochs", "2", "--horizon", "20", "--val-fraction", "0.4",
                     "--out", str(out)]) in (0, 4)  # 4: too short to learn
    assert "irregular times, mean step" in capsys.readouterr().err
    run = json.loads((out / "run.json").read_text())
    data = gl.TrajectoryData.read(csv, irregular=True)
    train, held_out, _ = split_by_trajectory(data, 0.4, seed=0, source=csv)
    assert run["options"]["irregular"] is True and run["dt"] == train.dt
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["dt"] == train.dt and metrics["long_horizon"]["horizon"] == 20
    assert metrics["identity_loss"] is not None
    model = gl.load(out / "model.geomlearn")
    expected = gl.evaluate(model, None, held_out, dt=train.dt)
    assert metrics["trajectory_error"] == pytest.approx(expected["trajectory_error"], rel=1e-9)
    assert cli.main(["evaluate", str(out), "--horizon", "20"]) in (0, 4)
    again = json.loads((out / "metrics.json").read_text())
    assert again["trajectory_error"] == metrics["trajectory_error"]
    assert again["long_horizon"]["escape_step"] == metrics["long_horizon"]["escape_step"]
    times = tmp_path / "times.txt"
    times.write_text("0.5\n0.6\n0.75\n")
    assert cli.main(["predict", str(out), "--from-data", str(csv), "--times", str(times),
                     "--out", str(tmp_path / "p.csv")]) == 0
    prediction = gl.TrajectoryData.read(tmp_path / "p.csv", irregular=True)
    assert prediction.n_trajectories == data.n_trajectories
    np.testing.assert_array_equal(prediction.row_times[0], [0.5, 0.6, 0.75])
