"""Per-process data: `TrajectoryData.shard` and `fit(..., per_process=True)`.

The fast tests check `shard` alone. The slow tests launch this file as a script (the
launcher of `test_distributed.py`: a timeout per run, so a deadlock fails): once as one
process holding all trajectories (the reference), once as two processes joined by
`jax.distributed` on localhost, each holding half of the trajectories. Each process runs
the same scenarios and writes what it got; the tests compare.

Tolerance of the comparisons with the one-process run: `rtol=1e-11, atol=1e-13` in
float64. The two runs compute the same sums in another order (per process, then one
all-reduce), a relative difference of order 1e-16 per operation, which the few epochs
of Adam (dividing by the root of its second moment) and of Levenberg–Marquardt (a
Cholesky solve of the damped normal equations) amplify: measured up to 3e-15 (Adam) and
2e-14 (LM) in the parameters. 1e-11 leaves a factor of 500 for other machines and BLAS
builds, while a different batch, sample order or loss scale (differences of order 1e-3
or more) fails.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np
import pytest

HERE = pathlib.Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent))
from test_distributed import _launch  # the launcher with its timeouts

RTOL, ATOL = 1e-11, 1e-13
N_TRAJ, N_STEPS = 4, 20  # 4 trajectories × 20 pairs: 40 pairs per process of two


# ------------------------------------------------------------------ fast: shard alone


def _data(n_traj: int, n_steps: int = 3):
    import geomlearn as gl

    rows = [np.full((n_steps + 1, 2), float(i)) for i in range(n_traj)]
    return gl.TrajectoryData.from_arrays(rows, dt=0.1, t0=np.arange(n_traj) * 1.0)


def test_shard_gives_contiguous_blocks_covering_every_trajectory_once():
    data = _data(7)
    parts = [data.shard(i, 3) for i in range(3)]
    # 7 = 2·3 + 1: the first part gets one more; blocks in order
    assert [p.n_trajectories for p in parts] == [3, 2, 2]
    firsts = [[float(t[0, 0]) for t in p.trajectories] for p in parts]
    assert firsts == [[0.0, 1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
    assert [list(p.t0) for p in parts] == [[0.0, 1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
    assert [p.names for p in parts] == [("0", "1", "2"), ("3", "4"), ("5", "6")]
    # negative control: the parts of another count differ
    assert [p.n_trajectories for p in (data.shard(0, 2), data.shard(1, 2))] == [4, 3]
    one = data.shard(0, 1)
    assert one.n_trajectories == 7 and np.array_equal(one.states, data.states)


def test_shard_refuses_impossible_requests():
    data = _data(2)
    with pytest.raises(ValueError, match="cannot shard 2 trajectories over 3"):
        data.shard(0, 3)
    with pytest.raises(ValueError, match="process_index must be in 0…1"):
        data.shard(2, 2)
    with pytest.raises(ValueError, match="process_count"):
        data.shard(0, 0)


# Four CPU devices in one process need XLA_FLAGS before JAX starts: the check runs as a
# child process. Its negative control replaces the all-reduce by the identity, as a
# version that forgot it would: each shard then keeps its own partial sums.
_FOUR_DEVICES = r"""
import json, sys
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
import geomlearn as gl
from geomlearn.second_order import _normal_equations

assert len(jax.devices()) == 4, jax.devices()
x = jnp.linspace(0.0, 1.0, 12)
y = 2.0 * jnp.exp(-1.5 * x)
params = {"a": jnp.array(1.0), "b": jnp.array(0.3)}

def residual(p, xi, yi):
    return p["a"] * jnp.exp(p["b"] * xi) - yi

mesh = Mesh(np.asarray(jax.devices()), ("batch",))
sharding = NamedSharding(mesh, PartitionSpec("batch"))
x_s, y_s = jax.device_put(x, sharding), jax.device_put(y, sharding)

def gap(**kw):
    plain = gl.second_order.normal_equations(residual, params, x, y, chunk_size=2)
    sharded = gl.second_order.normal_equations(residual, params, x_s, y_s, chunk_size=2,
                                               sharding=sharding)
    return max(float(np.max(np.abs(np.asarray(b) - np.asarray(a)) / (1e-300 + np.max(np.abs(np.asarray(a))))))
               for a, b in zip(plain, sharded))

