"""Irregularly sampled trajectories: `TrajectoryData.from_times`, `row_times`, samples with
their times, files with per-row times (`read(..., irregular=True)`) and the recipe
`geomlearn.datasets.irregular_trajectories`.

Most data here carry their own times in column 0 (the state `(t, 2t)`), so that every
sample can be checked against the times that come with it.
"""

import jax
import numpy as np
import pytest

import geomlearn as gl
from geomlearn.data import TrajectoryData
from geomlearn.systems import ParametricPendulum, Pendulum

HINT = "(pass irregular=True, or --irregular at the command line, to keep per-row times)"
TIMES = [np.array([0.0, 0.1, 0.35, 0.4, 0.9]), np.array([1.0, 1.5, 1.6, 2.2]),
         np.array([-1.0, -0.7, -0.6, -0.2, 0.3, 0.31])]


def clocked(times):
    """One trajectory per time array, whose state at time t is (t, 2t)."""
    return [np.stack([t, 2 * t], axis=1) for t in times]


def irregular(times=TIMES, **kwargs):
    return TrajectoryData.from_times(clocked(times), times, **kwargs)


def assert_clocked(data):
    """Column 0 of every state is its row's time (what `clocked` made)."""
    for states, t in zip(data.trajectories, data.row_times):
        np.testing.assert_array_equal(np.asarray(states)[:, 0], t)


# --- from_times, row_times --------------------------------------------------------------


def test_from_times_keeps_the_times_and_a_nominal_step():
    data = irregular()
    assert data.irregular is True
    assert data.ragged and data.lengths == (5, 4, 6)
    for got, want in zip(data.row_times, TIMES):
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, want)
    steps = np.concatenate([np.diff(t) for t in TIMES])
    assert data.dt == pytest.approx(steps.mean(), rel=1e-14)  # the mean of all steps
    np.testing.assert_array_equal(data.t0, [0.0, 1.0, -1.0])
    assert "irregular=True" in repr(data) and "dt≈" in repr(data)
    data.row_times[0][0] = 99.0  # a copy
    assert data.row_times[0][0] == 0.0


def test_equal_lengths_give_states_and_uniform_times_stay_irregular():
    times = [np.arange(4) * 0.5, 3.0 + np.arange(4) * 0.5]
    data = TrajectoryData.from_times(clocked(times), times, labels=["t", "u"], names=["a", "b"])
    assert data.states.shape == (2, 4, 2) and data.irregular
    assert data.labels == ("t", "u") and data.names == ("a", "b")
    assert data.dt == 0.5


def test_regular_data_are_not_irregular_and_their_row_times_are_the_grid():
    data = TrajectoryData.from_arrays([np.zeros((5, 2)), np.zeros((3, 2))], 0.25, t0=[1.0, -2.0])
    assert data.irregular is False
    assert "irregular" not in repr(data) and "dt=0.25" in repr(data)
    np.testing.assert_array_equal(data.row_times[0], 1.0 + 0.25 * np.arange(5))
    np.testing.assert_array_equal(data.row_times[1], -2.0 + 0.25 * np.arange(3))
    assert all(t.dtype == np.float64 for t in data.row_times)


@pytest.mark.parametrize("times, match", [
    ([np.arange(5.0), np.arange(4.0)], r"3 trajectories, got 2 time arrays"),
    ([np.arange(5.0), np.arange(3.0), np.arange(6.0)], r"trajectory 1 has 4 states but times "
                                                       r"of shape \(3,\)"),
    ([np.arange(5.0), np.arange(4.0), np.array([0, 1, 2, 2.5, 2.5, 3])],
     r"trajectory 2: times must increase strictly, but row 3 is at t = 2.5 and row 4 at "
     r"t = 2.5"),
    ([np.arange(5.0), np.array([0, 2, 1, 3.0]), np.arange(6.0)], r"trajectory 1: .*row 1 is "
                                                                 r"at t = 2 and row 2 at t = 1"),
    ([np.arange(5.0), np.array([0, np.nan, 1, 3.0]), np.arange(6.0)],
     r"trajectory 1: the time at row 1 is nan"),
])
def test_from_times_refuses_bad_times(times, match):
    with pytest.raises(ValueError, match=match):
        TrajectoryData.from_times(clocked(TIMES), times)
    TrajectoryData.from_times(clocked(TIMES), TIMES)  # control: the right times pass


