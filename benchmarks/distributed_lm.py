r"""Levenberg–Marquardt across processes: per-process memory and iteration time.

One problem, trained by `geomlearn.fit(..., optimizer=LevenbergMarquardt(...),
per_process=True)` in two configurations launched by this module:

- **1 process on 1 core** holding all $M$ samples (the reference);
- **2 processes on 2 cores** joined by `jax.distributed` on localhost (gloo collectives),
  each holding its $M/2$ samples.

Every process is pinned to its own core (`taskset -c`, and `os.sched_setaffinity`) and
runs with `XLA_FLAGS=--xla_cpu_multi_thread_eigen=false`, `OPENBLAS_NUM_THREADS=1`,
`OMP_NUM_THREADS=1` (one thread each). The problem: $x \sim \mathcal N(0, I)$ in
$\mathbb R^{d}$, $y = \Phi x$ with $\Phi = \exp(h\,J S)$ the flow of a random quadratic
Hamiltonian (as in `new_families`), a `GSympNet(d, n_layers, width)` ($P$ parameters,
$R = d$ residuals per sample), mean squared loss, float64.

Measured per process:

- **time per LM iteration**: the wall time of `fit(epochs=iterations)` divided by the
  iterations, after a compiling `fit(epochs=1)` of the same setup (`fit`'s compiled code
  is cached, so the timed call does not compile);
- **memory**: the bytes of this process's samples (`x`, `y`: the addressable shards of
  the arrays `fit` trains on) and the compiled LM iteration's memory analysis
  (`jax.jit(...).lower(...).compile().memory_analysis()`: arguments + temporaries of
  the program one device runs: the data shard, $J^\top J$, the chunk's Jacobians
  $c\,R\,P$, the trial steps), for the default `chunk_size` and for a chunk that holds
  all of a process's samples ($c = M_k$); and the process's peak resident set size
  (`ru_maxrss`, which includes the JAX runtime and so changes least).

Targets: 2 processes' per-process memory (data + accumulation, whole-process chunk)
≤ 0.6× one process's; 2 processes' LM iteration ≤ 0.7× one process's wall time.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from . import _common as C
from ._harness import Benchmark, Column, Option, Table

FULL = {"samples": 4096, "dim": 20, "layers": 4, "width": 8, "chunk": 1024, "iterations": 5}
QUICK = {"samples": 64, "dim": 4, "layers": 2, "width": 4, "chunk": 16, "iterations": 2}
TIMEOUT_S = 1800


# ------------------------------------------------------------ the worker (a process)


def _problem(settings):
    """`(x, y)` of all `samples`, the same on every process (NumPy, float64)."""
    import numpy as np
    import scipy.linalg

    d, M = settings["dim"], settings["samples"]
    rng = np.random.default_rng(0)
    A = rng.standard_normal((d, d))
    S = A @ A.T / d + np.eye(d)
    n = d // 2
    J = np.block([[np.zeros((n, n)), np.eye(n)], [-np.eye(n), np.zeros((n, n))]])
    Phi = scipy.linalg.expm(0.1 * J @ S)
    x = rng.standard_normal((M, d))
    return x, x @ Phi.T


def _memory(model, lm, X, Y, sharding) -> dict:
    """The compiled LM iteration's memory on one device, and the bytes of the samples."""
    import equinox as eqx
    import jax

    params, static = eqx.partition(model, eqx.is_inexact_array)
    if sharding is not None:
        replicated = jax.sharding.NamedSharding(sharding.mesh, jax.sharding.PartitionSpec())
        params = jax.device_put(params, replicated)

    def residual(p, xi, yi):
        return eqx.combine(p, static)(xi) - yi

    step = jax.jit(lambda p, s, a, b: lm.step(p, s, residual, a, b, sharding=sharding))
    analysis = step.lower(params, lm.init(params), X, Y).compile().memory_analysis()
    return {"arguments": int(analysis.argument_size_in_bytes),
            "temporaries": int(analysis.temp_size_in_bytes),
            "outputs": int(analysis.output_size_in_bytes)}


