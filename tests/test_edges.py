"""Nothing lost under concurrency, misuse, full disks and read-only places.

Each test reproduces one defect (it fails on the code before the fix): parallel runs
and writers (real processes), persistence of every dtype, checkpoint paths and locks,
command-line errors, the numerical edge cases of training, and writing where the disk
is full or the place is read-only.
"""

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn import cli
from geomlearn import io as gio
from geomlearn._files import write_json

from _tiny_models import TinyShear, TinyWindow

TESTS = pathlib.Path(__file__).parent
ROOT = TESTS.parent
ALL_DTYPES = [jnp.float16, jnp.bfloat16, jnp.float32, jnp.float64]


def python(code: str, *args, cwd=None, **kwargs) -> subprocess.Popen:
    """A fresh Python process running `code` (with the tests folder importable)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(ROOT)]),
               JAX_PLATFORMS="cpu")
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
                            cwd=cwd, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **kwargs)


def finish(proc, timeout=240):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def same_bits(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def pairs(key, n=32, dtype=jnp.float64):
    """One-step pairs of a slow rotation of the phase plane."""
    c, s = np.cos(0.2), np.sin(0.2)
    x = jax.random.normal(key, (n, 2), dtype)
    return x, x @ jnp.asarray(np.array([[c, s], [-s, c]]), dtype).T


# ----------------------------------------------------------- 1. parallel runs and writers


@pytest.mark.slow
def test_parallel_trains_get_one_folder_each(tmp_path):
    """Defect 1: three runs started together left two folders (named to the second)."""
    go = tmp_path / "go"
    code = """
        import pathlib, sys, time
        while not pathlib.Path(sys.argv[1]).exists():
            time.sleep(0.01)
        from geomlearn.cli import main
        sys.exit(main(["train", "--epochs", "2", "--trainer", "adam", "--seed", sys.argv[2]]))
    """
    procs = [python(code, go, seed, cwd=tmp_path) for seed in (1, 2, 3)]
    go.touch()
    results = [finish(p, timeout=600) for p in procs]
    # two epochs may leave a model not trained (exit 4): the run is written all the same
    assert all(rc in (0, 4) for rc, _, _ in results), [err[-500:] for _, _, err in results]
    folders = sorted((tmp_path / "runs").iterdir())
    assert len(folders) == 3, f"expected 3 run folders, got {[f.name for f in folders]}"
    seeds = sorted(json.loads((f / "run.json").read_text())["seed"] for f in folders)
    assert seeds == [1, 2, 3]  # each folder holds one run's own files


@pytest.mark.slow
def test_one_out_folder_is_claimed_by_one_run(tmp_path):
    """Defect 1: two runs given one `--out` both wrote into it (a mixed folder)."""
    out, go = tmp_path / "out", tmp_path / "go"
    code = """
        import pathlib, sys, time
        from geomlearn.cli import run_folder
        while not pathlib.Path(sys.argv[1]).exists():
            time.sleep(0.005)
        try:
            run_folder(sys.argv[2], prefix="x")
        except FileExistsError as e:
            print("refused:", e)
            sys.exit(3)
    """
    procs = [python(code, go, out) for _ in range(4)]
    time.sleep(1.0)
    go.touch()
    results = [finish(p) for p in procs]
    codes = sorted(rc for rc, _, _ in results)
    assert codes == [0, 3, 3, 3], f"expected one run to get the folder, got exit codes {results}"
    assert all("--out" in out_ for rc, out_, _ in results if rc == 3)


@pytest.mark.slow
def test_concurrent_json_writers_never_publish_an_invalid_file(tmp_path):
    """Defect 1: a fixed temporary name made two writers crash or publish truncated JSON."""
    target = tmp_path / "metrics.json"
    write_json(target, {"writer": -1})
    code = """
        import sys
        from geomlearn._files import write_json
        for i in range(150):
            write_json(sys.argv[1], {"writer": int(sys.argv[2]), "i": i, "pad": "x" * 20000})
    """
    procs = [python(code, target, w) for w in (0, 1)]
    bad, reads = [], 0
    while any(p.poll() is None for p in procs):
        try:
            json.loads(target.read_text())
        except ValueError as e:
            bad.append(str(e))
        reads += 1
    results = [finish(p) for p in procs]
    assert [rc for rc, _, _ in results] == [0, 0], [err[-400:] for _, _, err in results]
    assert not bad, f"{len(bad)} of {reads} reads saw invalid JSON: {bad[0]}"
    assert json.loads(target.read_text())["i"] == 149
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]  # no temporary left


_HOLD_A_FIT = """
    import pathlib, sys, time
    import jax
    import geomlearn as gl
    from _tiny_models import TinyShear
    ck = sys.argv[1]
    x = jax.random.normal(jax.random.PRNGKey(0), (16, 2))
    def wait(epoch, model, history):
        if epoch == 1:
            print("training", flush=True)
            while not pathlib.Path(ck + ".go").exists():
                time.sleep(0.02)
    gl.fit(TinyShear(2, key=jax.random.PRNGKey(1)), (x, 0.9 * x), epochs=3, key=jax.random.PRNGKey(2),
           progress=False, checkpoint=ck, checkpoint_every=1, callback=wait)
    print("done", flush=True)
