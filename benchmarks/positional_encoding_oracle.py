r"""Position signals against an oracle: how close a transformer comes to the same family
told the drive's phase exactly.

"Gain over the plain model" is the wrong yardstick for a family that knows the order of
its rows by construction (the linear symplectic transformer's attention is indexed by
position). The yardstick here is an **oracle**: the same family, without a position
signal, given $(\sin\Omega t, \cos\Omega t)$ of the true drive as two more columns of
every row (an exact input; for the symplectic families a $(q, p)$ pair, which the drive
rotates). A position signal has done its job when the model comes close to the oracle.

Problems and models (every family of the command line, at its sizes; `T = pw = 3`):

| problem | sampling | models |
|---|---|---|
| driven pendulum (`ParametricPendulum`, windows aligned with the drive) | regular | no signal · the signal · oracle |
| driven pendulum, 64 + 16 trajectories of 6 periods | steps $U[0.5, 1.5]\,\Delta t$ | no times · the signal with times · oracle with times |
| forced Duffing oscillator (`ForcedOscillator`), as above | steps $U[0.5, 1.5]\,\Delta t$ | no times · the signal with times · oracle with times |
| rigid body, Hénon–Heiles (Markov), default and `width=12, L=2` sizes | regular, times given | no signal · the signal with times |

"With times" means the irregular data reach the model as timed windows
(`geomlearn.models._timed`): each row's clock for the signal and its step for the
row-wise layers. "No times" is the same data read as if regular. Every model trains
under Levenberg–Marquardt for the same wall time (`--budget-s`, after one untimed
compiling epoch), median over the seeds. The error is the relative validation error of
the predicted rows' state columns on held-out trajectories,
$\|\hat Y - Y\|_F / \|Y\|_F$ (the oracle's drive columns left out).

Goals: regular driven pendulum, every family's signal within 2× of its oracle; irregular
problems, the signal with times ≥ 5× better than no times and within 2× of the oracle;
Markov problems, the signal with times ≤ 1.2× the error of no signal.

    python -m benchmarks positional_encoding_oracle                  # all cases
    python -m benchmarks positional_encoding_oracle --cases "pendulum ST" --seeds 0,1
"""

from __future__ import annotations

import time

from . import _common as C
from . import positional_encoding_lm as _lm
from ._harness import Benchmark, Column, Option, Table

#: problem → (kind, families); kind: "regular" / "irregular" driven, or "markov"
PROBLEMS = {
    "driven_pendulum": ("regular", ("ST", "LST", "TF", "VPT")),
    "driven_pendulum_irregular": ("irregular", ("ST", "LST", "TF", "VPT")),
    "forced_oscillator_irregular": ("irregular", ("ST", "LST", "TF", "VPT")),
    "rigid_body": ("markov", ("TF", "VPT")),
    "henon_heiles": ("markov", ("ST", "LST", "TF", "VPT")),
}
CASES = tuple((p, f, size) for p, (kind, fs) in PROBLEMS.items() for f in fs
              for size in (("default", "large") if kind == "markov" else ("default",)))
QUICK_CASES = (("driven_pendulum_irregular", "ST", "default"),
               ("henon_heiles", "VPT", "default"))
T = 3


def _irregular(system, n, seed):
    """`n` trajectories of `system` (extended phase space, clock at 0) over 6 drive
    periods at steps drawn from [0.5, 1.5] Δt, Δt = period / T; the (q, p) columns."""
    import jax
    import jax.numpy as jnp

    import geomlearn as gl
    from geomlearn.datasets import irregular_trajectories

    kq, kp = jax.random.split(jax.random.PRNGKey(seed))
    q = jax.random.uniform(kq, (n,), minval=-1.0, maxval=1.0)
    p = jax.random.uniform(kp, (n,), minval=-0.5, maxval=0.5)
    z0 = jnp.stack([q, jnp.zeros(n), p, jnp.zeros(n)], axis=1)
    data = irregular_trajectories(system, z0, system.period / T, 6 * T, jitter=0.5,
                                  seed=seed)
    return gl.TrajectoryData.from_times([a[:, ::2] for a in data.trajectories],
                                        data.row_times)


def _data(problem: str):
    """`{"train", "val", "Omega"}`: the data of `problem` (`Omega`: the drive's frequency,
    `None` for a Markov problem)."""
    from geomlearn.systems import ForcedOscillator, ParametricPendulum

    if problem == "driven_pendulum":
        _, train, val, _ = _lm._problem_data("parametric_pendulum", None)
        return {"train": train, "val": val, "Omega": ParametricPendulum().Omega}
    if problem.endswith("_irregular"):
        system = ParametricPendulum() if problem.startswith("driven") else ForcedOscillator()
        return {"train": _irregular(system, 64, 0), "val": _irregular(system, 16, 1),
                "Omega": system.Omega}
    _, train, val, _ = _lm._problem_data(problem, None)
    return {"train": train, "val": val, "Omega": None}


