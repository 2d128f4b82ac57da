"""Trajectories from ASE: `TrajectoryData.from_ase`, `.traj` files through
`TrajectoryData.read` and `geomlearn train --data run.traj`.

The data are a short velocity-Verlet run of a 7-atom argon-like Lennard-Jones cluster
made with ASE itself; every value is compared with what ASE returns for the same frames.
"""

import json
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn import cli
from geomlearn.cli._errors import CLIError
from geomlearn.cli._own_data import from_file, held_out_of_run, one_run_segments

EPSILON, SIGMA, MASS = 0.0104, 3.4, 39.948  # eV, Å, amu: argon
N_ATOMS, N_STEPS = 7, 40


def _cluster(ase):
    """A pentagonal bipyramid at the pair distance 2^(1/6) σ, random momenta (total ≠ 0)."""
    from ase.calculators.lj import LennardJones

    r = 2.0 ** (1.0 / 6.0) * SIGMA
    ring = r / (2.0 * np.sin(np.pi / 5))
    angles = 2.0 * np.pi * np.arange(5) / 5
    apex = np.sqrt(r**2 - ring**2)
    positions = np.concatenate([
        np.stack([ring * np.cos(angles), ring * np.sin(angles), np.zeros(5)], axis=1),
        [[0.0, 0.0, apex], [0.0, 0.0, -apex]]])
    atoms = ase.Atoms("Ar7", positions=positions)
    atoms.set_momenta(0.3 * np.random.default_rng(0).normal(size=(N_ATOMS, 3)))
    atoms.calc = LennardJones(sigma=SIGMA, epsilon=EPSILON, rc=100.0)
    return atoms


@pytest.fixture(scope="module")
def md_run(tmp_path_factory):
    """`(path, timestep)`: a `.traj` file of `N_STEPS` velocity-Verlet steps (every step a
    frame) written by the MD object (`trajectory=`), so its header holds the step."""
    ase = pytest.importorskip("ase")
    from ase.md.verlet import VelocityVerlet

    path = tmp_path_factory.mktemp("ase") / "run.traj"
    timestep = 5.0 * ase.units.fs
    with VelocityVerlet(_cluster(ase), timestep=timestep, trajectory=str(path),
                        loginterval=1) as md:
        md.run(N_STEPS)
    return path, timestep


@pytest.fixture
def frames(md_run):
    import ase.io

    return ase.io.read(md_run[0], index=":")


def _expected(frames):
    """The states of `frames`, taken from ASE: all positions, then all momenta."""
    return np.stack([np.concatenate([f.get_positions().reshape(-1), f.get_momenta().reshape(-1)])
                     for f in frames])


# ------------------------------------------------------------------------- values


def test_states_are_ase_positions_then_momenta(md_run, frames):
    path, timestep = md_run
    data = gl.TrajectoryData.from_ase(path)
    states = np.asarray(data.trajectories[0])
    assert states.shape == (N_STEPS + 1, 6 * N_ATOMS) and data.dtype == jnp.float64
    np.testing.assert_array_equal(states, _expected(frames))
    # negative control: each atom's position beside its momentum is another layout
    interleaved = np.stack([np.concatenate([f.get_positions(), f.get_momenta()], axis=1).reshape(-1)
                            for f in frames])
    assert not np.allclose(states, interleaved)
    assert data.dt == pytest.approx(timestep, rel=1e-12) and data.t0[0] == 0.0
    np.testing.assert_array_equal(data.masses, frames[0].get_masses())
    assert data.source == str(path)
    # the same from the frames in memory (they store no time: dt= gives it)
    listed = gl.TrajectoryData.from_ase(frames, dt=timestep)
    np.testing.assert_array_equal(np.asarray(listed.trajectories[0]), states)
    assert listed.source is None