"""


@pytest.mark.slow
def test_two_fits_on_one_checkpoint_do_not_alternate(key, tmp_path):
    """Defect 1: two fits checkpointing to one path silently overwrote each other."""
    ck = tmp_path / "ck"
    other = python(_HOLD_A_FIT, ck)
    try:
        assert other.stdout.readline().strip() == "training", other.stderr.read()[-800:]
        x, y = pairs(key(), 16)
        with pytest.raises(gio.CheckpointInUseError, match="another training run"):
            gl.fit(TinyShear(2, key=key()), (x, y), epochs=5, key=key(), progress=False,
                   checkpoint=ck)
        (tmp_path / "ck.go").touch()
        rc, out, err = finish(other)
    finally:
        other.kill()
    assert rc == 0 and "done" in out, err[-800:]
    assert gio._read_container(ck)[0]["epoch"] == 3  # the other run's own, complete checkpoint
    assert not (tmp_path / "ck.lock").exists()  # released (and removed) at the end
    with gio.checkpoint_lock(ck):  # a lock held in this process counts too
        with pytest.raises(gio.CheckpointInUseError):
            gl.fit(TinyShear(2, key=key()), (x, y), epochs=2, key=key(), progress=False,
                   checkpoint=ck)


def test_stale_temporary_checkpoint_files_are_removed(key, tmp_path):
    """Defect 10: a kill during a checkpoint write left a hidden temporary file forever."""
    ck = tmp_path / "ck"
    stale = tmp_path / ".ck.k1ll3d.tmp"
    stale.write_bytes(b"half a checkpoint")
    unrelated = tmp_path / ".model.geomlearn.abc.tmp"
    unrelated.write_bytes(b"someone else's")
    x, y = pairs(key(), 16)
    gl.fit(TinyShear(2, key=key()), (x, y), epochs=2, key=key(), progress=False, checkpoint=ck)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".model.geomlearn.abc.tmp", "ck"]


# ------------------------------------------------------------ 2, 8, 9. every dtype persists


def _models(dtype, k):
    return [gl.GSympNet(2, n_layers=2, width=3, key=k, dtype=dtype), TinyShear(2, key=k, dtype=dtype)]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype_round_trips_through_save_and_checkpoints(dtype, key, tmp_path):
    """Defect 2: bfloat16 models saved but never loaded (`dtype |V2 does not fit`), and a
    bfloat16 run could not resume."""
    for model in _models(dtype, key()):
        back = gl.load(gl.save(tmp_path / "m.geomlearn", model))
        assert all(map(same_bits, jax.tree.leaves(model), jax.tree.leaves(back))), model
    x, y = pairs(key(), 16, dtype)
    common = dict(key=key(), progress=False, checkpoint=tmp_path / "ck", batch_size=8)
    trained, history = gl.fit(model, (x, y), epochs=2, **common)  # the last model: TinyShear
    assert all(map(same_bits, jax.tree.leaves(trained), jax.tree.leaves(gl.load(tmp_path / "ck"))))
    _, resumed = gl.fit(model, (x, y), epochs=3, resume=True, **common)
    assert resumed["loss"][:2] == history["loss"] and len(resumed["loss"]) == 3
    assert np.isfinite(resumed["loss"]).all(), f"{np.dtype(dtype).name}: {resumed['loss']}"


def test_float16_fit_trains_with_the_default_optimiser(key):
    """Defect 8: Adam's eps = 1e-8 is 0 in float16, so the default optimiser diverged."""
    x, y = pairs(key(), 32, jnp.float16)
    trained, history = gl.fit(TinyShear(2, key=key(), dtype=jnp.float16), (x, y), epochs=60,
                              batch_size=8, key=key(), progress=False)
    assert np.isfinite(history["loss"]).all()
    assert history["loss"][-1] < 0.7 * history["loss"][0], history["loss"][::10]
    assert trained.K.dtype == jnp.float16


