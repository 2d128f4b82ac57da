"""State columns read by name (`geomlearn.data.column_layout`, `TrajectoryData.read`):
positions first whatever the file's order, invariants left out, ambiguous names refused;
and an `.npz` whose `dt` and `t_i` disagree refused."""

import warnings

import numpy as np
import pytest

from geomlearn.data import ColumnWarning, TrajectoryData, column_layout
from geomlearn.cli import SYSTEMS

#: `header → (q, p)`: the rule of `geomlearn.data._columns`, one case per clause.
BY_NAME = {
    ("x", "vx", "y", "vy", "z", "vz"): (("x", "y", "z"), ("vx", "vy", "vz")),  # interleaved
    ("vx", "vy", "vz", "x", "y", "z"): (("x", "y", "z"), ("vx", "vy", "vz")),  # p first
    ("p1", "p2", "q1", "q2"): (("q1", "q2"), ("p1", "p2")),
    ("q1", "p1", "q2", "p2"): (("q1", "q2"), ("p1", "p2")),
    ("p", "q"): (("q",), ("p",)),
    ("X", "Y", "P_X", "P_Y"): (("X", "Y"), ("P_X", "P_Y")),  # any case
    ("theta", "thetadot"): (("theta",), ("thetadot",)),
    ("q1", "q2", "p1", "p2", "energy", "Lz"): (("q1", "q2"), ("p1", "p2")),  # invariants out
    ("p1", "p2", "θ1", "θ2"): (("θ1", "θ2"), ("p1", "p2")),  # momenta by their look
    ("a", "b", "c", "d"): (("a", "b"), ("c", "d")),  # the names say nothing: file order
    ("q", "tau", "p", "E"): (("q", "tau"), ("p", "E")),  # extended phase space
}

#: `header → (message, (q, p) that name them explicitly)`.
REFUSED = {
    ("R", "vR", "vT", "z", "vz", "phi"): ("vT, phi pair with no other column",
                                          (("R", "z", "phi"), ("vR", "vz", "vT"))),
    ("x", "px", "vx"): ("momentum of 'x': px, vx", (("x",), ("vx",))),
    ("x", "X", "px", "PX"): ("'x' and 'X' differ only in case", (("x", "X"), ("px", "PX"))),
    ("p1", "a", "b", "c"): ("look like momenta but are not half", (("a", "b"), ("c", "p1"))),
}