def test_errors_name_named_trajectories():
    bad = [TIMES[0], TIMES[1][::-1], TIMES[2]]
    with pytest.raises(ValueError, match=r"trajectory 'b': times must increase strictly, but "
                                         r"row 0 is at t = 2.2000000000000002 and row 1"):
        TrajectoryData.from_times(clocked(TIMES), bad, names=["a", "b", "c"])


# --- samples with their times -------------------------------------------------------------


def test_windows_and_pairs_carry_their_times():
    data = irregular()
    inputs, targets = data.windows(2, 1)  # unchanged without times
    inputs2, targets2, t_in, t_out = data.windows(2, 1, times=True)
    np.testing.assert_array_equal(inputs, inputs2)
    assert t_in.shape == (9, 2) == inputs.shape[:2]  # (5 - 2) + (4 - 2) + (6 - 2) windows
    assert isinstance(t_in, np.ndarray) and t_in.dtype == np.float64
    np.testing.assert_array_equal(np.asarray(inputs)[..., 0], t_in)
    np.testing.assert_array_equal(np.asarray(targets)[..., 0], t_out)
    assert not np.allclose(np.diff(t_in, axis=1), data.dt)  # control: not a regular grid
    x, y = data.pairs()
    x2, y2, tx, ty = data.pairs(times=True)
    assert tx.shape == (12,) and ty.shape == (12,)
    np.testing.assert_array_equal(np.asarray(x)[:, 0], tx)
    np.testing.assert_array_equal(np.asarray(y)[:, 0], ty)
    np.testing.assert_array_equal(x, x2)


def test_window_stride_and_shift_keep_rows_and_times_aligned():
    data = irregular()
    inputs, targets, t_in, t_out = data.windows(2, 2, stride=2, times=True)
    assert inputs.shape == (1 + 1 + 2, 2, 2)
    np.testing.assert_array_equal(np.asarray(inputs)[..., 0], t_in)
    np.testing.assert_array_equal(np.asarray(targets)[..., 0], t_out)