out = {"gap": gap()}
lm = gl.LevenbergMarquardt(chunk_size=2, max_tries=1)
_, _, info = jax.jit(lambda p, s: lm.step(p, s, residual, x_s, y_s, sharding=sharding))(
    params, lm.init(params))
out["counts"] = np.asarray(info.shard_samples).tolist()
_normal_equations.jax.lax.psum = lambda v, axes: v  # negative control: no all-reduce
out["gap_without_all_reduce"] = gap()
print(json.dumps(out))
"""


@pytest.mark.slow
def test_normal_equations_on_four_devices_equal_the_unsharded_ones():
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    done = subprocess.run([sys.executable, "-c", _FOUR_DEVICES], env=env, text=True,
                          capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["gap"] < 1e-14  # the same sums in another order
    assert out["counts"] == [3, 3, 3, 3]  # every shard counted its own 3 samples once
    assert out["gap_without_all_reduce"] > 0.1  # negative control: one shard's part only


def test_sharding_that_does_not_split_the_sample_axis_is_refused():
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    import geomlearn as gl

    x = jnp.linspace(0.0, 1.0, 10)
    mesh = Mesh(np.asarray(jax.devices()[:1]), ("batch",))
    with pytest.raises(ValueError, match="splits the leading"):
        gl.second_order.normal_equations(lambda p, xi, yi: p["a"] * xi - yi, {"a": 1.0}, x, x,
                                         sharding=NamedSharding(mesh, PartitionSpec()))


def _summary(**changes):
    from geomlearn.training._processes import ShardSummary

    base = {"n": 40, "n_val": -1, "shapes": 7, "bad": (-1, 0), "bad_val": (-1, 0),
            "bad_target": False, "bad_val_target": False, "devices": 1,
            "fingerprint": bytes(range(8)), "val_fingerprint": bytes(8), "sq": 0.1 + 0.2,
            "val_sq": 0.0}
    return ShardSummary(**{**base, **changes})


def test_shard_summaries_travel_bit_for_bit_and_are_checked_alike():
    from geomlearn.training._processes import ShardSummary, _check_shards

    s = _summary(sq=np.nextafter(0.3, 1.0), bad=(3, 2))
    assert ShardSummary.unpack(s.pack()) == s  # float64 sums exactly, through int32
    _check_shards([_summary(), _summary()])  # equal parts: accepted
    with pytest.raises(ValueError, match=r"processes 0…1 hold \[40, 30\]"):
        _check_shards([_summary(), _summary(n=30)])
    with pytest.raises(ValueError, match=r"process\(es\) \[1\] of 2 \(process 1: sample 3 of "
                                         r"its 40 \(2 not finite\)"):
        _check_shards([_summary(), _summary(bad=(3, 2))])
    with pytest.raises(ValueError, match="non-finite target"):
        _check_shards([_summary(bad_target=True), _summary()])
    with pytest.raises(ValueError, match="same shape and dtype"):
        _check_shards([_summary(), _summary(shapes=8)])


# ------------------------------------------------------------- the worker (a script)


def _flat(model):
    import equinox as eqx
    import jax

    leaves = jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array))
    return np.concatenate([np.asarray(a).ravel() for a in leaves])


def _dataset(n_traj: int):
    import jax.numpy as jnp

    import geomlearn as gl

    system = gl.systems.Pendulum()
    angles = np.linspace(0.3, 1.5, n_traj)
    z0 = jnp.asarray(np.stack([angles, np.zeros(n_traj)], axis=1))
    return gl.TrajectoryData.from_system(system, z0, dt=0.1, n_steps=N_STEPS)


def _worker(port: int, pid: int, nproc: int, out: pathlib.Path) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_numpy_dtype_promotion", "strict")
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if nproc > 1:
        jax.distributed.initialize(coordinator_address=f"localhost:{port}",
                                   num_processes=nproc, process_id=pid,
                                   initialization_timeout=60)
    import optax

    import geomlearn as gl

    full, val_full = _dataset(N_TRAJ), _dataset(2)
    # this process's part: all of it on one process, half of the trajectories on two
    mine, val_mine = full.shard(pid, nproc), val_full.shard(pid, nproc)
    model = gl.GSympNet(2, n_layers=2, width=4, activation="sigmoid",
                        key=jax.random.PRNGKey(0))
    adam = optax.adam(1e-2)
    lm = gl.LevenbergMarquardt(chunk_size=16)  # several chunks per process
    res: dict = {"process_count": jax.process_count(), "samples": int(mine.pairs()[0].shape[0])}

    def record(name, fn):
        try:
            m, h = fn()
            res[name] = {"params": _flat(m).tolist(), "epochs": h["epoch"], "loss": h["loss"],
                         "val_loss": h["val_loss"]}
        except Exception as e:  # noqa: BLE001 — recorded for the test to judge
            res[name] = {"error": f"{type(e).__name__}: {e}"}
        res[name]["t"] = time.time()

    common = {"key": jax.random.PRNGKey(1), "progress": False, "per_process": True}
    record("adam", lambda: gl.fit(model, mine, epochs=6, batch_size=10, optimizer=adam,
                                  val_data=val_mine, **common))
    record("lm", lambda: gl.fit(model, mine, epochs=4, optimizer=lm, val_data=val_mine,
                                **common))
    ckpt = out.parent / "adam.ckpt"  # one checkpoint folder for all processes
    record("adam_first", lambda: gl.fit(model, mine, epochs=3, batch_size=10, optimizer=adam,
                                        val_data=val_mine, checkpoint=ckpt, **common))
    record("adam_resumed", lambda: gl.fit(model, mine, epochs=6, batch_size=10,
                                          optimizer=adam, val_data=val_mine, checkpoint=ckpt,
                                          resume=True, **common))
    _solver_scenarios(res, mine, model, lm)
    if nproc > 1:
        _refusals(record, model, mine, pid, common)
    (out / f"result_{pid}.json").write_text(json.dumps(res))


def _solver_scenarios(res, mine, model, lm):
    """One LM step and the normal equations on the samples sharded as `fit` shards them:
    the samples each process accumulated, and the sums."""
    import equinox as eqx
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    import geomlearn as gl

    x, y = (np.asarray(a) for a in mine.pairs())
    devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
    sharding = NamedSharding(Mesh(np.asarray(devices), ("batch",)), PartitionSpec("batch"))
    k = jax.process_count()
    X, Y = (jax.make_array_from_process_local_data(sharding, a, (a.shape[0] * k, 2))
            for a in (x, y))
    params, static = eqx.partition(model, eqx.is_inexact_array)
    params = jax.device_put(params, NamedSharding(sharding.mesh, PartitionSpec()))

    def residual(p, xi, yi):
        return eqx.combine(p, static)(xi) - yi

    step = jax.jit(lambda p, s, a, b: lm.step(p, s, residual, a, b, sharding=sharding))
    _, _, info = step(params, lm.init(params), X, Y)
    res["shard_samples_local"] = [int(v) for s in info.shard_samples.addressable_shards
                                  for v in np.asarray(s.data)]
    res["n_samples"] = int(info.n_samples.addressable_data(0))
    res["lm_loss"] = float(info.loss.addressable_data(0))
    normal = jax.jit(lambda p, a, b: gl.second_order.normal_equations(
        residual, p, a, b, chunk_size=16, sharding=sharding))
    A, g, _ = normal(params, X, Y)
    res["A"] = np.asarray(A.addressable_data(0)).tolist()
    res["g"] = np.asarray(g.addressable_data(0)).tolist()


def _refusals(record, model, mine, pid, common):
    """Two processes only: unequal parts, a NaN on one process, data rejected on one."""
    import jax.numpy as jnp

    uneven = _dataset(N_TRAJ + 1).shard(pid, 2)  # 3 and 2 trajectories
    record("unequal", lambda: gl_fit(model, uneven, epochs=2, **common))
    x, y = (np.asarray(a).copy() for a in mine.pairs())
    if pid == 1:
        x[7, 1] = np.nan  # process 1's own sample 7
    record("nan", lambda: gl_fit(model, (jnp.asarray(x), jnp.asarray(y)), epochs=2, **common))
    bad = (jnp.zeros((40, 3)), jnp.zeros((40, 3))) if pid == 1 else mine
    record("rejected", lambda: gl_fit(model, bad, epochs=2, **common))
    record("after", lambda: gl_fit(model, mine, epochs=2, **common))


def gl_fit(*args, **kwargs):
    import geomlearn as gl

    return gl.fit(*args, **kwargs)


# ------------------------------------------------------------------------- the tests


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("shards")
    (one,) = _launch(1, root / "one" / "out", script=HERE)
    return one, _launch(2, root / "two" / "out", script=HERE)


def _close(a, b, what):
    np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL, err_msg=what)


@pytest.mark.slow
def test_two_processes_with_half_the_trajectories_train_like_one_with_all(runs):
    one, two = runs
    assert one["process_count"] == 1 and [r["process_count"] for r in two] == [2, 2]
    assert one["samples"] == N_TRAJ * N_STEPS
    assert [r["samples"] for r in two] == [N_TRAJ * N_STEPS // 2] * 2
    for name in ("adam", "lm", "adam_resumed"):
        ref = one[name]
        assert "error" not in ref, ref
        for pid, r in enumerate(two):
            assert "error" not in r[name], f"process {pid}, {name}: {r[name]['error']}"
            assert r[name]["epochs"] == ref["epochs"]
            _close(r[name]["params"], ref["params"], f"{name}, process {pid}")
            _close(r[name]["loss"], ref["loss"], f"{name} loss, process {pid}")
            # the validation loss uses the global scale of the validation targets
            _close(r[name]["val_loss"], ref["val_loss"], f"{name} val_loss, process {pid}")
        np.testing.assert_array_equal(two[0][name]["params"], two[1][name]["params"])
    # LM moved the parameters (a test of equality, not of two runs that did nothing)
    assert one["lm"]["loss"][-1] < 0.9 * one["lm"]["loss"][0]
    # a per-process checkpoint resumes on the same parts: equal to the run without a stop
    for r in (one, *two):
        _close(r["adam_resumed"]["params"], r["adam"]["params"], "resume")
        assert r["adam_resumed"]["epochs"] == [1, 2, 3, 4, 5, 6]


@pytest.mark.slow
def test_each_process_accumulates_only_its_own_residuals(runs):
    one, two = runs
    M = N_TRAJ * N_STEPS
    assert one["shard_samples_local"] == [M] and one["n_samples"] == M
    for r in two:
        # the normal equations of a process saw its own samples, not all M
        assert r["shard_samples_local"] == [M // 2], r["shard_samples_local"]
        assert r["n_samples"] == M
        _close(r["lm_loss"], one["lm_loss"], "LM loss over all samples")
        # and the all-reduce added them up to the one-process normal equations
        _close(r["A"], one["A"], "JᵀJ")
        _close(r["g"], one["g"], "Jᵀr")


@pytest.mark.slow
def test_unequal_parts_are_refused_on_every_process_with_the_sizes(runs):
    _, two = runs
    errors = [r["unequal"].get("error", "") for r in two]
    for e in errors:
        assert e.startswith("ValueError"), e
        assert "same number of training samples" in e and "[60, 40]" in e, e
        assert "TrajectoryData.shard" in e
    assert errors[0] == errors[1]


@pytest.mark.slow
def test_a_nan_on_one_process_raises_the_same_error_on_every_process(runs):
    _, two = runs
    errors = [r["nan"].get("error", "") for r in two]
    assert errors[0] == errors[1], errors
    assert errors[0].startswith("ValueError"), errors[0]
    assert "non-finite input" in errors[0] and "process(es) [1] of 2" in errors[0]
    assert "process 1: sample 7 of its 40" in errors[0]
    # data rejected on one process before the exchange: the other raises, not waits
    assert "ValueError" in two[1]["rejected"].get("error", ""), two[1]["rejected"]
    assert "failed before training on process(es) [1]" in two[0]["rejected"].get("error", "")
    for r in two:
        assert "error" not in r["after"], r["after"]  # the processes are still in step


if __name__ == "__main__":
    _worker(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), pathlib.Path(sys.argv[4]))