def test_layout_is_the_lennard_jones_cluster_one(md_run, frames):
    """The state read from ASE is one of `LennardJonesCluster(7, 3)`: the same labels, and
    its potential and kinetic energies are ASE's for the same frame."""
    data = gl.TrajectoryData.from_ase(md_run[0])
    system = gl.systems.LennardJonesCluster(N_ATOMS, 3, epsilon=EPSILON, sigma=SIGMA, mass=MASS)
    assert data.labels == system.labels
    assert data.labels[:4] == ("x1", "y1", "z1", "x2") and data.labels[21] == "px1"
    z = data.trajectories[0][-1]
    q, p = z[: 3 * N_ATOMS], z[3 * N_ATOMS:]
    assert float(system.potential(q)) == pytest.approx(frames[-1].get_potential_energy(), rel=1e-7)
    assert float(system.kinetic(p)) == pytest.approx(frames[-1].get_kinetic_energy(), rel=1e-12)
    # negative control: the positions as (3, N) (x of every atom, then y, ...) are not it
    shuffled = q.reshape(N_ATOMS, 3).T.reshape(-1)
    assert float(system.potential(shuffled)) != pytest.approx(
        frames[-1].get_potential_energy(), rel=1e-3)


def test_stride_keeps_every_kth_frame_and_scales_the_step(md_run):
    full = gl.TrajectoryData.from_ase(md_run[0])
    every3 = gl.TrajectoryData.from_ase(md_run[0], stride=3)
    np.testing.assert_array_equal(np.asarray(every3.trajectories[0]),
                                  np.asarray(full.trajectories[0])[::3])
    assert every3.lengths == (len(range(0, N_STEPS + 1, 3)),)
    assert every3.dt == pytest.approx(3 * full.dt, rel=1e-12)
    for bad, error in ((0, ValueError), (-2, ValueError), (1.5, TypeError), (True, TypeError)):
        with pytest.raises(error, match="stride"):
            gl.TrajectoryData.from_ase(md_run[0], stride=bad)
    with pytest.raises(ValueError, match=f"{N_STEPS + 1} frame\\(s\\) with stride 50 keep 1"):
        gl.TrajectoryData.from_ase(md_run[0], stride=50)


def test_center_of_mass_removes_total_momentum_and_mass_weighted_position(md_run, frames):
    plain = np.asarray(gl.TrajectoryData.from_ase(md_run[0]).trajectories[0])
    data = gl.TrajectoryData.from_ase(md_run[0], center_of_mass=True)
    states = np.asarray(data.trajectories[0])
    x = states[:, : 3 * N_ATOMS].reshape(-1, N_ATOMS, 3)
    p = states[:, 3 * N_ATOMS:].reshape(-1, N_ATOMS, 3)
    m = frames[0].get_masses()[None, :, None]
    scale = np.abs(plain[:, 3 * N_ATOMS:]).max()
    assert np.abs(p.sum(axis=1)).max() < 1e-12 * scale
    assert np.abs((m * x).sum(axis=1)).max() < 1e-12 * np.abs(plain).max() * m.sum()
    # only the centre moved: relative positions and velocities are ASE's
    x0 = plain[:, : 3 * N_ATOMS].reshape(-1, N_ATOMS, 3)
    np.testing.assert_allclose(x - x[:, :1], x0 - x0[:, :1], atol=1e-12)
    # negative control: the run itself has a total momentum
    assert np.abs(plain[:, 3 * N_ATOMS:].reshape(-1, N_ATOMS, 3).sum(axis=1)).min() > 1e-3


# ------------------------------------------------------------------------- errors


def _one_line_error(error, match, call):
    with pytest.raises(error, match=match) as info:
        call()
    assert "\n" not in str(info.value)
    return str(info.value)


def test_a_frame_without_momenta_is_named(frames):
    import ase

    bare = ase.Atoms(frames[2].get_chemical_symbols(), positions=frames[2].get_positions())
    frames = frames[:2] + [bare] + frames[3:]
    _one_line_error(ValueError, "frame 2 has no momenta", lambda: gl.TrajectoryData.from_ase(
        frames, dt=0.1))
    # with stride 2 frame 2 is kept and refused; with stride 3 it is skipped
    _one_line_error(ValueError, "frame 2 has no momenta", lambda: gl.TrajectoryData.from_ase(
        frames, dt=0.1, stride=2))
    assert gl.TrajectoryData.from_ase(frames, dt=0.1, stride=3).lengths == (14,)


