import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn
from geomlearn.data import TrajectoryData
from geomlearn.integrators import integrate
from geomlearn.systems import Pendulum, RigidBody


def ramp(n_traj=3, n_rows=10, dim=2, dtype=np.float64):
    """states[i, t, k] = 1000 i + 10 t + k: every entry names its trajectory and step."""
    i, t, k = np.meshgrid(np.arange(n_traj), np.arange(n_rows), np.arange(dim), indexing="ij")
    return (1000.0 * i + 10.0 * t + k).astype(dtype)


def test_top_level_export():
    assert geomlearn.TrajectoryData is TrajectoryData
    assert "TrajectoryData" in geomlearn.__all__


def test_construction_and_attributes(dtype):
    data = TrajectoryData(ramp(dtype=dtype), 0.25)
    assert isinstance(data.states, jax.Array) and data.states.dtype == dtype
    assert data.states.shape == (3, 10, 2)
    assert (data.n_trajectories, data.n_steps, data.dim) == (3, 9, 2)
    assert data.dt == 0.25 and isinstance(data.dt, float)
    assert len(data) == 3
    np.testing.assert_allclose(data.times, 0.25 * np.arange(10))
    assert data.times.dtype == dtype
    assert "n_trajectories=3" in repr(data)
    with pytest.raises(AttributeError):
        data.dt = 0.5
    # dt may be a NumPy/JAX scalar
    assert TrajectoryData(ramp(), np.float32(0.5)).dt == 0.5
    assert TrajectoryData(ramp(), jnp.asarray(0.5)).dt == 0.5


def test_from_system_matches_integrate():
    system = Pendulum()
    z0 = system.default_initial_conditions()
    data = TrajectoryData.from_system(system, z0, 0.1, 12, method="stormer_verlet", substeps=2)
    expected = integrate(system, z0, 0.1, 12, method="stormer_verlet", substeps=2)
    np.testing.assert_array_equal(data.states, expected)
    assert data.dt == 0.1 and data.n_steps == 12
    single = TrajectoryData.from_system(system, z0[0], 0.1, 12, method="stormer_verlet", substeps=2)
    assert single.states.shape == (1, 13, 2)
    np.testing.assert_array_equal(single.states[0], expected[0])
    with pytest.raises(ValueError, match="n_steps"):
        TrajectoryData.from_system(system, z0, 0.1, 0)


@pytest.mark.parametrize(
    "bad, message",
    [
        (np.zeros((10, 2)), "rank 3"),
        (np.zeros((2, 3, 4, 5)), "rank 3"),
        (np.zeros((2, 1, 2)), "at least 2 states"),
        (np.zeros((0, 5, 2)), "at least one trajectory"),
    ],
)
def test_wrong_shapes(bad, message):
    with pytest.raises(ValueError, match=message):
        TrajectoryData(bad, 0.1)


def test_nonfinite_values_are_located():
    for value in (np.nan, np.inf, -np.inf):
        states = ramp()
        states[1, 3, 0] = value
        states[2, 1, 1] = value  # a later trajectory: the first one is reported
        with pytest.raises(ValueError, match=r"trajectory 1 at step 3 \(component 0\)"):
            TrajectoryData(states, 0.1)


def test_bad_dt_and_dtype():
    for dt in (0.0, -0.1, np.nan, np.inf):
        with pytest.raises(ValueError, match="dt"):
            TrajectoryData(ramp(), dt)
    for dt in ("0.1", None, True):
        with pytest.raises(TypeError, match="dt"):
            TrajectoryData(ramp(), dt)
    with pytest.raises(TypeError, match="floating"):
        TrajectoryData(ramp().astype(np.int32), 0.1)


def test_pairs():
    states = ramp()
    x, y = TrajectoryData(states, 0.1).pairs()
    assert x.shape == y.shape == (3 * 9, 2)
    np.testing.assert_array_equal(x, states[:, :-1].reshape(-1, 2))
    np.testing.assert_array_equal(y, states[:, 1:].reshape(-1, 2))
    # every pair is one step within one trajectory: same trajectory (thousands), step + 1
    np.testing.assert_array_equal(np.asarray(y) - np.asarray(x), 10.0)


@pytest.mark.parametrize("T, pw", [(1, None), (3, None), (4, 1), (4, 2), (5, 5)])
def test_windows_follow_the_shift_semantics(T, pw):
    states = ramp(n_traj=2, n_rows=12)
    inputs, targets = TrajectoryData(states, 0.1).windows(T, pw)
    shift = T if pw is None else pw
    per_trajectory = 12 - T - shift + 1
    assert inputs.shape == targets.shape == (2 * per_trajectory, T, 2)
    expected_in, expected_out = [], []
    for i in range(2):
        for t in range(per_trajectory):
            expected_in.append(states[i, t : t + T])
            expected_out.append(states[i, t + shift : t + shift + T])
    np.testing.assert_array_equal(inputs, np.stack(expected_in))
    np.testing.assert_array_equal(targets, np.stack(expected_out))
    # no window straddles two trajectories: one trajectory id per window
    ids = np.asarray(targets)[..., 0] // 1000
    assert np.all(ids == ids[:, :1])
    # consecutive rows are consecutive steps
    np.testing.assert_array_equal(np.diff(np.asarray(inputs)[..., 0], axis=1), 10.0)


