"""The benchmarks (`benchmarks/`) run, in their quick smoke-test mode, inside the suite.

Quick mode uses tiny sizes, so its figures mean nothing; these tests check that every
benchmark runs end to end, prints its table, writes a JSON file equal to what it returns,
measures what it says it measures (one-core pinning, both training phases, shapes of the
rollouts, structure residuals that separate symplectic from non-symplectic networks),
and that the runner lists and rejects names and shares options without argparse
internals; the declarative harness (`benchmarks._harness`) is tested on a toy spec. The
full benchmarks and their recorded results are in `benchmarks/RESULTS.md`.
"""

import json
import math
import os
import shutil
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
from benchmarks import _harness as H  # noqa: E402
from benchmarks import _report as R  # noqa: E402
from benchmarks._headers import SECTIONS, Run, Section  # noqa: E402


def _run_cli(*args, timeout=120):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=timeout,
    )


# ----------------------------------------------------------------------------- runner


@pytest.mark.slow  # starts a process
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


@pytest.mark.slow  # starts a process
def test_unknown_benchmark_is_rejected_with_the_valid_names():
    proc = _run_cli("-m", "benchmarks", "no_such_benchmark")
    assert proc.returncode == 2
    assert "no_such_benchmark" in proc.stderr
    for name in benchmarks.BENCHMARKS:
        assert name in proc.stderr
    with pytest.raises(ValueError, match="training_throughput"):
        benchmarks.load("no_such_benchmark")


@pytest.mark.slow  # starts a process
def test_all_collects_every_benchmarks_options_without_conflict():
    proc = _run_cli("-m", "benchmarks", "all", "--help")
    assert proc.returncode == 0, proc.stderr
    for flag in ("--quick", "--out", "--repeats", "--model", "--budget-s", "--epochs"):
        assert flag in proc.stdout
    assert proc.stdout.count("\n  --repeats REPEATS") == 1  # declared twice, added once


def test_a_shared_option_reaches_every_benchmark_that_declares_it():
    import argparse

    from benchmarks.__main__ import _add_options

    parser = argparse.ArgumentParser()
    owned = _add_options(parser, ["training_throughput", "rollout_speed", "rigid_body"])
    assert "repeats" in owned["training_throughput"] and "repeats" in owned["rollout_speed"]
    assert "repeats" not in owned["rigid_body"] and "budget_s" in owned["rigid_body"]
    args = parser.parse_args(["--repeats", "3", "--networks", "VPT,VPFF"])
    assert args.repeats == 3 and args.networks == "VPT,VPFF" and args.model is None


def test_every_benchmark_module_has_the_runner_interface():
    for name in benchmarks.BENCHMARKS:
        module = benchmarks.load(name)
        assert callable(module.run)
        assert module.NAME == name
        assert name in benchmarks.DESCRIPTIONS


# ----------------------------------------------------------------------------- harness


def _toy_measure(settings, ctx):
    return {"rows": [{"name": "a", "value": settings["size"] * 1.5}], "quick": ctx.quick}


TOY = H.Benchmark(
    name="toy",
    description="a toy benchmark",
    full={"size": 10, "names": ["a"]},
    quick={"size": 2, "names": ["a"]},
    measure=_toy_measure,
    tables=(H.Table("Toy, size {size}", (H.Column("name", "name"),
                                         H.Column("value", "value at {size}", ".1f")),
                    rows="rows"),),
    targets=lambda settings, results: [
        C.target("value", "≥ 10", results["rows"][0]["value"], results["rows"][0]["value"] >= 10)
    ],
    notes=lambda settings, results: [f"note {settings['size']}"],
    options=(H.Option("--size", int, "the size"),
             H.Option("--names", str, "names", convert=lambda v: v.split(","))),
)