def test_frames_of_other_atoms_are_named(frames):
    fewer = frames[:3] + [frames[3][:6]] + frames[4:]
    _one_line_error(ValueError, "frame 3 has 6 atoms, frame 0 has 7",
                    lambda: gl.TrajectoryData.from_ase(fewer, dt=0.1))
    heavier = [f.copy() for f in frames]
    heavier[5].set_masses([2 * MASS] * N_ATOMS)
    _one_line_error(ValueError, "frame 5 has other masses",
                    lambda: gl.TrajectoryData.from_ase(heavier, dt=0.1))
    with pytest.raises(TypeError, match="one ase.Atoms"):
        gl.TrajectoryData.from_ase(frames[0], dt=0.1)
    with pytest.raises(TypeError, match="frame 1 is a str"):
        gl.TrajectoryData.from_ase([frames[0], "x"], dt=0.1)


def test_the_time_step_comes_from_the_frames_or_dt(frames, tmp_path):
    _one_line_error(ValueError, "store no time .* give dt=",
                    lambda: gl.TrajectoryData.from_ase(frames))
    timed = [f.copy() for f in frames]
    for k, f in enumerate(timed):
        f.info["time"] = 2.0 + 0.5 * k
    data = gl.TrajectoryData.from_ase(timed, stride=2)
    assert data.dt == pytest.approx(1.0) and data.t0[0] == pytest.approx(2.0)
    _one_line_error(ValueError, "dt=0.3 but the frames store the time step 0.5",
                    lambda: gl.TrajectoryData.from_ase(timed, dt=0.3))
    timed[4].info["time"] = 7.0
    _one_line_error(ValueError, "time step", lambda: gl.TrajectoryData.from_ase(timed))
    # a file ase.io.read reads (extended XYZ), with the times in atoms.info
    import ase.io

    for k, f in enumerate(timed):
        f.info["time"] = 0.25 * k
    ase.io.write(tmp_path / "run.extxyz", timed)
    read = gl.TrajectoryData.from_ase(tmp_path / "run.extxyz")
    assert read.dt == pytest.approx(0.25)
    np.testing.assert_allclose(np.asarray(read.trajectories[0]), _expected(frames), atol=1e-7)


def test_without_ase_one_line_names_the_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ase", None)
    monkeypatch.setitem(sys.modules, "ase.io", None)
    path = tmp_path / "run.traj"
    path.write_bytes(b"")
    for call in (lambda: gl.TrajectoryData.from_ase([], dt=0.1),
                 lambda: gl.TrajectoryData.read(path)):
        _one_line_error(ImportError, "pip install ase", call)


# ------------------------------------------------------------------------ .traj files


def test_a_traj_file_is_read_through_from_ase(md_run, tmp_path):
    path = md_run[0]
    read = gl.TrajectoryData.read(path)
    direct = gl.TrajectoryData.from_ase(path)
    np.testing.assert_array_equal(np.asarray(read.states), np.asarray(direct.states))
    assert (read.dt, read.labels, read.source) == (direct.dt, direct.labels, str(path))
    np.testing.assert_array_equal(read.masses, direct.masses)
    # masses go with the data through head; files of other formats have none
    np.testing.assert_array_equal(read.head(5).masses, direct.masses)
    read.write(tmp_path / "copy.npz")
    assert gl.TrajectoryData.read(tmp_path / "copy.npz").masses is None
    _one_line_error(ValueError, "q_columns and p_columns do not apply",
                    lambda: gl.TrajectoryData.read(path, q_columns=["x1"]))
    (tmp_path / "bad.traj").write_text("not a trajectory")
    message = _one_line_error(ValueError, "cannot read it as an ASE trajectory",
                              lambda: gl.TrajectoryData.read(tmp_path / "bad.traj"))
    assert message.startswith(f"{tmp_path / 'bad.traj'}: ")