def test_files_follow_the_umask(key, tmp_path):
    """Defect 9: models and checkpoints were always 0600 while JSON beside them was 0644."""
    model = TinyShear(2, key=key())
    old = os.umask(0o022)
    try:
        for umask, mode in ((0o022, 0o644), (0o027, 0o640)):
            os.umask(umask)
            for path in (gl.save(tmp_path / f"m{umask}", model),
                         write_json(tmp_path / f"j{umask}", {})):
                assert path.stat().st_mode & 0o777 == mode, (path, oct(path.stat().st_mode))
    finally:
        os.umask(old)


# ------------------------------------------------------------------------ 3. checkpoint path


@pytest.mark.parametrize("where", ["missing folder", "a folder"])
def test_a_bad_checkpoint_path_fails_before_the_first_epoch(where, key, tmp_path):
    """Defect 3: a bad checkpoint path was noticed only after the whole training."""
    ck = tmp_path / "no" / "such" / "ck" if where == "missing folder" else tmp_path
    epochs = []
    x, y = pairs(key(), 16)
    with pytest.raises(ValueError, match="checkpoint"):
        gl.fit(TinyShear(2, key=key()), (x, y), epochs=3, key=key(), progress=False,
               checkpoint=ck, callback=lambda e, m, h: epochs.append(e))
    assert epochs == []


# --------------------------------------------------------------------- 4. the command line


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("edges") / "run"
    assert cli.main(["train", "--epochs", "2", "--trainer", "adam", "--out", str(out)]) in (0, 4)
    return out


def _error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("geomlearn: error: "), err[-800:]
    return lines[0]


@pytest.mark.parametrize("argv, message", [
    (["--epochs", "0"], "--epochs must be at least 1, got 0"),
    (["--batch-size", "-1"], "--batch-size must be at least 1, got -1"),
    (["--n-trajectories", "0"], "--n-trajectories must be at least 1, got 0"),
    (["--system", "rigid_body", "--model", "vp-transformer", "--seq-length", "1000"], "1000"),
])
def test_train_usage_errors_write_nothing(argv, message, tmp_path, capsys, monkeypatch):
    """Defect 4: tracebacks with exit 1, and half-written folders."""
    monkeypatch.chdir(tmp_path)
    assert cli.main(["train", *argv]) == 2
    assert message in _error_line(capsys)
    assert list(tmp_path.iterdir()) == []  # not even runs/


def test_out_that_cannot_hold_the_run_is_refused_before_training(run, tmp_path, capsys):
    """Defect 4: `--out` an existing file, a non-empty folder, or a folder with a folder in
    the place of model.geomlearn (found only when saving, after training)."""
    a_file = tmp_path / "f"
    a_file.write_text("mine")
    assert cli.main(["train", "--out", str(a_file)]) == 2
    assert "is not a folder" in _error_line(capsys) and a_file.read_text() == "mine"
    full = tmp_path / "full"
    (full / "model.geomlearn").mkdir(parents=True)
    assert cli.main(["train", "--out", str(full)]) == 2
    assert "not empty; pass --force" in _error_line(capsys)
    assert cli.main(["train", "--out", str(full), "--force"]) == 2
    assert "model.geomlearn is a folder" in _error_line(capsys)
    assert [p.name for p in full.iterdir()] == ["model.geomlearn"]