def test_regular_samples_get_the_grid_times():
    t0 = np.array([0.5, 2.0])
    data = TrajectoryData.from_arrays(clocked([s + 0.1 * np.arange(6) for s in t0]), 0.1, t0=t0)
    assert not data.irregular
    inputs, targets, t_in, t_out = data.windows(2, times=True)
    np.testing.assert_allclose(np.asarray(inputs)[..., 0], t_in, rtol=0, atol=1e-15)
    np.testing.assert_allclose(np.asarray(targets)[..., 0], t_out, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(t_in[0], [0.5, 0.5 + 0.1])  # t0_i + k dt
    x, y, tx, ty = data.pairs(times=True)
    np.testing.assert_array_equal(tx[5:7], [2.0, 2.0 + 0.1])
    np.testing.assert_allclose(np.asarray(y)[:, 0], ty, rtol=0, atol=1e-15)


# --- selection keeps the times --------------------------------------------------------------


@pytest.mark.parametrize("lengths", [(5, 4, 6), (5, 5, 5)], ids=["ragged", "rectangular"])
def test_split_shard_head_keep_times(lengths):
    rng = np.random.default_rng(1)
    times = [np.cumsum(np.r_[i, rng.uniform(0.05, 0.2, n - 1)]) for i, n in enumerate(lengths)]
    data = irregular(times)
    first, second = data.split(0.5, key=jax.random.PRNGKey(3))
    parts = [first, second, data.shard(1, 2), data.shard(0, 2), data.head(3), data._select([2, 0])]
    for part in parts:
        assert part.irregular
        assert_clocked(part)
        steps = np.concatenate([np.diff(t) for t in part.row_times])
        assert part.dt == pytest.approx(steps.mean(), rel=1e-14)
    assert data.head(3).states.shape == (3, 3, 2)
    np.testing.assert_array_equal(data._select([2, 0]).t0, [2.0, 0.0])
    # control: the regular data of the same states do not have these times
    assert not np.array_equal(TrajectoryData.from_arrays(clocked(times), 0.1).row_times[0],
                              times[0])


# --- what irregular data cannot do ------------------------------------------------------------


def test_save_and_times_refuse_irregular_data(tmp_path):
    times = [np.array([0.0, 0.1, 0.3]), np.array([0.0, 0.2, 0.3])]
    data = TrajectoryData.from_times(clocked(times), times)
    with pytest.raises(ValueError, match=r"irregular .*use write\(path\)"):
        data.save(tmp_path / "x.npz")
    with pytest.raises(ValueError, match=r"irregular .*use row_times"):
        data.times
    regular = TrajectoryData(np.zeros((2, 3, 2)), 0.1)  # control
    regular.save(tmp_path / "y.npz")
    np.testing.assert_allclose(regular.times, [0.0, 0.1, 0.2])


# --- files ------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".csv", ".npz"])
def test_round_trip_of_irregular_files(tmp_path, suffix):
    rng = np.random.default_rng(0)
    times = [np.cumsum(rng.uniform(0.05, 0.15, n)) for n in (7, 4)]
    states = [rng.normal(size=(n, 3)) for n in (7, 4)]
    data = TrajectoryData.from_times(states, times, labels=["a", "b", "c"], names=["x", "y"])
    path = tmp_path / f"irregular{suffix}"
    data.write(path)
    with pytest.raises(ValueError) as refused:
        TrajectoryData.read(path)
    message = str(refused.value)
    assert message.startswith(str(path)) and message.endswith(HINT)
    assert "\n" not in message
    back = TrajectoryData.read(path, irregular=True)
    assert back.irregular and back.names == ("x", "y") and back.labels == ("a", "b", "c")
    for got, want in zip(back.row_times, times):
        np.testing.assert_array_equal(got, want)  # 17 significant digits: exact
    for got, want in zip(back.trajectories, states):
        np.testing.assert_array_equal(np.asarray(got), want)
    assert back.dt == data.dt


def test_uniform_file_reads_as_irregular_when_asked(tmp_path):
    data = TrajectoryData.from_arrays([np.ones((4, 2)), np.zeros((6, 2))], 0.5, t0=[0.0, 1.0])
    path = tmp_path / "uniform.csv"
    data.write(path)
    plain = TrajectoryData.read(path)
    assert not plain.irregular and plain.dt == 0.5  # control: unchanged without the flag
    kept = TrajectoryData.read(path, irregular=True)
    assert kept.irregular and kept.dt == 0.5
    for got, want in zip(kept.row_times, plain.row_times):
        np.testing.assert_array_equal(got, want)
    data.head(4).save(tmp_path / "states.npz")  # stores only a step: still regular
    assert not TrajectoryData.read(tmp_path / "states.npz", irregular=True).irregular
    with pytest.raises(TypeError, match="irregular must be True or False"):
        TrajectoryData.read(path, irregular="yes")


def test_irregular_file_with_times_out_of_order(tmp_path):
    path = tmp_path / "order.csv"
    path.write_text("trajectory,t,q,p\nA,0,1,2\nA,0.5,1,2\nA,0.25,1,2\nB,0,1,1\nB,1,1,1\n")
    with pytest.raises(ValueError, match=r"order.csv: trajectory 'A': times must increase "
                                         r"strictly, but row 1 is at t = 0.5 and row 2 at "
                                         r"t = 0.25"):
        TrajectoryData.read(path, irregular=True)


def test_ase_frames_keep_their_times_when_asked(tmp_path):
    ase = pytest.importorskip("ase")
    import ase.io

    frames = []
    for k, t in enumerate([0.0, 1.0, 1.5, 3.5]):
        atoms = ase.Atoms("Ar", positions=[[k, 0.0, 0.0]], momenta=[[1.0, 0.0, 0.0]])
        atoms.info["time"] = t
        frames.append(atoms)
    path = str(tmp_path / "run.traj")
    ase.io.write(path, frames)
    with pytest.raises(ValueError, match=r"run.traj: .*time step.*" + HINT.replace("(", r"\(")
                       .replace(")", r"\)")):
        TrajectoryData.read(path)
    data = TrajectoryData.read(path, irregular=True)
    assert data.irregular and data.masses is not None
    np.testing.assert_array_equal(data.row_times[0], [0.0, 1.0, 1.5, 3.5])


# --- the recipe ---------------------------------------------------------------------------------


def test_irregular_trajectories_of_the_parametric_pendulum_keep_the_clock():
    system = ParametricPendulum()
    z0 = np.array([[1.0, 0.0, 0.0, 0.0], [0.5, 0.0, 0.5, 0.0]])
    data = gl.datasets.irregular_trajectories(system, z0, 0.2, 30, jitter=0.5, seed=1)
    assert data.irregular and data.states.shape == (2, 31, 4) and data.labels == system.labels
    for states, t in zip(data.trajectories, data.row_times):
        np.testing.assert_allclose(np.asarray(states)[:, 1], t, rtol=0, atol=1e-10)
        steps = np.diff(t)
        assert t[0] == 0.0 and steps.min() >= 0.1 and steps.max() <= 0.3
        assert steps.max() - steps.min() > 0.05  # control: the steps do vary
    again = gl.datasets.irregular_trajectories(system, z0, 0.2, 30, seed=1)
    other = gl.datasets.irregular_trajectories(system, z0, 0.2, 30, seed=2)
    np.testing.assert_array_equal(again.row_times[0], data.row_times[0])
    assert not np.array_equal(other.row_times[0], data.row_times[0])


def test_irregular_trajectories_integrate_each_interval():
    system, z0 = Pendulum(), np.array([1.0, 0.0])
    data = gl.datasets.irregular_trajectories(system, z0, 0.1, 8, seed=0, substeps=4)
    states, t = np.asarray(data.trajectories[0]), data.row_times[0]
    for k in (0, 5):
        step = gl.integrators.integrate(system, states[k], t[k + 1] - t[k], 1,
                                        method="yoshida6", substeps=4)[-1]
        np.testing.assert_allclose(states[k + 1], step, rtol=1e-12, atol=1e-14)
    regular = gl.TrajectoryData.from_system(system, z0, 0.1, 8, method="yoshida6", substeps=4)
    flat = gl.datasets.irregular_trajectories(system, z0, 0.1, 8, jitter=0.0, substeps=4)
    np.testing.assert_allclose(flat.states, regular.states, rtol=1e-12, atol=1e-14)
    assert not np.allclose(data.states, regular.states)  # control: jitter moves the states


@pytest.mark.parametrize("jitter", [1.0, -0.1, 1.5, float("nan"), True])
def test_irregular_trajectories_refuse_a_bad_jitter(jitter):
    with pytest.raises(ValueError, match=r"jitter must be a number in \[0, 1\)"):
        gl.datasets.irregular_trajectories(Pendulum(), np.array([1.0, 0.0]), 0.1, 3,
                                           jitter=jitter)


def test_irregular_trajectories_is_exported():
    assert "irregular_trajectories" in gl.datasets.__all__
    assert gl.datasets.irregular_trajectories.__module__ == "geomlearn.datasets._irregular"