@pytest.mark.slow  # starts a process
def test_harness_runs_a_spec_from_settings_to_json(tmp_path, capsys):
    payload = TOY.run(quick=False, out=tmp_path, size=20, names="x,y")
    assert payload["settings"] == {"size": 20, "names": ["x", "y"]}  # options override
    assert payload["command"] == "python -m benchmarks toy --size 20 --names x,y"
    table = payload["tables"][0]
    assert table["title"] == "Toy, size 20" and table["columns"][1] == ["value", "value at 20", ".1f"]
    assert table["rows"] == [{"name": "a", "value": 30.0}]
    assert payload["targets"][0]["met"] is True and payload["notes"] == ["note 20"]
    assert json.loads((tmp_path / "toy.json").read_text()) == payload
    printed = capsys.readouterr().out
    assert C.render_text(payload) in printed and "toy.json" in printed
    # quick settings; no target is marked in a quick run
    quick = TOY.run(quick=True, out=tmp_path)
    assert quick["settings"] == {"size": 2, "names": ["a"]} and quick["results"]["quick"] is True
    assert quick["targets"][0]["met"] is None and "quick" in quick["targets"][0]["note"]


def test_harness_rejects_unknown_options_and_inconsistent_specs(tmp_path):
    with pytest.raises(TypeError, match="no option"):
        TOY.run(quick=True, out=tmp_path, epochs=3)
    with pytest.raises(ValueError, match="same keys"):
        H.Benchmark("bad", "", full={"a": 1}, quick={}, measure=_toy_measure, tables=())
    with pytest.raises(ValueError, match="unknown setting"):
        H.Benchmark("bad", "", full={"a": 1}, quick={"a": 1}, measure=_toy_measure,
                    tables=(), options=(H.Option("--b", int),))


def test_loss_at_times():
    curve = [(1.0, 0.5), (2.0, 0.25), (4.0, 0.125)]
    assert H.loss_at_times(curve, [0.5, 1.0, 3.0, 4.1, 10.0]) == [None, 0.5, 0.25, 0.125, None]


# ----------------------------------------------------------------------------- helpers


def test_summarize_takes_the_median():
    assert C.summarize([3.0, 1.0, 2.0])["median_s"] == 2.0
    assert C.summarize([4.0, 1.0, 2.0, 3.0])["median_s"] == 2.5
    s = C.summarize([5.0, 1.0, 9.0])
    assert (s["min_s"], s["max_s"], s["runs_s"]) == (1.0, 9.0, [5.0, 1.0, 9.0])