def _corrupt(run, tmp_path, name, content):
    folder = tmp_path / "copy"
    shutil.copytree(run, folder)
    target = folder / name
    if content is None:  # a folder in the file's place
        target.unlink()
        target.mkdir()
    else:
        target.write_text(content(target.read_text()) if callable(content) else content)
    return folder


@pytest.mark.parametrize("name, content, message", [
    ("run.json", "{not json", "cannot read"),
    ("run.json", "[1, 2]", "expected a JSON object, got a list"),
    ("run.json", lambda text: text.replace('"pendulum"', '"moon"'), "unknown system 'moon'"),
    ("history.json", "{not json", "cannot read"),
    ("history.json", "[1]", "expected a JSON object"),
    ("history.json", '{"epoch": [1, 2], "loss": [1.0], "val_loss": [null, null]}', "'loss'"),
    ("metrics.json", '"x"', "expected a JSON object"),
    ("model.geomlearn", None, "no model.geomlearn"),
])
def test_evaluate_of_a_damaged_run_is_one_line_and_writes_nothing(run, tmp_path, capsys, name,
                                                                   content, message):
    """Defect 4: a corrupt run.json/history.json, an unknown system, or model.geomlearn a
    folder gave a traceback (exit 1), sometimes after rewriting metrics.json."""
    folder = _corrupt(run, tmp_path, name, content)
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    assert cli.main(["evaluate", str(folder)]) == 2
    assert message in _error_line(capsys)
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before


@pytest.mark.parametrize("name, content, message", [
    ("run.json", "{not json", "cannot read"),
    ("run.json", "[1, 2]", "expected a JSON object, got a list"),
    ("model.geomlearn", None, "no model.geomlearn"),
])
def test_check_of_a_damaged_run_is_one_line(run, tmp_path, capsys, name, content, message):
    folder = _corrupt(run, tmp_path, name, content)
    assert cli.main(["check", str(folder)]) == 2
    assert message in _error_line(capsys)


def test_check_with_no_points_is_a_usage_error(run, capsys):
    assert cli.main(["check", str(run), "--points", "0"]) == 2
    assert "--points must be at least 1, got 0" in _error_line(capsys)


def test_evaluate_refuses_a_model_that_is_not_the_run(run, tmp_path, capsys, key):
    """Defect 7: a model of another class replaced in the folder was evaluated as the run."""
    folder = _corrupt(run, tmp_path, "metrics.json", (run / "metrics.json").read_text())
    gl.save(folder / "model.geomlearn", gl.HenonNet(2, n_layers=2, width=3, key=key()))
    before = (folder / "metrics.json").read_bytes()
    assert cli.main(["evaluate", str(folder)]) == 2
    assert "does not match run.json" in _error_line(capsys)
    assert (folder / "metrics.json").read_bytes() == before


@pytest.mark.slow
def test_evaluate_honours_an_x64_run(tmp_path):
    """Defect 6: `evaluate` of a `--x64` run told the user to call jax.config.update."""
    code = """
        import sys
        from geomlearn.cli import main
        out = sys.argv[1]
        assert main(["train", "--epochs", "2", "--trainer", "adam", "--x64", "--out", out]) in (0, 4)
        sys.exit(main(["evaluate", out]))
    """
    rc, _, err = finish(python(code, tmp_path / "r"))
    assert rc in (0, 4), err[-800:]  # 4: two epochs do not learn
    assert gio._read_container(tmp_path / "r" / "model.geomlearn")[0]["dtype"] == "float64"


@pytest.mark.slow
def test_ctrl_c_saves_the_model_and_exits_130(tmp_path):
    """Defect 4: Ctrl-C during `geomlearn train` exited 0 as a success; and Ctrl-C during
    the first compilation once crashed the process (SIGSEGV)."""
    out = tmp_path / "r"
    proc = python("""
        import sys
        from geomlearn.cli import main
        sys.exit(main(["train", "--epochs", "100000000", "--trainer", "adam", "--out", sys.argv[1]]))
    """, out)
    try:
        while "trainer:" not in proc.stderr.readline():  # the line printed before fit starts
            assert proc.poll() is None, proc.stderr.read()
        # fit takes Ctrl-C from here on; the first compilation takes seconds, so the
        # interrupt arrives during it (once a crash: the interrupt is deferred to the loop)
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        rc, _, err = finish(proc)
    finally:
        proc.kill()
    assert rc == 130, err[-800:]
    run = json.loads((out / "run.json").read_text())
    assert run["interrupted"] is True
    history = json.loads((out / "history.json").read_text())
    assert 0 < len(history["epoch"]) < 100000000
    assert isinstance(gl.load(out / "model.geomlearn"), gl.GSympNet)