def _csv(path, header, rows=4, n=2):
    """`n` trajectories, column `j` of row `k` of trajectory `i` = 100 i + 10 k + j."""
    lines = [",".join(["trajectory", "t", *header])]
    for i in range(n):
        lines += [",".join([f"r{i}", f"{0.5 * k}", *(f"{100 * i + 10 * k + j}"
                                                      for j in range(len(header)))])
                  for k in range(rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("header", sorted(BY_NAME))
def test_layout_by_name(header):
    q, p = BY_NAME[header]
    layout = column_layout(header, skip=())
    assert layout.columns == q + p and layout.n_q == len(q)
    assert [header[i] for i in layout.indices] == list(q + p)
    assert layout.reordered == (layout.columns != tuple(h for h in header
                                                         if h in layout.columns))


@pytest.mark.parametrize("header", sorted(REFUSED))
def test_ambiguous_names_are_refused(header):
    message, (q, p) = REFUSED[header]
    with pytest.raises(ValueError, match=message) as info:
        column_layout(header, skip=(), where="f.csv: ")
    assert str(info.value).startswith("f.csv: ") and "\n" not in str(info.value)
    # named explicitly, the same columns are read as named
    named = column_layout(header, q, p, skip=())
    assert named.columns == q + p and named.how == "named" and named.n_q == len(q)
    with pytest.raises(ValueError, match="'x' is given twice"):
        column_layout(("x", "y", "x", "py"), skip=())


def test_every_system_reads_back_as_written(tmp_path):
    """No built-in system's labels are reordered, left out or refused (negative control for
    the rule: it changes nothing that is already positions first)."""
    for name, cls in SYSTEMS.items():
        labels = tuple(cls().labels)
        layout = column_layout(labels, skip=())
        assert layout.columns == labels and not layout.reordered and not layout.left_out, name
    data = TrajectoryData.from_arrays([np.arange(12.0).reshape(3, 4)] * 2, 0.1,
                                      labels=SYSTEMS["parametric_pendulum"]().labels)
    for suffix in (".csv", ".npz"):
        data.write(tmp_path / f"pp{suffix}")
        with warnings.catch_warnings():
            warnings.simplefilter("error", ColumnWarning)
            back = TrajectoryData.read(tmp_path / f"pp{suffix}")
        assert back.labels == data.labels
        np.testing.assert_array_equal(back.trajectories[0], data.trajectories[0])


def test_interleaved_csv_is_read_positions_first(tmp_path):
    path = _csv(tmp_path / "i.csv", ("x", "vx", "y", "vy"))
    with pytest.warns(ColumnWarning, match=r"reordered by name: q = \(x, y\), p = \(vx, vy\)"):
        data = TrajectoryData.read(path)
    assert data.labels == ("x", "y", "vx", "vy")
    np.testing.assert_array_equal(data.trajectories[1][2], [120, 122, 121, 123])
    # negative control: named explicitly, the file's order is kept as named
    named = TrajectoryData.read(path, q_columns="x,vx", p_columns="y,vy")
    np.testing.assert_array_equal(named.trajectories[1][2], [120, 121, 122, 123])


def test_invariant_columns_are_left_out_unless_named(tmp_path):
    path = _csv(tmp_path / "e.csv", ("q1", "q2", "p1", "p2", "energy", "Lz"))
    with pytest.warns(ColumnWarning, match="energy, Lz look like invariants"):
        data = TrajectoryData.read(path)
    assert data.dim == 4 and data.labels == ("q1", "q2", "p1", "p2")
    named = TrajectoryData.read(path, q_columns=["q1", "q2", "energy"],
                                p_columns=["p1", "p2", "Lz"])
    assert named.labels == ("q1", "q2", "energy", "p1", "p2", "Lz")


def test_ambiguous_csv_is_refused_in_one_line(tmp_path):
    path = _csv(tmp_path / "galpy.csv", ("R", "vR", "vT", "z", "vz", "phi"))
    with pytest.raises(ValueError, match="cannot tell positions from momenta") as info:
        TrajectoryData.read(path)
    assert str(info.value).startswith(f"{path}: ") and "\n" not in str(info.value)
    data = TrajectoryData.read(path, q_columns="R,z,phi", p_columns="vR,vz,vT")
    assert data.labels == ("R", "z", "phi", "vR", "vz", "vT")


def test_npz_columns_are_read_by_name(tmp_path):
    arrays = [np.arange(16.0).reshape(4, 4), np.arange(16.0, 28.0).reshape(3, 4)]
    np.savez(tmp_path / "n.npz", traj_0=arrays[0], traj_1=arrays[1], dt=0.1,
             columns=np.array(["p1", "q1", "p2", "q2"]))
    with pytest.warns(ColumnWarning):
        data = TrajectoryData.read(tmp_path / "n.npz")
    assert data.labels == ("q1", "q2", "p1", "p2")
    np.testing.assert_array_equal(data.trajectories[1], arrays[1][:, [1, 3, 0, 2]])
    # an .npz without names keeps its columns (nothing to read by)
    np.savez(tmp_path / "u.npz", traj_0=arrays[0], traj_1=arrays[1], dt=0.1)
    np.testing.assert_array_equal(TrajectoryData.read(tmp_path / "u.npz").trajectories[0],
                                  arrays[0])


def test_npz_whose_dt_and_times_disagree_is_refused(tmp_path):
    arrays = [np.zeros((5, 2)), np.ones((4, 2))]
    times = {"t_0": 0.1 * np.arange(5), "t_1": 2.0 + 0.1 * np.arange(4)}
    trajs = {f"traj_{i}": a for i, a in enumerate(arrays)}
    np.savez(tmp_path / "bad.npz", **trajs, **times, dt=0.2)
    with pytest.raises(ValueError, match=r"'dt' is 0.2 but the times t_0, t_1, … have the "
                                         r"step 0.1") as info:
        TrajectoryData.read(tmp_path / "bad.npz")
    assert str(info.value).startswith(str(tmp_path / "bad.npz"))
    np.savez(tmp_path / "start.npz", **trajs, **times, dt=0.1, t0=np.array([0.0, 3.0]))
    with pytest.raises(ValueError, match="'t0' starts trajectory 1 at 3 but t_1 starts at 2"):
        TrajectoryData.read(tmp_path / "start.npz")
    # negative control: when they agree the file is read, starting where t_i start
    np.savez(tmp_path / "good.npz", **trajs, **times, dt=0.1)
    data = TrajectoryData.read(tmp_path / "good.npz")
    assert data.dt == 0.1 and list(data.t0) == [0.0, 2.0]