def test_command_line_and_tables():
    assert C.command_line("rigid_body", False, {"budget_s": 180.0, "dtype": None}) == (
        "python -m benchmarks rigid_body --budget-s 180.0"
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



def test_the_secular_share_of_an_energy_drift():
    from benchmarks.work_precision import _secular_share

    # a trend of 1e-4 per 10^4 strides over 10^5 strides is a change of 1e-3
    ramp = {"energy_trend": -1e-4, "energy_max_drift": 1e-3, "long_steps": 100_000}
    assert _secular_share(ramp) == pytest.approx(1.0)
    assert _secular_share({**ramp, "energy_max_drift": 4e-3}) == pytest.approx(0.25)
    assert _secular_share({**ramp, "long_steps": 10_000}) == pytest.approx(0.1)
    assert _secular_share({**ramp, "energy_trend": None}) is None
    assert _secular_share({**ramp, "energy_max_drift": 0.0}) is None


# ----------------------------------------------------------------------------- quick runs

# Each quick run is the command a user types, `python -m benchmarks NAME --quick --out DIR`,
# under the suite's JAX rules (strict dtype promotion, rank-promotion errors), for every
# registered benchmark. The runs are compile-bound and single-threaded, so they run two at
# a time (this machine class has 2 cores), longest first; each test then checks one run's
# output.
_DRIVER = (
    "import sys, jax; "
    "jax.config.update('jax_numpy_dtype_promotion', 'strict'); "
    "jax.config.update('jax_numpy_rank_promotion', 'raise'); "
    "from benchmarks.__main__ import main; "
    "sys.exit(main([sys.argv[1], '--quick', '--out', sys.argv[2]]))"
)
_LONGEST = ["rigid_body", "coupled_oscillator_lst", "sympnets_pendulum", "training_throughput"]
_ORDER = [n for n in _LONGEST if n in benchmarks.BENCHMARKS] + [
    n for n in benchmarks.BENCHMARKS if n not in _LONGEST
]
_PARALLEL = 2


def _selected(session) -> list[str]:
    """The benchmarks whose quick run a selected test reads, in `_ORDER` (all of them when
    every test runs): the `name` of `test_quick_run_of_every_benchmark`, the `NAME` of
    `test_NAME_quick`."""
    names = set()
    for item in session.items:
        if "quick_runs" in getattr(item, "fixturenames", ()):
            callspec = getattr(item, "callspec", None)
            names.add(callspec.params["name"] if callspec is not None else
                      item.originalname.removeprefix("test_").removesuffix("_quick"))
    return [n for n in _ORDER if n in names]


@pytest.fixture(scope="module")
def quick_runs(request, tmp_path_factory):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    pending, running, done = _selected(request.session), {}, {}
    deadline = time.monotonic() + 300 * len(pending)
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


@pytest.mark.slow
@pytest.mark.parametrize("name", list(benchmarks.BENCHMARKS))
def test_quick_run_of_every_benchmark(quick_runs, name):
    _quick(quick_runs, name)


@pytest.mark.slow
def test_training_throughput_quick(quick_runs):
    payload, _ = _quick(quick_runs, "training_throughput")
    # measured in a process restricted to one core, with Eigen's thread pool off
    assert payload["machine"]["cores_available"] == 1
    assert "--xla_cpu_multi_thread_eigen=false" in payload["machine"]["XLA_FLAGS"]
    s, res = payload["settings"], payload["results"]
    assert [r["dtype"] for r in res["pendulum"]] == s["dtypes"]
    for row in res["pendulum"]:
        assert row["scan"]["iterations_per_s"] > 0 and row["python_loop"]["iterations_per_s"] > 0
        assert row["scan"]["compile"]["compile_s"] > 0
        assert len(row["scan"]["time"]["runs_s"]) == s["repeats"]
        fit = row["fit"]
        assert len(fit["runs"]) == s["fit_repeats"] and fit["epochs_per_s"] > 0
        assert _finite(fit["final_loss"]) and _finite(row["scan"]["final_loss"])
    assert [r["batch"] for r in res["sweep"]] == s["sweep_batches"]
    for r in res["sweep"]:
        rounds = r["rounds"]  # the ratios are taken within each round, then the median
        assert len(rounds["fit_over_scan"]) == s["sweep_repeats"]
        for i in range(s["sweep_repeats"]):
            assert rounds["fit_over_scan"][i] == pytest.approx(rounds["fit"][i] / rounds["scan"][i])
        assert r["fit_over_scan"] == sorted(rounds["fit_over_scan"])[s["sweep_repeats"] // 2]
        assert r["fit_epochs"] >= s["sweep_min_epochs"]
        if s["sweep_repeats"] == 1:
            assert r["loop_over_scan"] == pytest.approx(r["python_loop"] / r["scan"])
            assert r["fit_over_scan"] == pytest.approx(r["fit"] / r["scan"])
    # the fit-versus-scan targets are reported (as ratios): at 40 pairs, and at every B
    assert any("vs the bare scan" in t["target"] for t in payload["targets"])
    every = [t for t in payload["targets"] if "at every batch size" in t["target"]]
    assert len(every) == 1 and "≥ 0.8" in every[0]["goal"]


@pytest.mark.slow
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


@pytest.mark.slow
def test_rigid_body_quick(quick_runs):
    import jax
    import numpy as np

    import geomlearn as gl

    rb = benchmarks.load("rigid_body")
    payload, out = _quick(quick_runs, "rigid_body")
    nets = payload["results"]["networks"]
    assert list(nets) == rb.QUICK["networks"]
    phases = {"lm": ["lm"], "gn": ["gn"], "adam": ["adam"], "adam-lbfgs": ["adam", "lbfgs"]}
    for name, net in nets.items():
        assert net["trainer"] == rb.NETWORKS[name][1]
        # trained through geomlearn.fit: its history is the curve, on one clock
        assert list(net["phases"]) == phases[net["trainer"]]
        curve = net["curve"]
        times = [c[0] for c in curve]
        assert times == sorted(times) and len(curve) == net["epochs"] >= 1
        assert [c[2] for c in curve] == sorted((c[2] for c in curve), key=list(net["phases"]).index)
        assert _finite(net["loss"])
        if net["trainer"] in ("lm", "gn"):  # steps are accepted only if the loss decreases
            assert net["loss"] <= net["initial_loss"]
        assert set(net["validation"]["invariant_drift"]) >= {"energy", "casimir"}
        # the saved network loads back to the same parameters
        model = gl.load(out / net["saved_model"])
        assert type(model).__name__ == net["model"]
        n = sum(a.size for a in jax.tree_util.tree_leaves(model) if hasattr(a, "size"))
        assert n == net["n_params"]
        assert np.isfinite(np.concatenate([np.ravel(a) for a in jax.tree_util.tree_leaves(model)])).all()
    # the loss-against-time figure and table
    assert (out / payload["results"]["figure"]).stat().st_size > 1000
    curve_rows = payload["tables"][1]["rows"]
    assert [r["name"] for r in curve_rows] == list(nets)


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_dissipation_quick(quick_runs):
    payload, _ = _quick(quick_runs, "dissipation")
    rows = {r["name"]: r for r in payload["results"]["pendulum"]}
    assert set(rows) == {"ConformalSympNet", "GSympNet", "ResNet (MLP)", "ResNet (MLP, 32 × 3)"}
    assert rows["ConformalSympNet"]["gamma"] >= 0
    (duffing,) = payload["results"]["duffing"]
    assert duffing["r_small"] >= -1e-12 and duffing["balance"] < 1e-10  # R ⪰ 0, exact balance
    assert _finite(duffing["state_mse"]) and duffing["state_mse"] >= 0  # Desai et al.'s metric
    assert {t["target"].split(":")[0] for t in payload["targets"]} == {"damped pendulum", "Duffing"}


@pytest.mark.slow
def test_brouwer_quick(quick_runs):
    payload, _ = _quick(quick_runs, "brouwer")
    res, s = payload["results"], payload["settings"]
    # the second timing ran in a process whose XLA compiles small loops as one kernel
    assert res["kernel_flag"].endswith(f"xla_cpu_small_while_loop_byte_threshold={s['kernel_bytes']}")
    rows = {(r["dtype"], r["variant"]): r for r in res["rows"]}
    assert len(rows) == 6
    for (dtype, variant), row in rows.items():
        assert row["time_kernel_s"] > 0 and _finite(row["time_ratio_kernel"])
        if variant == "plain":
            assert row["time_ratio_kernel"] == 1.0
    kinds = [t["target"] for t in payload["targets"] if "one kernel" in t["target"]]
    assert len(kinds) == 2


@pytest.mark.slow
def test_work_precision_quick(quick_runs):
    payload, _ = _quick(quick_runs, "work_precision")
    s, rows = payload["settings"], payload["results"]["rows"]
    assert [r["problem"].split(",")[0] for r in rows] == [
        "Lennard-Jones cluster", "Hénon–Heiles", "Toda lattice"]
    toda = rows[2]
    # the reduced model is compared with the full system's integrators, at its stride
    assert toda["dim"] == 2 * s["toda"]["n_particles"] and toda["stride"] == s["toda"]["stride"]
    metrics = payload["results"]["work_precision"][toda["problem"]]
    assert metrics["model"] == "LiftedIntegrator" and metrics["system"] == "TodaLattice"
    assert metrics["dt"] == pytest.approx(s["toda"]["dt"] * s["toda"]["stride"])
    assert {p["method"] for p in metrics["points"]} == set(s["toda"]["methods"])
    assert _finite(toda["model_error"]) and toda["model_rate"] > 0
    speedup = toda["equal_error_speedup"]
    assert speedup is None or speedup > 0
    # the long rollout of the trained correction, and of the classical step alone
    trained, control = payload["results"]["long"]
    assert trained["problem"] == rows[0]["problem"] and "untrained" in control["problem"]
    for r in (trained, control):
        assert r["long_steps"] == s["lj"]["long_steps"] and 0 <= r["escaped"] <= r["n_long"]
    targets = {t["target"].split(":")[0]: t for t in payload["targets"]}
    assert set(targets) == {"Lennard-Jones", "Toda reduction"} and len(payload["targets"]) == 4
    assert targets["Toda reduction"]["met"] is None  # quick runs mark no target


@pytest.mark.slow  # trains a network for one epoch
def test_dissipation_side_by_side_trains_on_the_written_arrays(tmp_path):
    import jax
    import jax.numpy as jnp
    import numpy as np

    import geomlearn as gl
    from benchmarks import dissipation as D

    q, path = D.QUICK, tmp_path / "pendulum.npz"
    shapes = D.write_pendulum_data(path, q)
    assert shapes["train"] == [q["pendulum_trajectories"], q["pendulum_steps"] + 1, 2]
    assert shapes["test"] == [q["test_trajectories"], q["rollout_steps"] + 1, 2]
    _, data, test = D._pendulum_data(q)  # the file holds experiment 1's own arrays
    arrays = np.load(path)
    np.testing.assert_array_equal(arrays["train"], np.asarray(data.states))
    np.testing.assert_array_equal(arrays["test"], np.asarray(test.states))
    assert float(arrays["dt"]) == 0.1 and float(arrays["gamma"]) == 0.1
    with pytest.raises(ValueError, match="names must be among"):
        D.side_by_side(path, epochs=1, names=("GSympNet",))
    result = D.side_by_side(path, epochs=1, names=("PortHamiltonianNN",))  # its new code path
    assert result["n_train_pairs"] == q["pendulum_trajectories"] * q["pendulum_steps"]
    assert result["n_test_pairs"] == q["test_trajectories"] * q["rollout_steps"]
    (row,) = result["rows"]
    assert row["name"] == "PortHamiltonianNN" and row["epochs"] == 1 and row["parameters"] > 0
    for key in ("train_s", "damping", "one_step_rel", "one_step_mse", "rollout_rel", "final_loss"):
        assert _finite(row[key]) and row[key] >= 0, key
    flagged = row["unconverged_solves"]
    assert 0 <= flagged["one_step"] <= result["n_test_pairs"]
    assert 0 <= flagged["rollout"] <= q["test_trajectories"] * q["rollout_steps"]
    # where every solve converges, the rollout is geomlearn's own iterated map
    model = gl.PortHamiltonianNN(2, width=8, depth=1, dt=0.1, key=jax.random.PRNGKey(0), dtype=jnp.float64)
    z0 = jnp.array([[1.0, 0.5], [-0.7, 0.2]])
    states, n_flagged = D._dg_iterate(model, z0, 6, 0.1)
    assert n_flagged == 0 and states.shape == (2, 6, 2)
    np.testing.assert_array_equal(np.asarray(states), np.asarray(gl.iterate(model, z0, 6, dt=0.1)))


@pytest.mark.slow
def test_long_rollout_quick(quick_runs):
    payload, _ = _quick(quick_runs, "long_rollout")
    s, runs = payload["settings"], payload["results"]["runs"]
    # every family and variant once; the command line's training once, as k=1
    expected = [(f, v) for f in s["families"]
                for v in (["k=1"] if f == "LPNet-CLI" else s["variants"])]
    assert [(r["family"], r["variant"]) for r in runs] == expected
    for r in runs:
        lh = r["long_horizon"]
        assert lh["horizon"] == s["n_points"]
        assert len(lh["escape_step"]) == lh["n_trajectories"] == r["n_initial"]
        assert _finite(r["val_long"]) and _finite(r["train_loss"])
    # the Lie-Poisson network keeps |z|^2 to round-off over the rollout (float64) while its
    # learned energy drifts measurably: the drift measure sees what a model does not keep
    for r in runs:
        inv = r["long_horizon"]["invariants"]
        if r["family"].startswith("LPNet"):
            assert inv["casimir"]["worst_max_drift"] <= 1e-12
            assert inv["energy"]["worst_max_drift"] > 1e-8
        else:
            assert "casimir" not in inv and inv["energy"]["worst_max_drift"] > 1e-8
    assert any("Casimir" in t["target"] for t in payload["targets"])


@pytest.mark.slow
def test_positional_encoding_lm_quick(quick_runs):
    payload, _ = _quick(quick_runs, "positional_encoding_lm")
    s, runs = payload["settings"], payload["results"]["runs"]
    assert payload["machine"]["cores_available"] == 1
    assert [[r["problem"], r["family"], r["size"], r["trainer"]] for r in runs] == s["cases"]
    for r in runs:
        without, with_ = r["without"], r["with"]
        # the pair differs only by the encoding's parameters (< 50 % at these sizes)
        assert 0 < with_["params"] - without["params"] < 0.5 * without["params"]
        assert r["encoding"] in s["encodings"]
        assert r["val_ratio"] == pytest.approx(with_["val_loss"] / without["val_loss"])
        assert r["loss_ratio"] == pytest.approx(with_["loss"] / without["loss"])
        for run in (without, with_):  # trained for (about) the budget, after compiling
            assert _finite(run["loss"]) and _finite(run["val_loss"]) and run["epochs"] >= 1
            assert run["stop_reason"] in ("budget", "stalled", "converged")
            if run["stop_reason"] == "budget":  # LM to the budget; Adam's planned epochs
                assert 0.5 * s["budget_s"] <= run["wall_s"] <= 1.5 * s["budget_s"] + 1.0
    assert {r["trainer"] for r in runs} == {"lm", "adam"}
    # the Markdown table for RESULTS.md is printed too
    assert "| problem | order matters | model |" in quick_runs["positional_encoding_lm"]["stdout"]


def test_positional_encoding_lm_judges_each_case_on_the_median_over_its_seeds():
    from benchmarks import positional_encoding_lm as B

    def run(problem, seed, loss_ratio, val_ratio, encoding="True"):
        order = "yes" if B.PROBLEMS[problem] else "no (Markov)"
        return {"problem": problem, "order": order, "family": "ST", "size": "default",
                "trainer": "lm", "seed": seed, "encoding": encoding, "params": "70 → 86",
                "added": 16 / 70, "loss_ratio": loss_ratio, "val_ratio": val_ratio}

    runs = [run("henon_heiles", 0, 1.0, 1.0), run("henon_heiles", 1, 3.0, 1.1),
            run("henon_heiles", 2, 1.1, 9.0), run("henon_heiles", 0, 2.0, 2.0, "bias"),
            run("parametric_pendulum", 0, 0.1, 0.25), run("parametric_pendulum", 1, 0.1, 0.1),
            run("parametric_pendulum", 2, 0.1, 0.3)]
    settings = {"seeds": [0, 1, 2], "budget_s": 20.0}
    rows = {(r["problem"], r["encoding"]): r for r in B._medians(settings, {"runs": runs})}
    assert len(rows) == 3  # grouped by case and encoding
    markov = rows[("henon_heiles", "True")]
    assert markov["n_seeds"] == 3 and (markov["loss_ratio"], markov["val_ratio"]) == (1.1, 1.1)
    assert (markov["loss_range"], markov["val_range"]) == ("1.00–3.00", "1.00–9.00")
    assert rows[("henon_heiles", "bias")]["n_seeds"] == 1
    targets = {t["target"]: t for t in B._targets(settings, {"runs": runs})}
    cost = next(t for name, t in targets.items() if "henon_heiles ST default, LM, True" in name)
    gain = next(t for name, t in targets.items() if "parametric_pendulum" in name)
    # one bad seed does not decide a goal; the median does (1.1 ≤ 1.2; gain 1/0.25 = 4 < 5)
    assert cost["met"] is True and cost["measured"] == pytest.approx(1.1)
    assert gain["met"] is False and gain["measured"] == pytest.approx(4.0)
    # results recorded before --seeds hold a count
    assert B._seeds({"seeds": 2}) == [0, 1] and B._seeds({"seeds": [3, 5]}) == [3, 5]


@pytest.mark.slow
def test_positional_encoding_cli_quick(quick_runs):
    payload, _ = _quick(quick_runs, "positional_encoding_cli")
    s, runs = payload["settings"], payload["results"]["runs"]
    assert [[r["system"], r["model"]] for r in runs] == s["cases"]
    for r in runs:
        without, with_ = r["without"], r["with"]
        # geomlearn train as a user runs it: float32, here three LM iterations each
        assert without["dtype"] == with_["dtype"] == "float32"
        assert without["epochs"] == with_["epochs"] == 3
        assert 0 < with_["params"] - without["params"] < 0.5 * without["params"]
        assert r["val_ratio"] == pytest.approx(with_["val_loss"] / without["val_loss"])
    assert "| system | order matters | model |" in quick_runs["positional_encoding_cli"]["stdout"]


def test_positional_encoding_cli_spells_the_flag_and_counts_the_seeds_made_worse():
    from benchmarks import positional_encoding_cli as B

    assert B._flag("False") == [] and B._flag("True") == ["--positional-encoding"]
    assert B._flag("amplitude") == ["--positional-encoding", "amplitude"]

    def run(seed, without, with_, encoding="True"):
        return {"system": "parametric_pendulum", "model": "symplectic-transformer",
                "order": "yes", "encoding": encoding, "seed": seed, "params": "26 → 34",
                "val_without": without, "val_with": with_, "val_ratio": with_ / without}

    runs = [run(0, 0.2, 0.6), run(1, 0.2, 0.05), run(2, 0.2, 0.1), run(0, 0.2, 0.02, "bias")]
    rows = {r["encoding"]: r for r in B._medians({}, {"runs": runs})}
    true = rows["True"]
    assert true["n_seeds"] == 3 and true["worse"] == "1 of 3"  # 3.0 > 1.2, 0.25 and 0.5 not
    assert true["val_ratio"] == pytest.approx(0.5) and true["val_with"] == pytest.approx(0.1)
    assert rows["bias"]["worse"] == "0 of 1"
    gain = {t["target"]: t for t in B._targets({}, {"runs": runs})}
    assert [t["met"] for t in gain.values()] == [False, True]  # 2x < 5x; 10x ≥ 5x
    with pytest.raises(ValueError, match="selects none"):
        B._select(B.CASES, "kepler")


# ----------------------------------------------------------------------------- the report

_MACHINE = {"cpu_model": "Test CPU", "logical_cores": 4, "cores_available": 1, "jax": "0.0",
            "jax_backend": "cpu", "load_average": [1.5, 1.0, 0.5]}


def _payload(name, rows, *, targets=(), command=None, columns=(("x", "x", ".1f"),)):
    """A result file as a benchmark writes it (`_common.make_payload`), without measuring
    the machine."""
    return {
        "benchmark": name, "quick": False, "command": command or f"python -m benchmarks {name}",
        "date": "2031-01-02T03:04:05+00:00", "wall_s": 90.0, "machine": _MACHINE,
        "settings": {}, "tables": [C.table("A table", columns, rows)],
        "targets": list(targets), "notes": ["a note"], "results": {},
    }


def _section_of(md, title):
    return md.split(f"\n## {title}\n")[1].split("\n## ")[0]


def test_the_committed_results_md_is_the_rendering_of_the_committed_result_files():
    """`benchmarks/RESULTS.md` is exactly what `python -m benchmarks report` renders, and
    every committed result file is shown by a section (side experiments live in git)."""
    assert R.RESULTS_MD.read_text() == R.render(), "run `python -m benchmarks report`"
    assert R.unlisted() == []
    assert set(SECTIONS) == set(benchmarks.BENCHMARKS)


def test_report_renders_one_section_per_benchmark_from_its_files(tmp_path):
    target = C.target("speed", "≤ 1 s", 2.0, False, "s", note="slow")
    payload = _payload("rollout_speed", [{"x": 1.0}], targets=[target],
                       command="python -m benchmarks rollout_speed --repeats 3")
    (tmp_path / "rollout_speed.json").write_text(json.dumps(payload))
    md = R.render(tmp_path)
    assert md == R.render(tmp_path)  # no clock, no machine state
    titles = [line[3:] for line in md.splitlines() if line.startswith("## ")]
    assert titles == [SECTIONS[n].title for n in benchmarks.BENCHMARKS]
    section = _section_of(md, "Rollout speed")
    assert "```bash\npython -m benchmarks rollout_speed --repeats 3\n```" in section
    assert "Run: 2031-01-02, 1.5 min on Test CPU, 1 of 4 logical cores, JAX 0.0 (cpu), " \
           "load average 1.50 / 1.00 / 0.50" in section
    assert "03:04" not in md  # the day of a run, not its time
    assert "### A table" in section and "| 1.0 |" in section and "- a note" in section
    assert "| speed | ≤ 1 s | 2 s | NOT met | slow |" in section
    assert ("| [Rollout speed](#rollout-speed) | `python -m benchmarks rollout_speed` | "
            "2031-01-02 | 0 of 1 |") in md
    assert "No recorded run" in _section_of(md, "Training throughput")


def test_report_merges_the_rows_of_several_runs_and_filters_rows(tmp_path):
    section = Section(title="T", about="What it measures.", tables=(0,), merge=True,
                      notes=False, runs=(Run("a.json"), Run("b.json", where=(("x", 2.0),))))
    (tmp_path / "a.json").write_text(json.dumps(_payload("a", [{"x": 1.0}])))
    (tmp_path / "b.json").write_text(json.dumps(_payload("b", [{"x": 2.0}, {"x": 3.0}])))
    payloads = [R._load(tmp_path, run) for run in section.runs]
    text = R._section("t", section, payloads, tmp_path)
    assert "1. `python -m benchmarks a` — 2031-01-02" in text
    assert "| run | x |" in text and "| 1 | 1.0 |" in text and "| 2 | 2.0 |" in text
    assert "3.0" not in text and "a note" not in text
    other = _payload("c", [{"y": 1.0}], columns=(("y", "y", ".1f"),))
    with pytest.raises(ValueError, match="cannot be merged"):
        R._section("t", section, [payloads[0], other], tmp_path)


def test_report_check_fails_on_a_stale_file_and_on_a_stray_result(tmp_path, capsys):
    results, out = tmp_path / "results", tmp_path / "RESULTS.md"
    shutil.copytree(C.DEFAULT_OUT, results)
    args = ["--results", str(results), "--output", str(out)]
    assert R.main(["--check", *args]) == 1  # no file yet
    assert R.main(args) == 0 and R.main(["--check", *args]) == 0
    # one result file changes: the rendered file is stale
    path = results / "distributed_lm.json"
    recorded = path.read_text()
    payload = json.loads(recorded)
    path.write_text(json.dumps(dict(payload, wall_s=payload["wall_s"] + 600)))
    assert R.main(["--check", *args]) == 1
    assert "differs from the rendering" in capsys.readouterr().err
    path.write_text(recorded)
    assert R.main(["--check", *args]) == 0
    # a side experiment that no section shows
    (results / "distributed_lm_side.json").write_text("{}")
    assert R.unlisted(results) == ["distributed_lm_side.json"]
    assert R.main(["--check", *args]) == 1
    # a section's file that is missing
    (results / "distributed_lm_side.json").unlink()
    path.unlink()
    assert R.unlisted(results) == ["missing: distributed_lm.json"]
    assert R.main(["--check", *args]) == 1



def test_positional_encoding_oracle_adds_the_drive_and_judges_medians():
    """The oracle's two columns are sin/cos of each row's own time, laid out as a (q, p)
    pair; the goals read the median over the seeds of each model."""
    import numpy as np

    import geomlearn as gl
    from benchmarks import positional_encoding_oracle as B

    t = [np.array([0.0, 0.4, 1.1]), np.array([0.2, 0.5, 0.9])]
    states = [np.arange(6.0).reshape(3, 2), -np.arange(6.0).reshape(3, 2)]
    data = gl.TrajectoryData.from_times(states, t)
    with_drive = B._with_drive(data, 2.0)
    assert with_drive.irregular and with_drive.dim == 4
    for z, z4, ti in zip(data.trajectories, with_drive.trajectories, t):
        np.testing.assert_allclose(np.asarray(z4)[:, [0, 2]], np.asarray(z))
        np.testing.assert_allclose(np.asarray(z4)[:, 1], np.sin(2.0 * ti), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(z4)[:, 3], np.cos(2.0 * ti), rtol=1e-6)

    def run(problem, model, seed, error):
        return {"problem": problem, "family": "TF", "size": "default", "signal": "True",
                "seed": seed, "model": model, "val_error": error}

    runs = [run("driven_pendulum_irregular", m, s, e) for m, errors in
            (("none", (1.0, 0.9, 5.0)), ("True", (0.1, 0.3, 0.2)), ("oracle", (0.1, 0.05, 0.1)))
            for s, e in enumerate(errors)]
    runs += [run("henon_heiles", m, s, e) for m, errors in
             (("none", (1.0, 1.0, 1.0)), ("True", (1.1, 9.0, 1.3))) for s, e in enumerate(errors)]
    rows = {r["problem"]: r for r in B._medians({}, {"runs": runs})}
    irregular = rows["driven_pendulum_irregular"]
    assert (irregular["none"], irregular["with"], irregular["oracle"]) == (1.0, 0.2, 0.1)
    assert irregular["gain"] == pytest.approx(5.0) and irregular["to_oracle"] == pytest.approx(2.0)
    assert rows["henon_heiles"]["oracle"] is None
    targets = {t["target"]: t for t in B._targets({}, {"runs": runs})}
    assert len(targets) == 3
    cost = next(t for name, t in targets.items() if name.startswith("henon_heiles"))
    assert cost["measured"] == pytest.approx(1.3)