# ------------------------------------------------------------------ 5, 10. training edges


def test_relative_loss_is_finite_when_a_batch_has_only_zero_targets(key):
    """Defect 5: a batch of all-zero targets (a system at rest) made the loss NaN."""
    x, y = pairs(key(), 16)
    y = y.at[1:].set(0.0)  # with batch_size=1, 15 of 16 batches have zero targets
    _, history = gl.fit(TinyShear(2, key=key()), (x, y), epochs=2, batch_size=1, key=key(),
                        progress=False)
    assert np.isfinite(history["loss"]).all(), history["loss"]
    with pytest.raises(ValueError, match='loss="mse"'):
        gl.fit(TinyShear(2, key=key()), (x, jnp.zeros_like(y)), epochs=2, key=key(),
               progress=False)


@pytest.mark.parametrize("where", ["val_data inputs", "val_data targets", "data inputs"])
def test_non_finite_data_is_named_before_training(where, key):
    """Defect 10: NaN in validation data gave a silent val_loss of NaN (and NaN in the
    training inputs was blamed on the learning rate)."""
    x, y = pairs(key(), 16)
    bad = x.at[3, 1].set(jnp.nan)
    data, val = (x, y), (x, y)
    if where == "val_data inputs":
        val = (bad, y)
    elif where == "val_data targets":
        val = (x, bad)
    else:
        data = (bad, y)
    with pytest.raises(ValueError, match=f"{where.split()[0]} .*non-finite") as info:
        gl.fit(TinyShear(2, key=key()), data, val_data=val, epochs=2, key=key(), progress=False)
    assert "learning rate" not in str(info.value)


def test_trajectory_data_accepts_bfloat16():
    """Defect 10: TrajectoryData called bfloat16 "not floating"."""
    states = jnp.linspace(0, 1, 12, dtype=jnp.float32).reshape(1, 6, 2).astype(jnp.bfloat16)
    data = gl.TrajectoryData(states, 0.1)
    x, y = data.pairs()
    assert x.dtype == jnp.bfloat16 and x.shape == (5, 2)
    with pytest.raises(TypeError, match="floating dtype, got int32"):
        gl.TrajectoryData(jnp.zeros((1, 3, 2), jnp.int32), 0.1)


def test_argument_errors_name_the_argument(key, tmp_path):
    """Defect 10: `resume="no"` resumed; `key=None` and an empty window were not named."""
    x, y = pairs(key(), 16)
    model = TinyShear(2, key=key())
    with pytest.raises(TypeError, match="resume"):
        gl.fit(model, (x, y), epochs=2, key=key(), progress=False, checkpoint=tmp_path / "c",
               resume="no")
    with pytest.raises(TypeError, match="key"):
        gl.fit(model, (x, y), epochs=2, key=None, progress=False)
    with pytest.raises(ValueError, match="window|empty|row"):
        gl.iterate(TinyWindow(2, key=key()), jnp.zeros((0, 2)), 5)


def test_resume_with_other_data_or_loss_is_refused(key, tmp_path):
    """Defect 10: resuming with different data or loss went unnoticed."""
    x, y = pairs(key(), 16)
    ck = tmp_path / "ck"
    common = dict(epochs=2, key=key(), progress=False, checkpoint=ck)
    gl.fit(TinyShear(2, key=key()), (x, y), **common)
    with pytest.raises(ValueError, match="data_fingerprint"):
        gl.fit(TinyShear(2, key=key()), (x, 1.01 * y), resume=True, **common)
    with pytest.raises(ValueError, match="loss"):
        gl.fit(TinyShear(2, key=key()), (x, y), loss="mse", resume=True, **common)


# ------------------------------------------------------ full disks, read-only places


