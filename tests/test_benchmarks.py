"""The benchmarks (`benchmarks/`) run, in their quick smoke-test mode, inside the suite.

Quick mode uses tiny sizes, so its figures mean nothing; these tests check that every
benchmark runs end to end, prints its table, writes a JSON file equal to what it returns,
measures what it says it measures (one-core pinning, both training phases, shapes of the
rollouts, structure residuals that separate symplectic from non-symplectic networks),
and that the runner lists and rejects names. The full benchmarks and their recorded
results are in `benchmarks/RESULTS.md`.
"""

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # benchmarks/ is a folder of the repository, not installed
    sys.path.insert(0, str(ROOT))

import benchmarks  # noqa: E402
from benchmarks import _common as C  # noqa: E402


def _run_cli(*args, timeout=120):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=timeout,
    )


# ----------------------------------------------------------------------------- runner


def test_listing_names_every_benchmark_without_importing_jax():
    proc = _run_cli(
        "-c",
        "import sys; from benchmarks.__main__ import main; main([]); "
        "print('JAX-IMPORTED' if 'jax' in sys.modules else 'NO-JAX')",
    )
    assert proc.returncode == 0, proc.stderr
    for name in benchmarks.BENCHMARKS:
        assert name in proc.stdout
    assert "NO-JAX" in proc.stdout


def test_unknown_benchmark_is_rejected_with_the_valid_names():
    proc = _run_cli("-m", "benchmarks", "no_such_benchmark")
    assert proc.returncode == 2
    assert "no_such_benchmark" in proc.stderr
    for name in benchmarks.BENCHMARKS:
        assert name in proc.stderr
    with pytest.raises(ValueError, match="training_throughput"):
        benchmarks.load("no_such_benchmark")


def test_all_collects_every_benchmarks_options_without_conflict():
    proc = _run_cli("-m", "benchmarks", "all", "--help")
    assert proc.returncode == 0, proc.stderr
    for flag in ("--quick", "--out", "--repeats", "--model", "--budget-min", "--epochs"):
        assert flag in proc.stdout


def test_every_benchmark_module_has_the_runner_interface():
    for name in benchmarks.BENCHMARKS:
        module = benchmarks.load(name)
        assert callable(module.run)
        assert module.NAME == name
        assert name in benchmarks.DESCRIPTIONS


# ----------------------------------------------------------------------------- helpers


def test_summarize_takes_the_median():
    assert C.summarize([3.0, 1.0, 2.0])["median_s"] == 2.0
    assert C.summarize([4.0, 1.0, 2.0, 3.0])["median_s"] == 2.5
    s = C.summarize([5.0, 1.0, 9.0])
    assert (s["min_s"], s["max_s"], s["runs_s"]) == (1.0, 9.0, [5.0, 1.0, 9.0])


def test_command_line_and_tables():
    assert C.command_line("rigid_body", False, {"budget_min": 30.0, "dtype": None}) == (
        "python -m benchmarks rigid_body --budget-min 30.0"
    )
    assert C.command_line("rollout_speed", True, {"repeats": None}) == (
        "python -m benchmarks rollout_speed --quick"
    )
    cols = [("a", "A", ""), ("b", "B", ".2f"), ("c", "C", "bool")]
    text = C.format_table("T", cols, [{"a": "x", "b": 1.0, "c": True}, {"a": "y", "b": None, "c": False}])
    lines = text.splitlines()
    assert lines[0] == "T" and "1.00" in text and "NOT met" in text and lines[-1].split()[1] == "-"
    md = C.markdown_table(cols, [{"a": "x|y", "b": 2.0, "c": True}])
    assert md.splitlines()[2] == "| x\\|y | 2.00 | met |"  # a "|" in a cell is escaped


# ----------------------------------------------------------------------------- quick runs

# Each quick run is the command a user types, `python -m benchmarks NAME --quick --out DIR`,
# under the suite's JAX rules (strict dtype promotion, rank-promotion errors). The five
# runs are compile-bound and single-threaded, so they run two at a time (this machine
# class has 2 cores), longest first; each test then checks one run's output.
_DRIVER = (
    "import sys, jax; "
    "jax.config.update('jax_numpy_dtype_promotion', 'strict'); "
    "jax.config.update('jax_numpy_rank_promotion', 'raise'); "
    "from benchmarks.__main__ import main; "
    "sys.exit(main([sys.argv[1], '--quick', '--out', sys.argv[2]]))"
)
_ORDER = ["rigid_body", "coupled_oscillator_lst", "sympnets_pendulum", "training_throughput",
          "rollout_speed"]