def _worker(port: int, pid: int, nproc: int, cpu: int, result: str, settings: dict) -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if nproc > 1:
        jax.distributed.initialize(coordinator_address=f"localhost:{port}",
                                   num_processes=nproc, process_id=pid,
                                   initialization_timeout=120)
    import resource

    import equinox as eqx
    import numpy as np
    from jax.experimental import multihost_utils

    import geomlearn as gl

    x, y = _problem(settings)
    per = settings["samples"] // nproc
    mine = (x[pid * per:(pid + 1) * per], y[pid * per:(pid + 1) * per])
    model = gl.GSympNet(settings["dim"], n_layers=settings["layers"], width=settings["width"],
                        key=jax.random.PRNGKey(0))
    lm = gl.LevenbergMarquardt(chunk_size=settings["chunk"], patience=None)
    common = {"optimizer": lm, "loss": "mse", "key": jax.random.PRNGKey(1),
              "progress": False, "per_process": True}
    gl.fit(model, mine, epochs=1, **common)  # compiles
    if nproc > 1:
        multihost_utils.sync_global_devices("distributed_lm: timed")
    t0 = time.perf_counter()
    _, history = gl.fit(model, mine, epochs=settings["iterations"], **common)
    seconds = (time.perf_counter() - t0) / settings["iterations"]
    devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
    mesh = jax.sharding.Mesh(np.asarray(devices), ("batch",))
    sharding = (jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch"))
                if nproc > 1 else None)
    if sharding is None:
        X, Y = jax.numpy.asarray(mine[0]), jax.numpy.asarray(mine[1])
    else:
        X, Y = (jax.make_array_from_process_local_data(sharding, a, (settings["samples"],
                                                                     a.shape[1]))
                for a in mine)
    data_bytes = sum(s.data.nbytes for a in (X, Y) for s in a.addressable_shards)
    whole = gl.LevenbergMarquardt(chunk_size=settings["samples"], patience=None)
    out = {
        "process": pid, "processes": nproc, "samples": per, "seconds_per_iteration": seconds,
        "final_loss": history["loss"][-1],
        "params": int(sum(a.size for a in jax.tree_util.tree_leaves(
            eqx.filter(model, eqx.is_inexact_array)))),
        "data_bytes": data_bytes,
        "memory_default_chunk": _memory(model, lm, X, Y, sharding),
        "memory_whole_chunk": _memory(model, whole, X, Y, sharding),
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    pathlib.Path(result).write_text(json.dumps(out))


# ------------------------------------------------------------------- the launcher


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _cores() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:
        return [0]


def _launch(nproc: int, settings: dict, ctx) -> list[dict]:
    """`nproc` worker processes, process `i` pinned to the `i`-th usable core."""
    cores = _cores()
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "OPENBLAS_NUM_THREADS": "1",
           "OMP_NUM_THREADS": "1", "XLA_FLAGS": C.PINNED_XLA_FLAGS,
           "PYTHONPATH": os.pathsep.join(p for p in (str(C.REPO_ROOT),
                                                     os.environ.get("PYTHONPATH", "")) if p)}
    port = _free_port()
    taskset = shutil.which("taskset")
    with tempfile.TemporaryDirectory(prefix="geomlearn-distributed-lm-") as tmp:
        procs, paths = [], []
        for i in range(nproc):
            cpu = cores[i % len(cores)]
            path = os.path.join(tmp, f"result_{i}.json")
            cmd = [sys.executable, "-m", "benchmarks.distributed_lm", str(port), str(i),
                   str(nproc), str(cpu), path, json.dumps(settings)]
            if taskset:
                cmd = [taskset, "-c", str(cpu), *cmd]
            procs.append(subprocess.Popen(cmd, env=env, cwd=str(C.REPO_ROOT),
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          text=True))
            paths.append(path)
        deadline = time.monotonic() + TIMEOUT_S
        logs = []
        try:
            for p in procs:
                logs.append(p.communicate(timeout=max(1.0, deadline - time.monotonic()))[0])
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise RuntimeError(f"{nproc} processes did not finish within {TIMEOUT_S} s")
        for i, (p, log) in enumerate(zip(procs, logs)):
            if p.returncode != 0:
                raise RuntimeError(f"process {i} of {nproc} failed:\n{log[-4000:]}")
        ctx.log(f"{nproc} process(es) done")
        return [json.loads(pathlib.Path(path).read_text()) for path in paths]


