"""`geomlearn predict`: initial states read by name against the run's state, every rollout
kept with its status, and files written with the mode of a run (hand-made run folders:
nothing is trained)."""

import json
import os
import stat
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn import cli
from geomlearn._files import write_json
from geomlearn.io import register
from geomlearn.models import AbstractFeedForwardIntegrator

LABELS = ("x", "y", "vx", "vy")
STARTS = np.array([[1.0, 0.0, 0.0, 1.0], [0.5, 0.5, 0.0, 0.0], [0.2, -0.1, 0.3, 0.0]])
TIMES = (0.5, 0.0, 3.0)


@pytest.fixture
def hand_made_run(tmp_path):
    """An untrained G-SympNet whose run records the state `x, y, vx, vy`."""
    folder = tmp_path / "run"
    folder.mkdir()
    gl.save(folder / "model.geomlearn", gl.GSympNet(4, width=6, key=jax.random.PRNGKey(0),
                                                     dtype=jnp.float64))
    (folder / "run.json").write_text(json.dumps({"dt": 0.1, "x64": True, "labels": list(LABELS)}))
    return folder


def _starts_csv(path, order):
    """`STARTS` and `TIMES` as a CSV whose columns are `order` (names of `LABELS` and `t`)."""
    table = {**dict(zip(LABELS, STARTS.T)), "t": np.array(TIMES)}
    rows = [",".join(repr(float(table[c][i])) for c in order) for i in range(len(STARTS))]
    path.write_text("\n".join([",".join(order), *rows]) + "\n")
    return path


def _predict(hand_made_run, flag, path, out, steps=5):
    return cli.main(["predict", str(hand_made_run), flag, str(path), "--steps", str(steps), "--out", str(out)])


def _error_line(capsys):
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("geomlearn: error: "), captured.err
    return lines[0]


def test_initial_columns_are_read_by_name(hand_made_run, tmp_path, capsys):
    """A starts file in another column order gives the same prediction, labelled with the
    run's state (read by position it would start elsewhere and mislabel the output)."""
    ordered = _starts_csv(tmp_path / "ordered.csv", ("x", "y", "vx", "vy", "t"))
    shuffled = _starts_csv(tmp_path / "shuffled.csv", ("vy", "vx", "t", "y", "x"))
    assert _predict(hand_made_run, "--initial", ordered, tmp_path / "a.csv") == 0
    assert _predict(hand_made_run, "--initial", shuffled, tmp_path / "b.csv") == 0
    a, b = gl.TrajectoryData.read(tmp_path / "a.csv"), gl.TrajectoryData.read(tmp_path / "b.csv")
    assert a.labels == b.labels == LABELS
    np.testing.assert_allclose(b.t0, TIMES)
    for za, zb, z0 in zip(a.trajectories, b.trajectories, STARTS):
        np.testing.assert_array_equal(zb, za)
        np.testing.assert_array_equal(zb[0], z0)
    # an .npz with the same names in another order, too
    np.savez(tmp_path / "s.npz", states=STARTS[:, [3, 2, 1, 0]], t=np.array(TIMES),
             columns=np.array(["vy", "vx", "y", "x"]))
    assert _predict(hand_made_run, "--initial", tmp_path / "s.npz", tmp_path / "c.npz") == 0
    for zc, za in zip(gl.TrajectoryData.read(tmp_path / "c.npz").trajectories, a.trajectories):
        np.testing.assert_array_equal(zc, za)


@pytest.mark.parametrize("order, expected", [
    (("x", "y", "vx", "vz"), "missing vy; unexpected vz"),
    (("x", "y", "vx"), "missing vy"),
    (("x", "y", "vx", "vy", "energy"), "unexpected energy"),
])
def test_initial_columns_that_are_not_the_runs_are_refused(hand_made_run, tmp_path, capsys, order, expected):
    path = tmp_path / "s.csv"
    path.write_text(",".join(order) + "\n" + ",".join(["0.1"] * len(order)) + "\n")
    out = tmp_path / "p.csv"
    assert _predict(hand_made_run, "--initial", path, out) == 2
    line = _error_line(capsys)
    assert f"are not the run's x, y, vx, vy (4 components): {expected}" in line
    assert f"the state columns {', '.join(order)} ({len(order)} components)" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "s.csv"]  # nothing written
    # negative control: mapped explicitly, the same file is read as named
    if len(order) == 4:
        assert cli.main(["predict", str(hand_made_run), "--initial", str(path), "--steps", "2", "--out",
                         str(out), "--q-columns", *order[:2], "--p-columns", *order[2:]]) == 0


