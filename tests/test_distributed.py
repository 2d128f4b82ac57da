"""`fit` across processes: two CPU processes on a localhost port (`jax.distributed`).

The test launches this file as a script: once as a single process (the one-device
reference) and once as two processes joined by `jax.distributed.initialize` on a free
localhost port, gloo collectives. Each process runs the same scenarios and writes what it
got to a file; the test compares. Every subprocess has a timeout, so a deadlock fails the
test instead of hanging it.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

HERE = pathlib.Path(__file__).resolve()
ROOT = HERE.parent.parent
TIMEOUT_S = 240


# ------------------------------------------------------------- the worker (a script)


def _flat(model):
    import equinox as eqx
    import jax

    leaves = jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array))
    return np.concatenate([np.asarray(a).ravel() for a in leaves])


def _worker(port: int, pid: int, nproc: int, out: pathlib.Path) -> None:
    import warnings

    import jax

    jax.config.update("jax_enable_x64", True)
    # cross-process CPU collectives: gloo (the default of the JAX this was tested with,
    # 0.10.2; set explicitly for other versions)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if nproc > 1:
        jax.distributed.initialize(coordinator_address=f"localhost:{port}",
                                   num_processes=nproc, process_id=pid,
                                   initialization_timeout=60)
    import equinox as eqx
    import jax.numpy as jnp
    import optax

    import geomlearn as gl

    res: dict = {"process_count": jax.process_count(), "devices": len(jax.devices())}
    train, _ = gl.datasets.pendulum_sympnets()
    x, y = (np.asarray(a) for a in train.pairs())
    # data and model committed to this process's device: accepted
    dev = jax.local_devices()[0]
    xc, yc = jax.device_put(jnp.asarray(x), dev), jax.device_put(jnp.asarray(y), dev)
    model0 = gl.GSympNet(2, n_layers=2, width=4, activation="sigmoid", key=jax.random.PRNGKey(0))
    p, s = eqx.partition(model0, eqx.is_inexact_array)
    model = eqx.combine(jax.device_put(p, dev), s)
    shared = out.parent  # one checkpoint directory for all processes
    adam = optax.adam(1e-2)  # one object: the runs below share fit's compiled code

    def record(name, fn):
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                m, h = fn()
            res[name] = {"params": _flat(m).tolist(), "epochs": h["epoch"], "loss": h["loss"],
                         "warnings": [str(w.message) for w in caught]}
        except Exception as e:  # noqa: BLE001 — recorded for the test to judge
            res[name] = {"error": f"{type(e).__name__}: {e}"}
        res[name]["t"] = time.time()

    ckpt = shared / "adam.ckpt"
    record("adam", lambda: gl.fit(model, (xc, yc), epochs=12, batch_size=20,
                                  optimizer=adam, loss="mse",
                                  key=jax.random.PRNGKey(1), progress=False,
                                  checkpoint=ckpt, checkpoint_every=5))
    record("adam_resume", lambda: gl.fit(model, (xc, yc), epochs=16, batch_size=20,
                                         optimizer=adam, loss="mse",
                                         key=jax.random.PRNGKey(1), progress=False,
                                         checkpoint=ckpt, resume=True))
    record("lm", lambda: gl.fit(model, (xc, yc), epochs=4, optimizer=gl.LevenbergMarquardt(),
                                key=jax.random.PRNGKey(1), progress=False))
    if nproc == 1:
        (out / f"result_{pid}.json").write_text(json.dumps(res))
        return
    # --- multi-process only: agreement, stopping together

    def stop_on_last(epoch, m, h):  # only one process asks to stop
        return pid == nproc - 1 and epoch == 3

    record("callback", lambda: gl.fit(model, (x, y), epochs=10, optimizer=adam,
                                      key=jax.random.PRNGKey(1), progress=False,
                                      callback=stop_on_last))
    if pid == nproc - 1:  # Ctrl-C reaching one process only, while it trains
        import signal
        import threading

        def interrupt_soon():
            # fit installs its own SIGINT handler while it trains across processes
            while signal.getsignal(signal.SIGINT) is signal.default_int_handler:
                time.sleep(0.01)
            time.sleep(1.0)
            os.kill(os.getpid(), signal.SIGINT)

        threading.Thread(target=interrupt_soon, daemon=True).start()
    record("sigint", lambda: gl.fit(model, (x, y), epochs=10**7, optimizer=adam,
                                    key=jax.random.PRNGKey(1), progress=False,
                                    checkpoint=shared / "sigint.ckpt", checkpoint_every=10**7))
    # written by process 0 before fit returned on any process
    res["sigint_checkpoint"] = _flat(gl.load(shared / "sigint.ckpt")).tolist()
    record("budget", lambda: gl.fit(model, (x, y), epochs=10**7, optimizer=adam,
                                    key=jax.random.PRNGKey(1), progress=False,
                                    time_budget=1.0))
    record("sigint_lm", lambda: gl.fit(model, (x, y), epochs=3,
                                       optimizer=gl.LevenbergMarquardt(),
                                       key=jax.random.PRNGKey(1), progress=False))
    record("key", lambda: gl.fit(model, (x, y), epochs=2, key=jax.random.PRNGKey(10 + pid),
                                 progress=False))
    record("epochs", lambda: gl.fit(model, (x, y), epochs=2 + pid, key=jax.random.PRNGKey(1),
                                    progress=False))
    # an argument rejected on one process only (its checkpoint folder does not exist)
    bad = shared / ("missing" if pid == 1 else "") / "rejected.ckpt"
    record("rejected", lambda: gl.fit(model, (x, y), epochs=2, key=jax.random.PRNGKey(1),
                                      progress=False, checkpoint=bad))
    record("after", lambda: gl.fit(model, (x, y), epochs=2, key=jax.random.PRNGKey(1),
                                   progress=False))
    (out / f"result_{pid}.json").write_text(json.dumps(res))


# ------------------------------------------------------------------------- the test


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _launch(nproc: int, out: pathlib.Path, script: pathlib.Path = HERE) -> list[dict]:
    """Run `script PORT PID NPROC OUT` as `nproc` processes (each writes
    `OUT/result_PID.json`); fail on a nonzero exit or after `TIMEOUT_S` (a deadlock)."""
    out.mkdir(parents=True)
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "OPENBLAS_NUM_THREADS": "1",
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("XLA_FLAGS", None)  # one CPU device per process
    port = _free_port()
    procs = [subprocess.Popen([sys.executable, str(script), str(port), str(i), str(nproc), str(out)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in range(nproc)]
    logs = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        for p in procs:
            logs.append(p.communicate(timeout=max(1.0, deadline - time.monotonic()))[0])
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        pytest.fail(f"{nproc} processes did not finish within {TIMEOUT_S} s (deadlock?)")
    for i, (p, log) in enumerate(zip(procs, logs)):
        assert p.returncode == 0, f"process {i} of {nproc} failed:\n{log[-4000:]}"
    return [json.loads((out / f"result_{i}.json").read_text()) for i in range(nproc)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("distributed")
    return _launch(1, root / "one" / "out"), _launch(2, root / "two" / "out")


@pytest.mark.slow
def test_two_processes_train_like_one_device(runs):
    (one,), two = runs
    assert one["process_count"] == 1
    assert [r["process_count"] for r in two] == [2, 2] and two[0]["devices"] == 2
    for name in ("adam", "adam_resume", "lm"):
        ref = one[name]
        assert "error" not in ref, ref
        for pid, r in enumerate(two):
            # committed data and model accepted; both processes return the same model
            assert "error" not in r[name], f"process {pid}, {name}: {r[name]['error']}"
            assert r[name]["epochs"] == ref["epochs"]
            np.testing.assert_allclose(r[name]["params"], ref["params"], rtol=1e-9, atol=1e-12,
                                       err_msg=f"{name}, process {pid}")
            np.testing.assert_allclose(r[name]["loss"], ref["loss"], rtol=1e-9)
        np.testing.assert_array_equal(two[0][name]["params"], two[1][name]["params"])
    assert one["adam_resume"]["epochs"] == list(range(1, 17))


@pytest.mark.slow
def test_two_processes_stop_together(runs):
    _, two = runs
    for name in ("callback", "budget", "sigint", "sigint_lm"):
        for pid, r in enumerate(two):
            assert "error" not in r[name], f"process {pid}, {name}: {r[name]['error']}"
        a, b = (r[name] for r in two)
        assert a["epochs"] == b["epochs"], name
        np.testing.assert_array_equal(a["params"], b["params"])
    assert two[0]["callback"]["epochs"] == [1, 2, 3]  # process 1's callback stopped both
    assert 1 < len(two[0]["budget"]["epochs"]) < 10**7
    assert len(two[0]["sigint"]["epochs"]) < 10**7
    for r in two:  # the interrupt was reported on every process, and checkpointed
        np.testing.assert_array_equal(r["sigint_checkpoint"], r["sigint"]["params"])
        assert any("interrupted" in w for w in r["sigint"]["warnings"]), r["sigint"]
    # the run after the interrupt trained normally (no stale flag, no leftover handler)
    assert two[0]["sigint_lm"]["epochs"] == [1, 2, 3]


@pytest.mark.slow
def test_two_processes_must_agree_on_the_arguments(runs):
    _, two = runs
    for pid, r in enumerate(two):
        assert "ValueError" in r["key"].get("error", ""), r["key"]
        assert "key" in r["key"]["error"] and "process" in r["key"]["error"]
        assert "ValueError" in r["epochs"].get("error", ""), r["epochs"]
        assert "epochs" in r["epochs"]["error"]
    # a process whose arguments are rejected makes the others raise, not wait
    assert "does not exist" in two[1]["rejected"].get("error", ""), two[1]["rejected"]
    assert "failed before training on process(es) [1]" in two[0]["rejected"].get("error", "")
    for r in two:
        assert "error" not in r["after"], r["after"]  # the processes are still in step


if __name__ == "__main__":
    _worker(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), pathlib.Path(sys.argv[4]))