def _row(name: str, runs: list[dict]) -> dict:
    """The largest per-process figures of a configuration (its slowest process)."""
    def most(f):
        return max(f(r) for r in runs)

    def mem(key):
        return most(lambda r: r[key]["arguments"] + r[key]["temporaries"])

    return {"name": name, "params": runs[0]["params"], "samples": runs[0]["samples"],
            "seconds": most(lambda r: r["seconds_per_iteration"]),
            "data_mib": most(lambda r: r["data_bytes"]) / 2**20,
            "default_mib": mem("memory_default_chunk") / 2**20,
            "whole_mib": mem("memory_whole_chunk") / 2**20,
            "rss_mib": most(lambda r: r["peak_rss_bytes"]) / 2**20,
            "final_loss": runs[0]["final_loss"]}


def measure(settings, ctx) -> dict:
    one = _launch(1, settings, ctx)
    two = _launch(2, settings, ctx)
    rows = [_row("1 process, 1 core", one), _row("2 processes, 2 cores", two)]
    ref, new = rows
    ratios = {"time": new["seconds"] / ref["seconds"],
              "memory_whole_chunk": new["whole_mib"] / ref["whole_mib"],
              "memory_default_chunk": new["default_mib"] / ref["default_mib"],
              "data": new["data_mib"] / ref["data_mib"],
              "rss": new["rss_mib"] / ref["rss_mib"],
              "final_loss": abs(new["final_loss"] - ref["final_loss"]) / abs(ref["final_loss"])}
    ratio_row = {"name": "ratio 2 / 1", "params": None, "samples": new["samples"] / ref["samples"],
                 "seconds": ratios["time"], "data_mib": ratios["data"],
                 "default_mib": ratios["memory_default_chunk"],
                 "whole_mib": ratios["memory_whole_chunk"], "rss_mib": ratios["rss"],
                 "final_loss": None}
    return {"rows": [*rows, ratio_row], "ratios": ratios, "cores": len(_cores()),
            "processes": {"one": one, "two": two}}


def targets(settings, results):
    r = results["ratios"]
    return [
        C.target("per-process memory, 2 processes / 1 (data + LM accumulation, chunk = "
                 "a process's samples)", "<= 0.6", r["memory_whole_chunk"],
                 r["memory_whole_chunk"] <= 0.6, "x"),
        C.target("LM iteration wall time, 2 processes on 2 cores / 1 process on 1 core",
                 "<= 0.7", r["time"], r["time"] <= 0.7, "x"),
        C.target("final loss, 2 processes vs 1 (relative difference)", "<= 1e-9",
                 r["final_loss"], r["final_loss"] <= 1e-9),
    ]


def notes(settings, results):
    lines = [("every process pinned to its own core (taskset), XLA_FLAGS="
              f"{C.PINNED_XLA_FLAGS}, OPENBLAS_NUM_THREADS=1, OMP_NUM_THREADS=1; gloo "
              "collectives on localhost"),
             ("memory: compiled LM iteration (arguments + temporaries, one device) from "
              "memory_analysis(); 'data' = bytes of the process's x, y; with the default "
              "chunk the accumulation P² + c·R·P does not depend on the samples, so only "
              "the data term shrinks")]
    if results["cores"] < 2:
        lines.append(f"only {results['cores']} usable core(s): the two processes shared it")
    return lines


SPEC = Benchmark(
    name="distributed_lm",
    description="Levenberg-Marquardt with per-process shards: 2 processes on 2 cores vs 1 "
    "on 1 core (per-process memory of data and accumulation, iteration time)",
    full=FULL,
    quick=QUICK,
    measure=measure,
    tables=(Table(
        "LM across processes: {samples} samples, GSympNet({dim}, {layers} layers, width "
        "{width}), chunk_size {chunk}, {iterations} iterations; per process (the largest)",
        (Column("name", "configuration"), Column("params", "P"),
         Column("samples", "samples/process", ".4g"),
         Column("seconds", "s/iteration", ".4g"), Column("data_mib", "data MiB", ".4g"),
         Column("default_mib", "LM MiB (chunk {chunk})", ".4g"),
         Column("whole_mib", "LM MiB (chunk = samples)", ".4g"),
         Column("rss_mib", "peak RSS MiB", ".4g"), Column("final_loss", "final loss", ".6e")),
        rows="rows"),),
    targets=targets,
    notes=notes,
    options=(Option("--samples", int, "training samples in all"),
             Option("--iterations", int, "timed LM iterations")),
)
NAME, DESCRIPTION = SPEC.name, SPEC.description
add_arguments, run = SPEC.add_arguments, SPEC.run


if __name__ == "__main__":
    _worker(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
            sys.argv[5], json.loads(sys.argv[6]))