_PARALLEL = 2


@pytest.fixture(scope="module")
def quick_runs(tmp_path_factory):
    assert sorted(_ORDER) == sorted(benchmarks.BENCHMARKS)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    pending, running, done = list(_ORDER), {}, {}
    deadline = time.monotonic() + 900
    try:
        while pending or running:
            while pending and len(running) < _PARALLEL:
                name = pending.pop(0)
                out = tmp_path_factory.mktemp(name)
                logs = (open(out / "stdout.txt", "w"), open(out / "stderr.txt", "w"))
                proc = subprocess.Popen(
                    [sys.executable, "-c", _DRIVER, name, str(out)], cwd=ROOT, env=env,
                    stdout=logs[0], stderr=logs[1],
                )
                running[name] = (proc, out, logs)
            for name, (proc, out, logs) in list(running.items()):
                if proc.poll() is None:
                    continue
                for f in logs:
                    f.close()
                done[name] = {
                    "returncode": proc.returncode,
                    "stdout": (out / "stdout.txt").read_text(),
                    "stderr": (out / "stderr.txt").read_text(),
                    "out": out,
                }
                del running[name]
            if time.monotonic() > deadline:
                raise TimeoutError(f"quick benchmarks still running: {sorted(running)}")
            time.sleep(0.1)
    finally:
        for proc, _, logs in running.values():
            proc.kill()
            for f in logs:
                f.close()
    return done


def _quick(quick_runs, name):
    run = quick_runs[name]
    assert run["returncode"] == 0, run["stderr"][-4000:]
    path = run["out"] / f"{name}.json"
    assert path.exists()
    payload = json.loads(path.read_text())
    assert payload["benchmark"] == name and payload["quick"] is True
    assert payload["command"] == f"python -m benchmarks {name} --quick"
    machine = payload["machine"]
    assert machine["cpu_model"] and machine["jax"] and machine["logical_cores"] >= 1
    assert machine["x64"] is True
    for t in payload["targets"]:  # a quick run measures nothing: no target is marked
        assert t["met"] is None and "quick" in t["note"]
    # the run printed its tables (the same as the JSON file's) and where it wrote them
    assert C.render_text(payload) in run["stdout"] and f"wrote {path}" in run["stdout"]
    assert payload["tables"] and all(t["rows"] for t in payload["tables"])
    md = C.render_markdown(payload)
    for t in payload["tables"]:
        assert f"### {t['title']}" in md
    return payload, run["out"]


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def test_training_throughput_quick(quick_runs):
    payload, _ = _quick(quick_runs, "training_throughput")
    # measured in a process restricted to one core, with Eigen's thread pool off
    assert payload["machine"]["cores_available"] == 1
    assert "--xla_cpu_multi_thread_eigen=false" in payload["machine"]["XLA_FLAGS"]
    res = payload["results"]
    assert res["pendulum"] and res["vpt"]
    for row in res["pendulum"] + res["vpt"]:
        assert row["scan"]["iterations_per_s"] > 0 and row["python_loop"]["iterations_per_s"] > 0
        assert row["fit"]["epochs_per_s"] > 0 and _finite(row["fit"]["final_loss"])
        assert row["scan"]["compile"]["compile_s"] > 0
        assert len(row["scan"]["time"]["runs_s"]) == payload["settings"]["repeats"]
    for row in res["vpt"]:
        assert row["scan"]["windows_per_s"] == pytest.approx(
            row["scan"]["iterations_per_s"] * row["batch"]
        )