def _no_temporaries(folder: pathlib.Path) -> bool:
    return not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("errno_", [13, 28, 30])  # EACCES, ENOSPC, EROFS
def test_save_where_nothing_can_be_written_is_a_clear_error_and_keeps_the_old_file(
        errno_, key, tmp_path, monkeypatch):
    path = tmp_path / "model.geomlearn"
    old = TinyShear(2, key=key())
    gl.save(path, old)
    before = path.read_bytes()

    def failing_fdopen(fd, *args, **kwargs):  # the temporary file cannot take the bytes
        f = open(fd, *args, **kwargs)

        def write(data):
            raise OSError(errno_, os.strerror(errno_))

        f.write = write
        return f

    monkeypatch.setattr(os, "fdopen", failing_fdopen)
    with pytest.raises(OSError, match=r"cannot write .*model.geomlearn.*unchanged") as e:
        gl.save(path, TinyShear(2, key=key()))
    assert e.value.errno == errno_
    assert path.read_bytes() == before and _no_temporaries(tmp_path)


def test_a_checkpoint_that_cannot_be_written_stops_fit_and_keeps_the_last_one(key, tmp_path,
                                                                            monkeypatch):
    x = jax.random.normal(key(), (16, 2))
    y = x[:, ::-1]
    ckpt = tmp_path / "run.ckpt"
    model, k = TinyShear(2, key=key()), key()
    writes = []
    real = gio._container.write_atomic

    def fills_up(path, content):  # the first checkpoint fits, the disk is full after it
        if writes:
            raise OSError(28, os.strerror(28))
        writes.append(path)
        return real(path, content)

    monkeypatch.setattr(gio._container, "write_atomic", fills_up)
    with pytest.raises(OSError, match=r"No space left.*after epoch 2, the checkpoint holds "
                                      r"epoch 1.*`model` attribute") as e:
        gl.fit(model, (x, y), epochs=6, checkpoint=ckpt, checkpoint_every=1, key=k, progress=False)
    assert e.value.errno == 28 and len(e.value.history["epoch"]) == 2
    assert isinstance(e.value.model, TinyShear)
    _, _, header = gl.load_checkpoint(ckpt, model)
    assert header["epoch"] == 1 and _no_temporaries(tmp_path)


@pytest.mark.slow
def test_a_full_disk_leaves_the_previous_checkpoint_and_no_partial_file(tmp_path):
    # a real file-size limit (RLIMIT_FSIZE) in a fresh process: writes beyond it fail
    # with EFBIG, as on a full disk
    proc = python("""
        import os, resource, signal, sys
        import jax, numpy as np
        import geomlearn as gl
        from _tiny_models import TinyShear
        folder = sys.argv[1]
        ckpt = os.path.join(folder, "run.ckpt")
        x = np.random.default_rng(0).standard_normal((16, 2)).astype(np.float32)
        small = TinyShear(2, width=2, key=jax.random.PRNGKey(0))
        gl.fit(small, (x, x[:, ::-1]), epochs=1, checkpoint=ckpt, key=jax.random.PRNGKey(1),
               progress=False)
        size = os.path.getsize(ckpt)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails instead of the process
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + 64, size + 64))
        big = TinyShear(2, width=1024, key=jax.random.PRNGKey(0))
        try:
            gl.save(ckpt, big)
        except OSError as e:
            print("SAVE", e.errno, e)
        try:
            gl.fit(big, (x, x[:, ::-1]), epochs=3, checkpoint=os.path.join(folder, "big.ckpt"),
                   key=jax.random.PRNGKey(1), progress=False)
        except OSError as e:
            print("FIT", e.errno, type(e.model).__name__)
        print("LEFT", sorted(os.listdir(folder)))
    """, tmp_path)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "SAVE 27 [Errno 27] cannot write" in out and "is unchanged" in out
    assert "FIT 27 TinyShear" in out
    assert "LEFT ['run.ckpt']" in out  # no temporary file, no partial big.ckpt, no lock
    like = TinyShear(2, width=2, key=jax.random.PRNGKey(0), dtype=jnp.float32)
    _, _, header = gl.load_checkpoint(tmp_path / "run.ckpt", like)
    assert header["epoch"] == 1