def _as_regular(data):
    """Irregular data read as if sampled at their mean step (the model sees no times)."""
    import geomlearn as gl

    return gl.TrajectoryData.from_arrays(list(data.trajectories), data.dt)


def _with_drive(data, Omega: float):
    """The data with $(\\sin\\Omega t, \\cos\\Omega t)$ of each row's time as two more
    columns, laid out $(q, \\sin, p, \\cos)$ (the drive a rotation in its own plane)."""
    import numpy as np

    import geomlearn as gl

    arrays = []
    for z, t in zip(data.trajectories, data.row_times):
        z = np.asarray(z)
        n = z.shape[1] // 2
        drive = [np.sin(Omega * t)[:, None], np.cos(Omega * t)[:, None]]
        arrays.append(np.concatenate([z[:, :n], drive[0], z[:, n:], drive[1]], axis=1))
    if data.irregular:
        return gl.TrajectoryData.from_times(arrays, data.row_times)
    return gl.TrajectoryData.from_arrays(arrays, data.dt, t0=data.t0)


def _variants(problem: str, signal: str, data: dict) -> dict:
    """`{model name: (train, val, positional_encoding)}` for a case."""
    kind = PROBLEMS[problem][0]
    train, val, encoding = data["train"], data["val"], _lm._encoding(signal)
    if kind == "markov":
        timed = [_timed(train), _timed(val)]
        return {"none": (train, val, False), signal: (*timed, encoding)}
    plain = (train, val) if kind == "regular" else (_as_regular(train), _as_regular(val))
    oracle = (_with_drive(train, data["Omega"]), _with_drive(val, data["Omega"]))
    return {"none": (*plain, False), signal: (train, val, encoding), "oracle": (*oracle, False)}


def _timed(data):
    """Regular data as timed data (their clock and steps of one reach the model)."""
    import geomlearn as gl

    return gl.TrajectoryData.from_times(list(data.trajectories), list(data.row_times))


def _error(model, val, task, d: int) -> float:
    """The relative validation error of the predicted rows' first `d` columns."""
    import jax
    import jax.numpy as jnp

    x, y, task = model.training_samples(val, task, what="val_data")
    pred = jax.vmap(lambda s: model.predict(s, task))(x)[..., :d]
    target = jax.vmap(lambda s: model.target(s, task))(y)[..., :d]
    return float(jnp.linalg.norm(pred - target) / jnp.linalg.norm(target))


def _train(case, train, val, encoding, budget: float, seed: int, d: int) -> dict:
    """One run at equal wall time under LM; the validation error of the state columns."""
    import jax

    import geomlearn as gl
    from geomlearn._nn import count_parameters
    from geomlearn.cli import choose_trainer

    _, family, size = case
    model = _lm._model(family, size, train.dim, T, encoding, jax.random.PRNGKey(seed))
    x, _, task = model.training_samples(train, model.task(seq_length=T, prediction_window=T))
    optimizer, _, _, _ = choose_trainer(model, x.shape[0], trainer="lm", time_budget=budget)
    options = {"batch_size": x.shape[0], "optimizer": optimizer, "seq_length": T,
               "prediction_window": T, "key": jax.random.PRNGKey(1000 + seed),
               "progress": False}
    gl.fit(model, train, epochs=1, **options)  # compile (the timed run reuses it)
    t0 = time.perf_counter()
    model, history = gl.fit(model, train, epochs=10**9, time_budget=budget, **options)
    return {"params": count_parameters(model), "iterations": len(history["loss"]),
            "loss": history["loss"][-1], "val_error": _error(model, val, task, d),
            "wall_s": time.perf_counter() - t0, "n_samples": int(x.shape[0])}


def measure(settings: dict, ctx) -> dict:
    data: dict = {}
    runs = []
    for case in _lm._select([tuple(c) for c in settings["cases"]], settings["select"]):
        problem = case[0]
        if problem not in data:
            data[problem] = _data(problem)
        d = data[problem]["train"].dim
        for signal in settings["signals"]:
            for seed in settings["seeds"]:
                for name, (train, val, enc) in _variants(problem, signal, data[problem]).items():
                    r = _train(case, train, val, enc, settings["budget_s"], seed, d)
                    runs.append({"problem": problem, "kind": PROBLEMS[problem][0],
                                 "family": case[1], "size": case[2], "signal": signal,
                                 "seed": seed, "model": name, **r})
                    ctx.log(f"{' '.join(case):40s} {signal:9s} seed {seed} {name:9s} "
                            f"val error {r['val_error']:.3e} ({r['iterations']} it)")
    return {"runs": runs}