def test_from_data_is_read_by_the_runs_names(hand_made_run, tmp_path, capsys):
    """A trajectory file with the run's columns in another order, and an extra column, gives
    the same prediction as one in the run's order; one without a column is refused."""
    arrays = [np.stack([np.linspace(0.1, 0.2, 6) * (i + 1)] * 4, axis=1) + np.arange(4)
              for i in range(2)]
    gl.TrajectoryData.from_arrays(arrays, 0.1, labels=LABELS).write(tmp_path / "ordered.csv")
    shuffled = [np.concatenate([a[:, [1, 0, 3, 2]], np.ones((6, 1))], axis=1) for a in arrays]
    gl.TrajectoryData.from_arrays(shuffled, 0.1, labels=("y", "x", "vy", "vx", "energy")).write(
        tmp_path / "shuffled.npz")
    assert _predict(hand_made_run, "--from-data", tmp_path / "ordered.csv", tmp_path / "a.npz") == 0
    assert _predict(hand_made_run, "--from-data", tmp_path / "shuffled.npz", tmp_path / "b.npz") == 0
    a, b = (gl.TrajectoryData.read(tmp_path / n) for n in ("a.npz", "b.npz"))
    assert a.labels == b.labels == LABELS
    for za, zb in zip(a.trajectories, b.trajectories):
        np.testing.assert_array_equal(zb, za)
    gl.TrajectoryData.from_arrays([a[:, :3] for a in arrays], 0.1, labels=LABELS[:3]).write(
        tmp_path / "narrow.csv")
    capsys.readouterr()
    assert _predict(hand_made_run, "--from-data", tmp_path / "narrow.csv", tmp_path / "c.csv") == 2
    assert "no column 'vy': the run's state is x, y, vx, vy, the file has x, y, vx" in \
        _error_line(capsys)
    assert not (tmp_path / "c.csv").exists()


@register
class Escalator(AbstractFeedForwardIntegrator):
    """`z ↦ 10 z`, whose step fails (a runtime check) once `q` falls below -100."""

    structure: ClassVar[str] = "none"
    dim: int = eqx.field(static=True)
    w: jax.Array

    def __init__(self, dim, *, key=None, dtype=None):
        self.dim = dim
        self.w = jnp.asarray(10.0, dtype=jnp.float32)

    def __call__(self, z, h=None):
        z = self.w.astype(z.dtype) * z
        return eqx.error_if(z, z[0] < -100.0, "Escalator: q fell below -100")


def test_predict_keeps_what_succeeded(tmp_path, capsys):
    """Three rollouts in float32: from 0 (stays 0), from q = 1 (overflows at step 39) and
    from q = -1 (its step 3 fails): all written, each with its status; exit status 5."""
    folder = tmp_path / "run"
    folder.mkdir()
    gl.save(folder / "model.geomlearn", Escalator(2))
    (folder / "run.json").write_text(json.dumps({"dt": 0.5, "dtype": "float32", "labels": ["q", "p"]}))
    (tmp_path / "s.csv").write_text("trajectory,q,p\nzero,0,0\nup,1,0\ndown,-1,0\n")
    out = tmp_path / "p.csv"
    assert _predict(folder, "--initial", tmp_path / "s.csv", out, steps=60) == 5
    captured = capsys.readouterr()
    assert "1 succeeded, 2 failed; wrote" in captured.out
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "2 of 3 rollouts failed" in err[0] and "p.csv.status.json" in err[0]
    data = gl.TrajectoryData.read(out)
    assert data.names == ("zero", "up", "down") and data.lengths == (61, 39, 3)
    up = np.float32(1.0)
    for _ in range(38):
        up = np.float32(10.0) * up  # the float32 product the rollout computes
    last = np.asarray(data.trajectories[1][-1]).astype(np.float32)  # CSV: 9 digits of float32
    np.testing.assert_array_equal(last, [up, 0.0])  # the last finite state
    np.testing.assert_array_equal(data.trajectories[2][-1], [-100.0, 0.0])
    status = json.loads((tmp_path / "p.csv.status.json").read_text())
    assert (status["succeeded"], status["failed"], status["steps"]) == (1, 2, 60)
    rows = {row["trajectory"]: row for row in status["trajectories"]}
    assert rows["zero"] == {"trajectory": "zero", "status": "ok", "states": 61, "steps": 60,
                            "in_file": True}
    assert (rows["up"]["status"], rows["up"]["step"], rows["up"]["states"]) == ("non-finite", 39, 39)
    assert (rows["down"]["status"], rows["down"]["step"]) == ("failed", 3)
    assert "Escalator: q fell below -100" in rows["down"]["reason"]
    assert rows["down"]["last_state"] == [-100.0, 0.0] and rows["down"]["last_t"] == 1.0
    # negative control: the rollout that succeeds, alone, is exit status 0 and the same states
    (tmp_path / "ok.csv").write_text("trajectory,q,p\nzero,0,0\n")
    assert _predict(folder, "--initial", tmp_path / "ok.csv", tmp_path / "ok.npz", steps=60) == 0
    assert json.loads((tmp_path / "ok.npz.status.json").read_text())["failed"] == 0
    np.testing.assert_array_equal(gl.TrajectoryData.read(tmp_path / "ok.npz").trajectories[0],
                                  data.trajectories[0])


def test_prediction_files_have_the_mode_of_a_run(hand_made_run, tmp_path, capsys):
    """The prediction and its status file are written with the mode every file of a run
    has (`write_json`: what the umask allows), not a temporary file's 0600."""
    starts = _starts_csv(tmp_path / "s.csv", ("x", "y", "vx", "vy", "t"))
    before = os.umask(0o022)
    try:
        write_json(tmp_path / "reference.json", {})
        for name in ("p.csv", "p.npz"):
            assert _predict(hand_made_run, "--initial", starts, tmp_path / name) == 0
    finally:
        os.umask(before)
    reference = stat.S_IMODE((tmp_path / "reference.json").stat().st_mode)
    assert reference == 0o644
    for name in ("p.csv", "p.npz", "p.csv.status.json", "p.npz.status.json"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == reference, name