def test_the_command_line_cuts_a_run_into_segments(md_run, tmp_path):
    """`--data run.traj`: the one run cut into consecutive segments, every one-step pair
    in one of them; `evaluate` cuts it the same way (`held_out_of_run`, slow tier)."""
    path = md_run[0]
    own = from_file(cli.TrainOptions(data=str(path), model="gsympnet"), cli.MODELS["gsympnet"])
    data, whole = own.train, np.asarray(gl.TrajectoryData.read(path).trajectories[0])
    assert data.n_trajectories == 5 and sum(data.lengths) - 5 == N_STEPS
    x, y = data.pairs()
    np.testing.assert_array_equal(np.asarray(x), whole[:-1])
    np.testing.assert_array_equal(np.asarray(y), whole[1:])
    assert one_run_segments(data, path, 0.5) is data  # several trajectories: kept
    assert one_run_segments(gl.TrajectoryData.read(path), path, 0.5).n_trajectories == 2
    with pytest.raises(CLIError, match="cannot be cut into 5 segments"):
        one_run_segments(gl.TrajectoryData.from_ase(path, stride=10), path, 0.2)
    # negative control: the same segments in an .npz file are not cut again
    data.write(tmp_path / "run.npz")
    npz = from_file(cli.TrainOptions(data=str(tmp_path / "run.npz"), model="gsympnet"),
                    cli.MODELS["gsympnet"])
    assert npz.train.lengths == data.lengths


def test_the_command_line_reads_a_traj_file_as_3d_particles(md_run, tmp_path):
    """`--data run.traj --model pair-sympnet` builds the model for 7 atoms in 3-D; the
    same states in an `.npz` file are not particles (without `--particles`)."""
    spec = cli.MODELS["pair-sympnet"]
    own = from_file(cli.TrainOptions(data=str(md_run[0]), model="pair-sympnet"), spec)
    assert own.shape.particle_dimension == 3 and own.shape.dim == 6 * N_ATOMS
    model, _ = spec.build_for(own.shape, key=jax.random.PRNGKey(0))
    assert (model.n_particles, model.spatial_dim) == (N_ATOMS, 3)
    own.train.write(tmp_path / "run.npz")
    npz = from_file(cli.TrainOptions(data=str(tmp_path / "run.npz"), model="pair-sympnet"), spec)
    assert npz.shape.particle_dimension == 0
    with pytest.raises(ValueError, match="the positions must be particles"):
        spec.build_for(npz.shape, key=jax.random.PRNGKey(0))


@pytest.mark.slow
def test_train_on_a_traj_file(md_run, tmp_path):
    """`geomlearn train --data run.traj --model pair-sympnet`, tiny, in a process: it
    finishes and writes a run folder whose state is the atoms' positions and momenta."""
    out = tmp_path / "argon"
    result = subprocess.run(
        [sys.executable, "-m", "geomlearn.cli", "train", "--data", str(md_run[0]), "--model",
         "pair-sympnet", "--epochs", "2", "--horizon", "0", "--out", str(out)],
        capture_output=True, text=True, timeout=600)
    assert result.returncode in (0, 4), result.stderr  # 4: ran, but did not learn
    for name in ("model.geomlearn", "run.json", "history.json", "metrics.json"):
        assert (out / name).is_file(), name
    recorded = json.loads((out / "run.json").read_text())
    assert recorded["labels"][:3] == ["x1", "y1", "z1"]
    assert "5 trajectories of dimension 42" in result.stderr
    # `geomlearn evaluate` cuts and splits the file again: a stretch of the run held out
    held_out = held_out_of_run(recorded, cli.TrainOptions.from_run(recorded))
    whole = np.asarray(gl.TrajectoryData.read(md_run[0]).trajectories[0])
    segment = np.asarray(held_out.trajectories[0])
    start = int(np.flatnonzero((whole == segment[0]).all(axis=1))[0])
    assert held_out.n_trajectories == 1 and 2 <= len(segment) < len(whole)
    np.testing.assert_array_equal(segment, whole[start:start + len(segment)].astype(segment.dtype))
    # the run records the particles of the .traj file, and predict starts from the file
    assert recorded["options"]["particles"] == 3
    rollout = tmp_path / "rollout.npz"
    result = subprocess.run(
        [sys.executable, "-m", "geomlearn.cli", "predict", str(out), "--from-data",
         str(md_run[0]), "--steps", "5", "--out", str(rollout)],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert gl.TrajectoryData.read(rollout).dim == 6 * N_ATOMS