def _medians(settings, results) -> list[dict]:
    """One row per case and signal: the median validation error of each model over the
    seeds and the ratios the goals read."""
    import numpy as np

    groups: dict = {}
    for r in results["runs"]:
        key = (r["problem"], r["family"], r["size"], r["signal"])
        groups.setdefault(key, {}).setdefault(r["model"], []).append(r["val_error"])
    rows = []
    for (problem, family, size, signal), models in groups.items():
        med = {name: float(np.median(v)) for name, v in models.items()}
        with_ = med[signal]
        rows.append({
            "problem": problem, "kind": PROBLEMS[problem][0], "family": family, "size": size,
            "signal": signal, "n_seeds": len(models[signal]), "none": med["none"],
            "with": with_, "oracle": med.get("oracle"),
            "gain": med["none"] / with_,
            "to_oracle": None if "oracle" not in med else with_ / med["oracle"],
        })
    return rows


def _targets(settings, results) -> list:
    out = []
    for r in _medians(settings, results):
        name = f"{r['problem']} {r['family']} {r['size']}, {r['signal']}"
        if r["kind"] == "markov":
            cost = 1.0 / r["gain"]
            out.append(C.target(f"{name}: cost", "with / none ≤ 1.2", cost, cost <= 1.2,
                                "x", "equal wall time"))
            continue
        out.append(C.target(f"{name}: to the oracle", "with / oracle ≤ 2", r["to_oracle"],
                            r["to_oracle"] <= 2.0, "x", "equal wall time"))
        if r["kind"] == "irregular":
            out.append(C.target(f"{name}: gain", "none / with ≥ 5", r["gain"], r["gain"] >= 5.0,
                                "x", "equal wall time"))
    return out


def _notes(settings, results) -> list:
    return [f"Levenberg–Marquardt, {settings['budget_s']:g} s per run after one compiling "
            f"epoch; seeds {', '.join(map(str, settings['seeds']))}.",
            "Errors: relative validation error of the predicted rows' state columns."]


SPEC = Benchmark(
    name="positional_encoding_oracle",
    description="position signals against the oracle (the drive's phase as an exact "
                "input), regular and irregular sampling, and their cost on Markov problems",
    full={"budget_s": 10.0, "seeds": [0, 1, 2, 3, 4], "cases": [list(c) for c in CASES],
          "select": None, "signals": ["True"]},
    quick={"budget_s": 0.5, "seeds": [0], "cases": [list(c) for c in QUICK_CASES],
           "select": None, "signals": ["True"]},
    measure=measure,
    tables=(Table(
        "Median validation error over the seeds ({budget_s:g} s of LM per model)",
        (Column("problem", "problem"), Column("family", "model"), Column("size", "size"),
         Column("signal", "signal"), Column("n_seeds", "seeds"),
         Column("none", "no signal / no times", ".2e"), Column("with", "signal", ".2e"),
         Column("oracle", "oracle", ".2e"), Column("gain", "none / signal", ".2f"),
         Column("to_oracle", "signal / oracle", ".2f")),
        rows=_medians),
        Table("Every run",
              (Column("problem", "problem"), Column("family", "model"),
               Column("size", "size"), Column("signal", "signal"), Column("seed", "seed"),
               Column("model", "variant"), Column("params", "parameters"),
               Column("iterations", "LM iterations"), Column("val_error", "val error", ".3e")),
              rows="runs"),
    ),
    targets=_targets,
    notes=_notes,
    options=(
        Option("--budget-s", float, "seconds of LM per model (default 10)"),
        Option("--seeds", str, "comma-separated seeds (default 0,1,2,3,4)",
               convert=lambda text: [int(v) for v in text.split(",") if v.strip()]),
        Option("--signals", str, "comma-separated signals compared (default True: each "
               "family's; e.g. 'True,rotary')",
               convert=lambda text: [e.strip() for e in text.split(",") if e.strip()]),
        Option("--cases", str, "only the cases whose name has all these words, e.g. "
               "'driven_pendulum ST' (comma-separated alternatives)", setting="select"),
    ),
    one_core=True,
)
NAME, DESCRIPTION = SPEC.name, SPEC.description
add_arguments = SPEC.add_arguments


def run(*, quick: bool = False, out=None, **options) -> dict:
    """Run the benchmark (see `benchmarks._harness`), then print its tables in Markdown."""
    payload = SPEC.run(quick=quick, out=out, **options)
    C.emit("\n" + C.render_markdown(payload))
    return payload
