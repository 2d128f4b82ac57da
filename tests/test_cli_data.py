"""`geomlearn train --data` and `geomlearn predict`: a user's own trajectories through the
command line (tiny trainings, in process), and every bad input refused in one line."""

import hashlib
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn import cli
from geomlearn.cli._own_data import DataFile, check_model_fits, split_by_trajectory

ROOT = Path(__file__).resolve().parents[1]
DT = 0.1
OMEGA = np.array([1.0, 1.3])
LENGTHS = (30, 24, 41, 35, 27)  # ragged
STARTS = (0.0, 0.0, 2.5, 0.0, 1.0)  # a trajectory may start at any time


def oscillators(lengths=LENGTHS, starts=STARTS, seed=0):
    r"""Two uncoupled harmonic oscillators, $H = \sum_i (p_i^2 + \omega_i^2 q_i^2)/2$, by
    their exact flow: a list of `(T_i, 4)` arrays `(q1, q2, p1, p2)` and their times."""
    rng = np.random.default_rng(seed)
    trajectories, times = [], []
    for n, t0 in zip(lengths, starts):
        q0, p0 = rng.normal(size=2), rng.normal(size=2)
        s = np.arange(n)[:, None] * DT * OMEGA
        q = q0 * np.cos(s) + p0 / OMEGA * np.sin(s)
        p = -q0 * OMEGA * np.sin(s) + p0 * np.cos(s)
        trajectories.append(np.concatenate([q, p], axis=1))
        times.append(t0 + DT * np.arange(n))
    return trajectories, times


def write_csv(path, trajectories, times, header=("q1", "q2", "p1", "p2")):
    lines = [",".join(["trajectory", "t", *header])]
    for i, (z, t) in enumerate(zip(trajectories, times)):
        lines += [",".join([f"run{i}", repr(float(tk)), *map(repr, map(float, row))])
                  for tk, row in zip(t, z)]
    Path(path).write_text("\n".join(lines) + "\n")
    return path


def write_npz(path, trajectories, dt=DT):
    np.savez(path, dt=dt, **{f"traj_{i}": z for i, z in enumerate(trajectories)})
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("data")
    trajectories, times = oscillators()
    return {"folder": folder, "trajectories": trajectories, "times": times,
            "csv": write_csv(folder / "traj.csv", trajectories, times),
            "npz": write_npz(folder / "traj.npz", trajectories)}


@pytest.fixture(scope="module")
def csv_run(files):
    """One tiny `geomlearn train --data traj.csv --model gsympnet` run, shared."""
    out = files["folder"] / "run-csv"
    assert cli.main(["train", "--data", str(files["csv"]), "--model", "gsympnet",
                     "--epochs", "2", "--out", str(out)]) in (0, 4)  # 4: too short to learn
    return out


def error_line(capsys):
    """The one line a refused command prints (and nothing on stdout)."""
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("geomlearn: error: "), captured.err
    assert captured.out == ""
    return lines[0]


# ------------------------------------------------------------------------------ train