def test_rollout_speed_quick(quick_runs):
    payload, _ = _quick(quick_runs, "rollout_speed")
    assert payload["machine"]["cores_available"] == 1
    s = payload["settings"]
    for row in payload["results"]["rows"]:
        single, batched = row["single"], row["batched"]
        # the transformer returns n_states states, implicit midpoint n_steps + 1
        assert single["transformer"]["shape"] == [s["n_states"], 3]
        assert single["implicit_midpoint"]["shape"] == [s["n_states"] + 1, 3]
        assert batched["transformer"]["shape"] == [s["batch"], 3 + 3 * s["batch_steps"], 3]
        assert batched["implicit_midpoint"]["shape"] == [s["batch"], s["batch_steps"] + 1, 3]
        assert single["implicit_midpoint"]["finite"] and batched["implicit_midpoint"]["finite"]
        for part in (single, batched):
            for what in part.values():
                assert what["median_s"] > 0 and what["compile_s"] >= 0


def test_rigid_body_quick(quick_runs):
    import jax
    import numpy as np

    import geomlearn as gl

    payload, out = _quick(quick_runs, "rigid_body")
    nets = payload["results"]["networks"]
    assert list(nets) == list(benchmarks.load("rigid_body").QUICK_NETWORKS)
    for name, net in nets.items():
        rec = net["training"]
        curve = rec["curve"]
        times = [c[0] for c in curve]
        assert times == sorted(times)
        # Levenberg-Marquardt, or Adam then L-BFGS; the best is the best of the curve
        phases = ["adam", "lbfgs"] if name == "VPT-adam" else ["lm"]
        assert list(rec["phases"]) == phases
        assert all(rec["phases"][p]["steps"] > 0 for p in phases)
        assert {c[1] for c in curve} == set(phases)
        finite = [c[3] for c in curve if _finite(c[3])]
        assert rec["best_loss"] == min(finite)
        assert len(net["validation"]) == 2
        # the saved network loads back to the same parameters
        model = gl.load(out / net["saved_model"])
        assert type(model).__name__ == net["model"]
        n = sum(a.size for a in jax.tree_util.tree_leaves(model) if hasattr(a, "size"))
        assert n == net["n_params"]
        assert np.isfinite(np.concatenate([np.ravel(a) for a in jax.tree_util.tree_leaves(model)])).all()


def test_coupled_oscillator_lst_quick(quick_runs):
    payload, _ = _quick(quick_runs, "coupled_oscillator_lst")
    rows = {r["name"]: r for r in payload["tables"][0]["rows"]}
    assert set(rows) == {"LST", "SymT", "ST", "GSympNet"}
    # the benchmark reports the structure it measures: symplectic networks to round-off,
    # the standard transformer far from it
    for name in ("LST", "SymT", "GSympNet"):
        assert rows[name]["symplecticity"] <= 1e-12
    assert rows["ST"]["symplecticity"] > 1e-3
    for r in rows.values():
        assert _finite(r["loss"]) and r["train_s"] > 0


def test_sympnets_pendulum_quick(quick_runs):
    payload, _ = _quick(quick_runs, "sympnets_pendulum")
    rows = {r["name"]: r for r in payload["tables"][0]["rows"]}
    assert set(rows) == {"G-SympNet", "LA-SympNet", "HenonNet", "HNN", "ResNet"}
    for r in rows.values():
        assert _finite(r["mse_train"]) and _finite(r["mse_test"]) and r["mse_train"] > 0
        assert r["train_s"] > 0
    for name in ("G-SympNet", "LA-SympNet", "HenonNet"):
        assert rows[name]["structure"] == "symplectic"
    assert rows["ResNet"]["structure"] == "none"


def test_report_renders_recorded_results(tmp_path):
    from benchmarks import _report

    cols = [("x", "x", ".1f")]
    payload = C.make_payload(
        "rollout_speed", quick=False, options={"repeats": 3}, settings={}, results={},
        tables=[C.table("A table", cols, [{"x": 1.0}])],
        targets=[C.target("speed", "≤ 1 s", 2.0, False, "s", note="slow")],
        started=time.perf_counter(),
    )
    C.write_payload(tmp_path, "rollout_speed", payload)
    md = _report.render(tmp_path)
    assert "## Machine" in md and payload["machine"]["cpu_model"] in md
    assert "## rollout_speed" in md and "`python -m benchmarks rollout_speed --repeats 3`" in md
    assert "### A table" in md and "| 1.0 |" in md
    assert "| speed | ≤ 1 s | 2 s | NOT met | slow |" in md
    assert "## training_throughput" not in md  # no file, no section