def test_windows_stride_and_errors():
    data = TrajectoryData(ramp(n_traj=1, n_rows=11), 0.1)
    inputs, _ = data.windows(3, 1, stride=3)
    np.testing.assert_array_equal(np.asarray(inputs)[:, 0, 0], [0, 30, 60])  # starts 0, 3, 6
    data.windows(5, 5)  # exactly fits: 10 states needed, 11 available
    data.windows(6, 5)  # 11 states needed
    with pytest.raises(ValueError, match=r"need 12 consecutive states \(T \+ pw\), but each trajectory has 11"):
        data.windows(6, 6)
    with pytest.raises(ValueError, match="prediction_window must be <= seq_length"):
        data.windows(2, 3)
    with pytest.raises(ValueError, match="seq_length"):
        data.windows(0)
    with pytest.raises(ValueError, match="prediction_window"):
        data.windows(3, 0)
    with pytest.raises(ValueError, match="stride"):
        data.windows(3, stride=0)


def test_split_by_whole_trajectories(key):
    states = ramp(n_traj=10, n_rows=4)
    data = TrajectoryData(states, 0.1)
    train, val = data.split(0.7, key=key())
    assert train.n_trajectories == 7 and val.n_trajectories == 3
    assert train.dt == val.dt == 0.1 and train.n_steps == val.n_steps == 3
    ids_train = set(np.asarray(train.states)[:, 0, 0] // 1000)
    ids_val = set(np.asarray(val.states)[:, 0, 0] // 1000)
    assert ids_train.isdisjoint(ids_val) and ids_train | ids_val == set(range(10))
    for part in (train, val):  # whole trajectories, unchanged
        for traj in np.asarray(part.states):
            np.testing.assert_array_equal(traj, states[int(traj[0, 0] // 1000)])
    # reproducible, and the key matters
    k = key()
    a, _ = data.split(0.5, key=k)
    b, _ = data.split(0.5, key=k)
    np.testing.assert_array_equal(a.states, b.states)
    splits = {tuple(np.asarray(data.split(0.5, key=key())[0].states)[:, 0, 0]) for _ in range(5)}
    assert len(splits) > 1
    # key=None: ordered split
    first, second = data.split(0.3, key=None)
    np.testing.assert_array_equal(first.states, states[:3])
    np.testing.assert_array_equal(second.states, states[3:])
    # both parts are never empty
    tiny, rest = TrajectoryData(ramp(n_traj=2), 0.1).split(0.99, key=None)
    assert tiny.n_trajectories == 1 and rest.n_trajectories == 1


def test_split_errors(key):
    data = TrajectoryData(ramp(), 0.1)
    for fraction in (0.0, 1.0, -0.2, 1.5):
        with pytest.raises(ValueError, match="fraction"):
            data.split(fraction, key=key())
    with pytest.raises(ValueError, match="at least 2 trajectories"):
        TrajectoryData(ramp(n_traj=1), 0.1).split(0.5, key=key())
    with pytest.raises(TypeError):
        data.split(0.5)  # key is required (keyword-only)


def test_save_load_roundtrip(tmp_path, dtype):
    data = TrajectoryData.from_system(
        RigidBody(), RigidBody().default_initial_conditions(dtype=dtype), 0.2, 5
    )
    path = tmp_path / "rigid.npz"
    data.save(path)
    loaded = TrajectoryData.load(path)
    assert loaded.dt == data.dt and loaded.states.dtype == dtype
    np.testing.assert_array_equal(loaded.states, data.states)
    # a plain NumPy archive, readable without pickle
    with np.load(path, allow_pickle=False) as archive:
        assert set(archive.files) == {"states", "dt", "format_version"}


def test_load_rejects_bad_files(tmp_path):
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(ValueError, match="missing"):
        TrajectoryData.load(tmp_path / "other.npz")
    np.savez(tmp_path / "pickled.npz", states=np.array([object()], dtype=object), dt=0.1)
    with pytest.raises(ValueError, match="allow_pickle"):
        TrajectoryData.load(tmp_path / "pickled.npz")
    np.savez(tmp_path / "future.npz", states=ramp(), dt=0.1, format_version=99)
    with pytest.raises(ValueError, match="format version 99"):
        TrajectoryData.load(tmp_path / "future.npz")
    bad = ramp()
    bad[0, 2, 1] = np.nan
    np.savez(tmp_path / "nan.npz", states=bad, dt=0.1)
    with pytest.raises(ValueError, match="trajectory 0 at step 2"):
        TrajectoryData.load(tmp_path / "nan.npz")