def test_train_on_a_csv_file_writes_a_run(csv_run, files, capsys):
    for name in ("model.geomlearn", "run.json", "history.json", "metrics.json", "report.png"):
        assert (csv_run / name).is_file(), name
    run = json.loads((csv_run / "run.json").read_text())
    raw = files["csv"].read_bytes()
    assert run["data_file"] == {"path": str(files["csv"].resolve()), "size": len(raw),
                                "sha256": hashlib.sha256(raw).hexdigest()}
    assert run["system"] is None and run["dt"] == pytest.approx(DT)
    assert run["labels"] == ["q1", "q2", "p1", "p2"]
    metrics = json.loads((csv_run / "metrics.json").read_text())
    assert metrics["epochs"] == 2
    assert metrics["n_trajectories"] == 1  # 20 % of 5 trajectories, held out whole
    assert all(np.isfinite(v) for v in metrics["trajectory_error"].values())
    assert metrics["structure_residual"]["symplecticity"] < 1e-5  # float32 run
    # no system: nothing to compare with the classical integrators
    assert "work_precision" not in metrics and "against_classical" not in metrics
    assert (csv_run / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_evaluate_a_data_run_splits_the_same_file(csv_run, files, tmp_path, capsys):
    before = json.loads((csv_run / "metrics.json").read_text())
    assert cli.main(["evaluate", str(csv_run)]) in (0, 4)  # 4: too short to learn
    after = json.loads((csv_run / "metrics.json").read_text())
    assert after["trajectory_error"] == pytest.approx(before["trajectory_error"], rel=1e-6)
    # a changed file is noticed (its SHA-256 differs from run.json's)
    run = json.loads((csv_run / "run.json").read_text())
    changed = write_csv(tmp_path / "traj.csv", *oscillators(seed=1))
    (tmp_path / "run").mkdir()
    for name in ("model.geomlearn", "history.json", "metrics.json"):
        (tmp_path / "run" / name).write_bytes((csv_run / name).read_bytes())
    run["data_file"]["path"] = str(changed)
    (tmp_path / "run" / "run.json").write_text(json.dumps(run))
    capsys.readouterr()
    assert cli.main(["evaluate", str(tmp_path / "run")]) == 2
    assert "has changed since training" in error_line(capsys)


def test_train_on_a_ragged_npz_file(files, csv_run, tmp_path, capsys):
    """The same data as `.npz`: the same split, so the same shapes (compiled once)."""
    out = tmp_path / "run-npz"
    assert cli.main(["train", "--data", str(files["npz"]), "--model", "gsympnet",
                     "--epochs", "2", "--out", str(out)]) in (0, 4)  # 4: too short to learn
    run = json.loads((out / "run.json").read_text())
    assert run["data_file"]["sha256"] == hashlib.sha256(files["npz"].read_bytes()).hexdigest()
    metrics = json.loads((out / "metrics.json").read_text())
    expected = json.loads((csv_run / "metrics.json").read_text())
    assert metrics["n_trajectories"] == 1
    assert metrics["trajectory_error"] == pytest.approx(expected["trajectory_error"], rel=1e-6)


def test_train_reads_columns_by_name_and_prints_the_split(files, csv_run, tmp_path, capsys):
    """The same data with interleaved columns `x, vx, y, vy` (x = q1, vx = p1, …): read by
    name positions first, the split in the banner, and the same run as on `q1, q2, p1,
    p2` (read by position, q would be (x, vx) and the run another)."""
    interleaved = [z[:, [0, 2, 1, 3]] for z in files["trajectories"]]
    path = write_csv(tmp_path / "xv.csv", interleaved, files["times"],
                     header=("x", "vx", "y", "vy"))
    out = tmp_path / "run-xv"
    capsys.readouterr()
    assert cli.main(["train", "--data", str(path), "--model", "gsympnet", "--epochs", "2",
                     "--out", str(out)]) in (0, 4)
    banner = capsys.readouterr().err
    assert "q = (x, y), p = (vx, vy) (reordered by name from x, vx, y, vy)" in banner
    assert json.loads((out / "run.json").read_text())["labels"] == ["x", "y", "vx", "vy"]
    metrics = json.loads((out / "metrics.json").read_text())
    expected = json.loads((csv_run / "metrics.json").read_text())
    assert metrics["trajectory_error"] == pytest.approx(expected["trajectory_error"], rel=1e-6)
    assert metrics["final_loss"] == pytest.approx(expected["final_loss"], rel=1e-6)
    # evaluate reads the file as the run did
    assert cli.main(["evaluate", str(out)]) in (0, 4)  # 4: too short to learn
    again = json.loads((out / "metrics.json").read_text())
    assert again["trajectory_error"] == pytest.approx(metrics["trajectory_error"], rel=1e-6)


def test_train_leaves_out_invariant_columns(files, csv_run, tmp_path, capsys):
    """Columns `energy` and `Lz` beside the state: left out with a warning (as state
    components they would make a 6-dimensional run), unless named."""
    with_invariants = [np.concatenate([z, np.ones((len(z), 2))], axis=1)
                       for z in files["trajectories"]]
    path = write_csv(tmp_path / "e.csv", with_invariants, files["times"],
                     header=("q1", "q2", "p1", "p2", "energy", "Lz"))
    out = tmp_path / "run-e"
    capsys.readouterr()
    assert cli.main(["train", "--data", str(path), "--model", "gsympnet", "--epochs", "2",
                     "--out", str(out)]) in (0, 4)
    err = capsys.readouterr().err
    assert "warning: e.csv: the columns energy, Lz look like invariants" in err
    assert "q = (q1, q2), p = (p1, p2) (by name)" in err
    run = json.loads((out / "run.json").read_text())
    assert run["labels"] == ["q1", "q2", "p1", "p2"] and run["left_out_columns"] == ["energy", "Lz"]
    expected = json.loads((csv_run / "metrics.json").read_text())
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["trajectory_error"] == pytest.approx(expected["trajectory_error"], rel=1e-6)


def test_validation_is_split_by_whole_trajectories(files):
    data = gl.TrajectoryData.read(files["csv"])
    train, val, _ = split_by_trajectory(data, 0.4, seed=0, source="traj.csv")
    assert (train.n_trajectories, val.n_trajectories) == (3, 2)
    assert sorted(train.names + val.names) == sorted(data.names)  # disjoint, complete
    assert sorted(train.lengths + val.lengths) == sorted(LENGTHS)
    with pytest.raises(cli.CLIError, match="at least 2"):
        split_by_trajectory(gl.TrajectoryData.from_arrays(files["trajectories"][:1], DT), 0.2,
                            seed=0, source="one.csv")


def test_data_and_system_are_exclusive(files, tmp_path, capsys):
    assert cli.main(["train", "--data", str(files["csv"]), "--system", "pendulum",
                     "--out", str(tmp_path / "x")]) == 2
    assert "not allowed with argument" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_odd_dimension_refused_for_a_symplectic_model_only(tmp_path, capsys):
    """A 3-dimensional file: refused for a canonical model, accepted by a volume-preserving
    one (negative control: the check is about the dimension, not every file)."""
    spec_fits = cli.MODELS["vp-feedforward"]
    check_model_fits(spec_fits, DataFile(dim=3, canonical=False, labels=("a", "b", "c")), "f.csv")  # no error
    with pytest.raises(cli.CLIError, match="even dimension"):
        check_model_fits(cli.MODELS["gsympnet"], DataFile(dim=3, canonical=False, labels=("a", "b", "c")), "f.csv")
    check_model_fits(cli.MODELS["gsympnet"], DataFile(dim=4, canonical=True, labels=("a", "b", "c", "d")), "f.csv")
    # the registry's own dimension checks apply to files too: a Lie–Poisson net is 3-dimensional
    check_model_fits(cli.MODELS["lpnet"], DataFile(dim=3, canonical=False, labels=("a", "b", "c")), "f.csv")
    with pytest.raises(cli.CLIError, match="4-dimensional"):
        check_model_fits(cli.MODELS["lpnet"], DataFile(dim=4, canonical=True, labels=("a", "b", "c", "d")), "f.csv")


# ------------------------------------------------------------------- bad input: exit 2


def _bad_files(folder: Path, good: Path):
    """`{name: (argv tail, expected text)}`: each a user mistake of its own kind."""
    trajectories, times = oscillators()
    text = good.read_text().splitlines()
    nan = list(text)
    nan[5] = re.sub(r",[^,]+$", ",nan", nan[5])
    (folder / "nan.csv").write_text("\n".join(nan) + "\n")
    narrow = list(text)
    narrow[7] = narrow[7].rsplit(",", 1)[0]
    (folder / "narrow.csv").write_text("\n".join(narrow) + "\n")
    (folder / "empty.csv").write_text("")
    write_npz(folder / "widths.npz", [trajectories[0], trajectories[1][:, :3]])
    odd = [z[:, :3] for z in trajectories]
    write_csv(folder / "odd.csv", odd, times, header=("x", "y", "z"))
    write_csv(folder / "one.csv", trajectories[:1], times[:1])
    write_csv(folder / "short.csv", [trajectories[0], trajectories[1][:4]], times[:2])
    six = [np.concatenate([z, z[:, :2]], axis=1) for z in trajectories]
    write_csv(folder / "galpy.csv", six, times, header=("R", "vR", "vT", "z", "vz", "phi"))
    np.savez(folder / "clash.npz", dt=2 * DT, **{f"traj_{i}": z for i, z in enumerate(trajectories)},
             **{f"t_{i}": t for i, t in enumerate(times)})
    data = ["--data"]
    return {
        "nan": ([*data, str(folder / "nan.csv")], "nan.csv"),
        "inconsistent width (csv)": ([*data, str(folder / "narrow.csv")], "narrow.csv"),
        "inconsistent width (npz)": ([*data, str(folder / "widths.npz")], "widths.npz"),
        "empty file": ([*data, str(folder / "empty.csv")], "empty.csv"),
        "missing file": ([*data, str(folder / "absent.csv")], "absent.csv"),
        "missing column": ([*data, str(good), "--q-columns", "q1", "x2", "--p-columns", "p1",
                            "p2"], "x2"),
        "odd dimension, symplectic model": ([*data, str(folder / "odd.csv")], "even dimension"),
        "one trajectory": ([*data, str(folder / "one.csv")], "at least 2"),
        "too short for the windows": ([*data, str(folder / "short.csv"), "--model",
                                       "transformer"], "trajectory 'run1' has 4 states"),
        "model reduction": ([*data, str(good), "--model", "symplectic-autoencoder"], "Hamiltonian"),
        "val fraction": ([*data, str(good), "--val-fraction", "1"], "--val-fraction"),
        "n-trajectories": ([*data, str(good), "--n-trajectories", "2"], "--n-trajectories"),
        "ambiguous columns": ([*data, str(folder / "galpy.csv")],
                              "cannot tell positions from momenta by name: vT, phi"),
        "dt and times disagree": ([*data, str(folder / "clash.npz")], "'dt' is 0.2 but the times"),
    }


BAD_TRAIN = ["nan", "inconsistent width (csv)", "inconsistent width (npz)", "empty file",
             "missing file", "missing column", "odd dimension, symplectic model",
             "one trajectory", "too short for the windows", "model reduction", "val fraction",
             "n-trajectories", "ambiguous columns", "dt and times disagree"]


@pytest.mark.parametrize("case", BAD_TRAIN)
def test_bad_data_is_one_line_exit_2_nothing_written(case, files, tmp_path, monkeypatch, capsys):
    bad = _bad_files(tmp_path, files["csv"])
    argv, expected = bad[case]
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # the default run folder would be work/runs/
    rc = cli.main(["train", *argv, "--epochs", "2", "--out", str(work / "out")])
    assert rc == 2
    assert expected in error_line(capsys)
    assert list(work.iterdir()) == []  # no run folder, no runs/


# ---------------------------------------------------------------------------- predict


def test_predict_round_trip_csv(csv_run, files, tmp_path, capsys):
    out = tmp_path / "prediction.csv"
    assert cli.main(["predict", str(csv_run), "--from-data", str(files["csv"]),
                     "--steps", "12", "--out", str(out)]) == 0
    back = gl.TrajectoryData.read(out)
    assert back.n_trajectories == len(LENGTHS) and back.dim == 4
    assert back.dt == pytest.approx(DT)
    header = out.read_text().splitlines()[0]
    assert header == "trajectory,t,q1,q2,p1,p2"
    rows = np.genfromtxt(out, delimiter=",", skip_header=1, dtype=str)
    for label, t0 in zip(sorted(set(rows[:, 0])), (0.0, 0.0, 2.5, 0.0, 1.0)):
        t = rows[rows[:, 0] == label, 1].astype(float)
        assert t.shape == (13,) and t[0] == pytest.approx(t0)  # continued from the data
        np.testing.assert_allclose(np.diff(t), DT, rtol=1e-9)
    # the batched rollout equals gl.iterate from each first state, one at a time
    model = gl.load(csv_run / "model.geomlearn")
    first = files["trajectories"][2][0].astype(np.float32)
    expect = np.asarray(gl.iterate(model, jnp.asarray(first), 13))
    got = rows[rows[:, 0] == sorted(set(rows[:, 0]))[2], 2:].astype(float)
    np.testing.assert_allclose(got, expect, rtol=1e-6, atol=1e-6)


def test_predict_round_trip_npz_from_initial_states(csv_run, tmp_path, capsys):
    starts = tmp_path / "starts.csv"
    starts.write_text("q1,q2,p1,p2,t\n1,0,0,1,0.5\n0.5,0.5,0,0,0\n0.2,-0.1,0.3,0,3\n")
    out = tmp_path / "prediction.npz"
    assert cli.main(["predict", str(csv_run), "--initial", str(starts), "--steps", "7",
                     "--out", str(out)]) == 0
    back = gl.TrajectoryData.read(out)
    assert back.n_trajectories == 3 and back.dim == 4 and back.dt == pytest.approx(DT)
    np.testing.assert_allclose(back.t0, [0.5, 0.0, 3.0])  # each rollout from its start time
    assert back.lengths == (8, 8, 8)
    np.testing.assert_allclose(back.trajectories[1][0], [0.5, 0.5, 0, 0])
    # the same states from an .npz
    np.savez(tmp_path / "starts.npz", states=np.array([[1.0, 0, 0, 1], [0.5, 0.5, 0, 0]]))
    assert cli.main(["predict", str(csv_run), "--initial", str(tmp_path / "starts.npz"),
                     "--steps", "7", "--out", str(tmp_path / "again.npz")]) == 0
    with np.load(out) as a, np.load(tmp_path / "again.npz") as b:
        np.testing.assert_allclose(a["traj_0"], b["traj_0"], rtol=1e-6)


def test_predict_with_a_transformer_starts_from_T_states(files, tmp_path, capsys):
    """A window model starts from the first T states of each trajectory (an untrained
    transformer in a hand-made run folder: predict needs no training)."""
    run = tmp_path / "run"
    run.mkdir()
    gl.save(run / "model.geomlearn", gl.Transformer(4, n_heads=1, L=2, n_blocks=1,
                                                    key=jax.random.PRNGKey(0)))
    (run / "run.json").write_text(json.dumps({"dt": DT, "seq_length": 3, "prediction_window": 3,
                                              "x64": True, "labels": ["q1", "q2", "p1", "p2"]}))
    out = tmp_path / "p.npz"
    assert cli.main(["predict", str(run), "--from-data", str(files["npz"]), "--steps", "6",
                     "--out", str(out)]) == 0
    z = gl.TrajectoryData.read(out).trajectories[3]
    assert z.shape == (3 + 6, 4)  # T = 3 initial states, then 6 predicted
    np.testing.assert_allclose(z[:3], files["trajectories"][3][:3], rtol=1e-12)
    # one state per trajectory is not enough for it
    starts = tmp_path / "starts.csv"
    starts.write_text("q1,q2,p1,p2\n1,0,0,1\n")
    capsys.readouterr()
    assert cli.main(["predict", str(run), "--initial", str(starts), "--steps", "6",
                     "--out", str(tmp_path / "q.csv")]) == 2
    assert "starts from 3 consecutive states" in error_line(capsys)
    assert not (tmp_path / "q.csv").exists()


def test_predict_bad_input_is_one_line_exit_2_nothing_written(csv_run, files, tmp_path, capsys):
    out = tmp_path / "p.csv"
    narrow = tmp_path / "narrow.csv"
    narrow.write_text("q1,q2,p1\n1,0,0\n")
    nan = tmp_path / "nan.csv"
    nan.write_text("q1,q2,p1,p2\n1,0,nan,0\n")
    cases = {
        "unknown run": (["predict", str(tmp_path / "no-run"), "--from-data", str(files["csv"])],
                        "no-run"),
        "wrong width": (["predict", str(csv_run), "--initial", str(narrow)], "3 components"),
        "non-finite": (["predict", str(csv_run), "--initial", str(nan)], "non-finite"),
        "missing file": (["predict", str(csv_run), "--initial", str(tmp_path / "none.csv")],
                         "none.csv"),
    }
    for name, (argv, expected) in cases.items():
        assert cli.main([*argv, "--steps", "5", "--out", str(out)]) == 2, name
        assert expected in error_line(capsys), name
        assert not out.exists(), name
    for argv, expected in ((["--steps", "0", "--out", str(out)], "--steps"),
                           (["--steps", "5", "--out", str(tmp_path / "p.txt")], ".csv or .npz"),
                           (["--steps", "5", "--out", str(tmp_path / "no" / "p.csv")], "does not exist")):
        assert cli.main(["predict", str(csv_run), "--from-data", str(files["csv"]), *argv]) == 2
        assert expected in error_line(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nan.csv", "narrow.csv"]


def test_predict_that_fails_is_exit_1_nothing_written(tmp_path, capsys):
    """A Hamiltonian network whose implicit step cannot be solved at the run's dt: the
    prediction fails in one line (exit 1), and no file is written."""
    hnn = gl.HamiltonianNeuralNetwork(2, width=8, depth=1, key=jax.random.PRNGKey(0))
    hnn = jax.tree_util.tree_map(lambda a: a * 20.0 if a.ndim == 2 else a, hnn)
    run = tmp_path / "run"
    run.mkdir()
    gl.save(run / "model.geomlearn", hnn)
    (run / "run.json").write_text(json.dumps({"dt": 2.0, "x64": True}))
    (tmp_path / "s.csv").write_text("q1,p1\n0.4,-0.3\n")
    out = tmp_path / "p.csv"
    assert cli.main(["predict", str(run), "--initial", str(tmp_path / "s.csv"), "--steps", "3",
                     "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "prediction failed" in err[0] and "did not converge" in err[0]
    assert not out.exists()
    # the same model at a small step predicts (the failure is the step size, not the model)
    (run / "run.json").write_text(json.dumps({"dt": 1e-4, "x64": True}))
    assert cli.main(["predict", str(run), "--initial", str(tmp_path / "s.csv"), "--steps", "3",
                     "--out", str(out)]) == 0
    assert gl.TrajectoryData.read(out).lengths == (4,)


# ------------------------------------------------------------------------ slow: docs


def _blocks(page: str):
    """The page's code blocks in order: `(language, code)`."""
    return re.findall(r"```(python|bash)\n(.*?)```", page, flags=re.S)


@pytest.mark.slow
def test_the_own_data_page_runs(tmp_path, monkeypatch):
    """docs/own_data.md as written (epochs made tiny): the NumPy file, the shell commands
    in a process, the prediction read back, and the same in Python."""
    page = (ROOT / "docs" / "own_data.md").read_text()
    monkeypatch.chdir(tmp_path)
    namespace = {}
    for i, (language, code) in enumerate(_blocks(page)):
        code = re.sub(r"epochs[ =]\d+", lambda m: m.group(0)[:7] + "3", code)
        if language == "python":
            exec(compile(code, f"own_data.md block {i}", "exec"), namespace)
            continue
        for line in code.splitlines():
            argv = shlex.split(line, comments=True)
            if argv and argv[0] == "geomlearn":
                subprocess.run([sys.executable, "-m", "geomlearn.cli", *argv[1:]], check=True,
                               timeout=600)
    assert (tmp_path / "prediction.csv").is_file()
    assert namespace["prediction"].n_trajectories == namespace["n_trajectories"]
    assert "trajectory_error" in namespace["metrics"]


def test_help_shows_the_data_examples(capsys):
    for command, text in (("train", "--data traj.csv"), ("predict", "--from-data traj.csv")):
        assert cli.main([command, "--help"]) == 0
        out = capsys.readouterr().out
        assert "example:" in out and text in out
    assert cli.main(["--help"]) == 0
    assert "predict" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(cli.MODELS))
def test_every_fitting_model_trains_on_a_file(name, tmp_path, capsys):
    """Every registered model that can be built for a 4-dimensional file trains on it; a
    model reduction is refused (it needs the system's Hamiltonian), as is a model that
    cannot take 4-dimensional states — in one line, nothing written."""
    spec = cli.MODELS[name]
    try:
        spec.build_for(DataFile(dim=4, canonical=True, labels=("q1", "q2", "p1", "p2")), key=jax.random.PRNGKey(0),
                       seq_length=3)
        fits = not spec.evaluation.needs_system
    except (TypeError, ValueError):
        fits = False
    trajectories, times = oscillators()
    data = write_csv(tmp_path / "traj.csv", trajectories, times)
    rc = cli.main(["train", "--data", str(data), "--model", name, "--epochs", "2",
                   "--out", str(tmp_path / "run")])
    if fits:
        assert rc in (0, 4) and (tmp_path / "run" / "metrics.json").is_file()
    else:
        assert rc == 2 and not (tmp_path / "run").exists()
        error_line(capsys)

