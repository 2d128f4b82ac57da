"""Reading and writing trajectory files (`TrajectoryData.read` / `write`), ragged data."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn.data._checks as checks_module
from geomlearn.data import TrajectoryData


def ragged_arrays(dtype=np.float64):
    """Three trajectories of lengths 7, 4, 9; entry = 1000 i + 10 k + column."""
    out = []
    for i, n in enumerate((7, 4, 9)):
        k, c = np.meshgrid(np.arange(n), np.arange(4), indexing="ij")
        out.append((1000.0 * i + 10.0 * k + c).astype(dtype))
    return out


def write_csv(path, text):
    path.write_text(text)
    return path


def csv_text(rows, header="trajectory,t,q1,q2,p1,p2"):
    return header + "\n" + "\n".join(rows) + "\n"


# ------------------------------------------------------------------ ragged samples


def test_ragged_pairs_and_windows_never_cross():
    """A constant 0, B constant 1: a pair or window mixing them would contain both."""
    a, b = np.zeros((9, 2)), np.ones((5, 2))
    data = TrajectoryData.from_arrays([a, b], 0.1)
    assert data.ragged and data.lengths == (9, 5) and data.n_trajectories == 2
    assert data.dim == 2 and data.dt == 0.1
    x, y = data.pairs()
    assert x.shape == (8 + 4, 2)
    np.testing.assert_array_equal(x, y)  # within a constant trajectory
    np.testing.assert_array_equal(np.asarray(x)[:, 0], [0] * 8 + [1] * 4)
    for T, pw in ((1, 1), (2, 1), (2, 2), (3, 2)):
        inputs, targets = data.windows(T, pw)
        assert inputs.shape[0] == (9 - T - pw + 1) + (5 - T - pw + 1)
        both = np.concatenate([np.asarray(inputs), np.asarray(targets)], axis=1)
        assert np.all(both.min(axis=(1, 2)) == both.max(axis=(1, 2)))  # one trajectory each
    # negative control: windows cut from the concatenated rows would mix 0 and 1
    joined = np.concatenate([a, b])
    mixed = np.stack([joined[t : t + 4] for t in range(len(joined) - 3)])
    assert np.any(mixed.min(axis=(1, 2)) != mixed.max(axis=(1, 2)))


def test_ragged_windows_match_per_trajectory_windows():
    arrays = ragged_arrays()
    data = TrajectoryData.from_arrays(arrays, 0.5)
    inputs, targets = data.windows(2, 1, stride=2)
    expected_in, expected_out = [], []
    for a in arrays:
        w_in, w_out = TrajectoryData(a[None], 0.5).windows(2, 1, stride=2)
        expected_in.append(w_in)
        expected_out.append(w_out)
    np.testing.assert_array_equal(inputs, np.concatenate(expected_in))
    np.testing.assert_array_equal(targets, np.concatenate(expected_out))


def test_ragged_window_too_long_names_trajectory():
    data = TrajectoryData.from_arrays(ragged_arrays(), 0.1, names=["a", "b", "c"])
    with pytest.raises(ValueError, match=r"need 6 consecutive states \(T \+ pw\), but "
                       r"trajectory 'b' has 4") as info:
        data.windows(3, 3)
    assert "\n" not in str(info.value)


def test_ragged_states_refuses_and_helpers():
    data = TrajectoryData.from_arrays(ragged_arrays(), 0.1)
    for attribute in ("states", "n_steps", "times"):
        with pytest.raises(ValueError, match="use `trajectories`.*head"):
            getattr(data, attribute)
    assert [t.shape for t in data.trajectories] == [(7, 4), (4, 4), (9, 4)]
    head = data.head()
    assert not head.ragged and head.states.shape == (3, 4, 4)
    np.testing.assert_array_equal(head.states[2], ragged_arrays()[2][:4])
    with pytest.raises(ValueError, match="trajectory 1 has 4 states; head needs 5"):
        data.head(5)
    assert "lengths=4..9" in repr(data)


def test_ragged_split_by_trajectory(key):
    data = TrajectoryData.from_arrays(ragged_arrays(), 0.1, names=["a", "b", "c"],
                                      t0=[0.0, 5.0, 7.5])
    first, second = data.split(0.34, key=None)
    assert first.names == ("a",) and second.names == ("b", "c")
    assert second.lengths == (4, 9) and list(second.t0) == [5.0, 7.5]
    np.testing.assert_array_equal(second.trajectories[1], ragged_arrays()[2])
    train, val = data.split(0.67, key=key())
    assert sorted(train.names + val.names) == ["a", "b", "c"]
    for part in (train, val):
        for name, traj in zip(part.names, part.trajectories):
            np.testing.assert_array_equal(traj, ragged_arrays()["abc".index(name)])


def test_equal_lengths_from_arrays_are_rectangular():
    a = [np.full((5, 2), float(i)) for i in range(3)]
    data = TrajectoryData.from_arrays(a, 0.2)
    assert not data.ragged and data.states.shape == (3, 5, 2) and data.n_steps == 4


@pytest.mark.parametrize(
    "arrays, message",
    [
        ([], "no trajectories"),
        ([np.zeros((5, 2)), np.zeros((5, 3))], r"trajectory 1 has 3 columns; expected 2"),
        ([np.zeros((5, 2)), np.zeros(5)], r"trajectory 1 has shape \(5,\); expected \(T, d\)"),
        ([np.zeros((5, 2)), np.zeros((1, 2))], "trajectory 1 has 1 state.*at least 2"),
        ([np.zeros((5, 2)), np.array([[0.0, 1.0], [np.nan, 0.0]])],
         r"non-finite value \(nan\) in trajectory 1 at step 1 \(component 0\)"),
    ],
)
def test_from_arrays_errors(arrays, message):
    with pytest.raises(ValueError, match=message) as info:
        TrajectoryData.from_arrays(arrays, 0.1)
    assert "\n" not in str(info.value)


# ------------------------------------------------------------------------ round trips


@pytest.mark.parametrize("suffix", [".npz", ".csv"])
def test_write_read_round_trip_ragged(tmp_path, suffix, dtype):
    arrays = ragged_arrays(np.dtype(dtype))
    data = TrajectoryData.from_arrays(arrays, 0.25, t0=[0.0, 3.0, -1.5],
                                      labels=["x", "y", "px", "py"], names=["a", "b,c", "d"])
    path = tmp_path / f"out{suffix}"
    data.write(path)
    back = TrajectoryData.read(path)
    assert back.lengths == data.lengths and back.names == data.names
    assert back.labels == data.labels and back.dt == 0.25
    np.testing.assert_array_equal(back.t0, [0.0, 3.0, -1.5])
    for got, want in zip(back.trajectories, arrays):
        np.testing.assert_array_equal(np.asarray(got, np.float64), want)
    assert back.source == str(path)


@pytest.mark.parametrize("suffix", [".npz", ".csv"])
def test_write_read_round_trip_exact_floats(tmp_path, suffix, dtype, rng):
    states = rng.standard_normal((3, 6, 2)).astype(dtype)
    data = TrajectoryData(states, 0.1)
    data.write(tmp_path / f"r{suffix}")
    back = TrajectoryData.read(tmp_path / f"r{suffix}")
    # .npz keeps the dtype; text has none: CSV is read in JAX's default float (x64 here)
    assert back.states.dtype == (dtype if suffix == ".npz" else jnp.float64)
    assert back.dt == 0.1
    np.testing.assert_array_equal(np.asarray(back.states, dtype), states)


def test_csv_written_layout(tmp_path):
    data = TrajectoryData.from_arrays([np.array([[1.0, 2.0], [3.0, 4.0]])], 0.5, t0=[2.0])
    data.write(tmp_path / "a.csv")
    assert (tmp_path / "a.csv").read_text().splitlines() == [
        "trajectory,t,q1,p1", "0,2,1,2", "0,2.5,3,4"]


def test_save_format_is_read(tmp_path):
    states = np.arange(24.0).reshape(2, 6, 2)
    TrajectoryData(states, 0.1).save(tmp_path / "s.npz")
    back = TrajectoryData.read(tmp_path / "s.npz")
    np.testing.assert_array_equal(back.states, states)
    assert back.dt == 0.1 and list(back.t0) == [0.0, 0.0]


def test_ragged_npz_with_dt_and_with_times(tmp_path):
    arrays = ragged_arrays()
    np.savez(tmp_path / "dt.npz", **{f"traj_{i}": a for i, a in enumerate(arrays)}, dt=0.3)
    data = TrajectoryData.read(tmp_path / "dt.npz")
    assert data.lengths == (7, 4, 9) and data.dt == 0.3 and list(data.t0) == [0, 0, 0]
    times = {f"t_{i}": 10.0 * i + 0.3 * np.arange(len(a)) for i, a in enumerate(arrays)}
    np.savez(tmp_path / "t.npz", **{f"traj_{i}": a for i, a in enumerate(arrays)}, **times)
    data = TrajectoryData.read(tmp_path / "t.npz")
    assert data.dt == 0.3
    np.testing.assert_allclose(data.t0, [0.0, 10.0, 20.0])
    np.testing.assert_array_equal(data.trajectories[2], arrays[2])


def test_csv_columns_by_name_and_interleaved_rows(tmp_path):
    path = write_csv(tmp_path / "c.csv", csv_text(
        ["b,0.0,1,2,3,4", "a,1.0,5,6,7,8", "b,0.5,9,10,11,12", "a,1.5,13,14,15,16"],
        header="trajectory,t,x,y,px,py"))
    data = TrajectoryData.read(path, q_columns=["y"], p_columns="py")
    assert data.names == ("b", "a") and data.labels == ("y", "py") and data.dt == 0.5
    np.testing.assert_array_equal(data.trajectories[0], [[2, 4], [10, 12]])
    np.testing.assert_array_equal(data.t0, [0.0, 1.0])
    everything = TrajectoryData.read(path)
    assert everything.labels == ("x", "y", "px", "py")
    with pytest.raises(ValueError, match="missing column 'pz'"):
        TrajectoryData.read(path, q_columns="x", p_columns="pz")
    with pytest.raises(ValueError, match="both q_columns and p_columns"):
        TrajectoryData.read(path, q_columns="x")


def test_npz_columns_select_by_name(tmp_path):
    data = TrajectoryData.from_arrays(ragged_arrays(), 0.1, labels=["a", "b", "pa", "pb"])
    data.write(tmp_path / "n.npz")
    back = TrajectoryData.read(tmp_path / "n.npz", q_columns=["b"], p_columns=["pb"])
    assert back.labels == ("b", "pb")
    np.testing.assert_array_equal(back.trajectories[0], ragged_arrays()[0][:, [1, 3]])


# -------------------------------------------------------------------------- bad files


def _bad_npz(tmp_path, name, **arrays):
    np.savez(tmp_path / name, **arrays)
    return tmp_path / name


BAD_CSV = {
    "empty.csv": ("", "the file is empty; expected a header"),
    "header_only.csv": ("trajectory,t,q1,p1\n", "has a header but no rows"),
    "no_t.csv": ("trajectory,q1,p1\na,1,2\na,2,3\n", "missing column 't'"),
    "no_traj.csv": ("t,q1,p1\n0,1,2\n1,2,3\n", "missing column 'trajectory'"),
    "nan.csv": ("trajectory,t,q1,p1\na,0,1,2\nb,0,1,2\nb,1,nan,2\n",
                r"data row 3 \(trajectory 'b'\) has nan in column 'q1'; expected a finite"),
    "inf.csv": ("trajectory,t,q1,p1\na,0,1,2\na,1,1,inf\n",
                r"data row 2 \(trajectory 'a'\) has inf in column 'p1'"),
    "text.csv": ("trajectory,t,q1,p1\na,0,1,2\na,1,one,2\n", "cannot read the rows.*'one'"),
    "width.csv": ("trajectory,t,q1,p1\na,0,1,2\na,1,1\n", "cannot read the rows"),
    "step.csv": ("trajectory,t,q1,p1\na,0,1,2\na,1,1,2\na,2,1,2\nb,0,1,2\nb,1,1,2\nb,3,1,2\n",
                 r"trajectory 'b': the time step from t = 1 to 3 is 2, expected 1 \(time steps "
                 r"must be uniform"),
    "order.csv": ("trajectory,t,q1,p1\na,1,1,2\na,0,1,2\n", "times must increase"),
    "single.csv": ("trajectory,t,q1,p1\na,0,1,2\na,1,1,2\nb,0,1,2\n",
                   "trajectory 'b' has 1 row; expected at least 2 states"),
    "nostate.csv": ("trajectory,t\na,0\na,1\n", "has no state columns"),
}


@pytest.mark.parametrize("name", sorted(BAD_CSV))
def test_bad_csv_one_line_error(tmp_path, name):
    text, message = BAD_CSV[name]
    path = write_csv(tmp_path / name, text)
    with pytest.raises(ValueError, match=message) as info:
        TrajectoryData.read(path)
    assert "\n" not in str(info.value) and str(info.value).startswith(f"{path}: ")


def test_bad_npz_one_line_errors(tmp_path):
    a = np.zeros((5, 2))
    cases = [
        (_bad_npz(tmp_path, "none.npz"), "the file is empty"),
        (_bad_npz(tmp_path, "other.npz", x=a), r"expected 'states' and 'dt'.*found \['x'\]"),
        (_bad_npz(tmp_path, "gap.npz", traj_0=a, traj_2=a, dt=0.1), "traj_1 is missing"),
        (_bad_npz(tmp_path, "nodt.npz", traj_0=a, traj_1=a), "needs 'dt'.*t_0 is missing"),
        (_bad_npz(tmp_path, "rank.npz", traj_0=a, traj_1=np.zeros(5), dt=0.1),
         r"traj_1 has shape \(5,\); expected \(T, d\)"),
        (_bad_npz(tmp_path, "width.npz", traj_0=a, traj_1=np.zeros((5, 3)), dt=0.1),
         "trajectory 1 has 3 columns; expected 2"),
        (_bad_npz(tmp_path, "nan.npz", traj_0=a, traj_1=np.full((5, 2), np.inf), dt=0.1),
         r"non-finite value \(inf\) in trajectory 1 at step 0"),
        (_bad_npz(tmp_path, "step.npz", traj_0=a, traj_1=a, t_0=np.arange(5.0),
                  t_1=np.array([0, 1, 2, 3, 3.5])), "trajectory 1: the time step"),
        (_bad_npz(tmp_path, "tlen.npz", traj_0=a, t_0=np.arange(4.0)),
         r"t_0 has shape \(4,\); expected \(5,\)"),
        (_bad_npz(tmp_path, "future.npz", traj_0=a, dt=0.1, format_version=99),
         "format version 99"),
        (_bad_npz(tmp_path, "pickle.npz", states=np.array([object()]), dt=0.1),
         "cannot read it as a .npz archive"),
    ]
    (tmp_path / "text.npz").write_text("not an archive")
    cases.append((tmp_path / "text.npz", "cannot read it as a .npz archive"))
    cases.append((tmp_path / "absent.npz", r"cannot read it \(no such file\)"))
    cases.append((tmp_path / "data.txt", r"cannot read it"))
    (tmp_path / "data.json").write_text("{}")
    cases.append((tmp_path / "data.json", "unknown file type '.json'; expected .npz or .csv"))
    for path, message in cases:
        with pytest.raises(ValueError, match=message) as info:
            TrajectoryData.read(path)
        text = str(info.value)
        assert "\n" not in text and text.startswith(f"{path}: "), (path, text)


def test_time_step_tolerance_is_relative_1e6(tmp_path):
    t = 0.1 * np.arange(6)
    ok = t.copy()
    ok[3] += 0.5e-7 * 0.1  # steps off by 5e-8 relative: accepted
    bad = t.copy()
    bad[3] += 2e-6 * 0.1  # 2e-6 relative: refused
    a = np.zeros((6, 2))
    TrajectoryData.read(_bad_npz(tmp_path, "ok.npz", traj_0=a, t_0=ok))
    with pytest.raises(ValueError, match="uniform within the file to a relative 1e-06"):
        TrajectoryData.read(_bad_npz(tmp_path, "bad.npz", traj_0=a, t_0=bad))
    # and between trajectories: one trajectory with another step is named
    with pytest.raises(ValueError, match="trajectory 1: the time step"):
        TrajectoryData.read(_bad_npz(tmp_path, "two.npz", traj_0=a, traj_1=a, t_0=t,
                                     t_1=2 * t))


def test_write_refuses_unknown_suffix(tmp_path):
    with pytest.raises(ValueError, match="expected .npz or .csv"):
        TrajectoryData.from_arrays([np.zeros((3, 2))], 0.1).write(tmp_path / "x.txt")


# -------------------------------------------------------------------------- float64


def test_float64_without_x64_warns_once(monkeypatch):
    monkeypatch.setattr(checks_module, "_warned_float32", False)
    states = np.zeros((2, 3, 2))
    with jax.enable_x64(False):
        with pytest.warns(UserWarning, match=r'jax_enable_x64", True\).*--x64') as record:
            data = TrajectoryData(states, 0.1)
            TrajectoryData.from_arrays([states[0]], 0.1)  # the second time: silent
        assert data.dtype == jnp.float32
        assert sum(issubclass(w.category, UserWarning) for w in record) == 1
        monkeypatch.setattr(checks_module, "_warned_float32", False)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            TrajectoryData(states.astype(np.float32), 0.1)  # float32 in: nothing to say
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert TrajectoryData(states, 0.1).dtype == jnp.float64  # 64-bit mode keeps it


def test_errors_after_reading_name_the_file(tmp_path):
    path = write_csv(tmp_path / "short.csv", csv_text(
        ["long,0,1,2,3,4", "long,1,1,2,3,4", "long,2,1,2,3,4", "long,3,1,2,3,4",
         "tiny,0,1,2,3,4", "tiny,1,1,2,3,4"]))
    data = TrajectoryData.read(path)
    assert data.lengths == (4, 2) and data.source == str(path)
    with pytest.raises(ValueError, match=r"trajectory 'tiny' has 2; use shorter") as info:
        data.windows(2, 1)
    text = str(info.value)
    assert text.startswith(f"{path}: ") and "\n" not in text
    assert "need 3 consecutive states (T + pw)" in text


def test_system_labels_are_the_written_header(tmp_path):
    from geomlearn.systems import HenonHeiles

    system = HenonHeiles()
    data = TrajectoryData.from_system(system, system.default_initial_conditions(), 0.1, 2)
    assert data.labels == ("x", "y", "p_x", "p_y")
    data.write(tmp_path / "hh.csv")
    assert (tmp_path / "hh.csv").read_text().splitlines()[0] == "trajectory,t,x,y,p_x,p_y"
