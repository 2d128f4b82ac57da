"""Rigid-body reproduction of the volume-preserving transformer paper, through `geomlearn.fit`.

Data: `datasets.rigid_body_vpt()` (1238 trajectories, `dt = 0.2`, `t ∈ [0, 20]`,
implicit midpoint): 118,848 windows `T = pw = 3` for the transformers, 123,800 one-step
pairs for the feed-forward network. Loss: `fit`'s relative loss (the paper's).

Every network is trained by the public `geomlearn.fit` with a wall-clock `time_budget`
(seconds, compilation included), from the same initial parameters for every VPT:

| name | model | parameters | trainer (`fit(optimizer=...)`) | budget |
|---|---|---|---|---|
| VPT | `VolumePreservingTransformer(3, n_blocks=2, L=3)` | 162 | `LevenbergMarquardt(subset=16384)` | `budget_s` (180 s) |
| VPFF | `VolumePreservingFeedForward(3, n_blocks=6)` | 135 | `LevenbergMarquardt(subset=16384)` | `budget_s`, stops at the target |
| VPT-GN | the VPT | 162 | `GaussNewton(subset=16384)` | `compare_budget_s` (60 s) |
| VPT-Adam | the VPT | 162 | `fit`'s default Adam (1e-2 → 1e-6 over the epochs that fit the budget), minibatches of 2048 | `compare_budget_s` |
| VPT-Adam+L-BFGS | the VPT | 162 | that Adam for half the budget, then full-batch `optax.lbfgs(linesearch=None)` | `compare_budget_s` |

(`--networks` also takes `ST`, the Julia tutorial's standard transformer, `VPT+PE`
and `VPT-arb`, trained like the VPT for `compare_budget_s`.) Levenberg–Marquardt and
Gauss–Newton draw a fresh random subset of 16,384 windows (the paper's batch size) per
iteration. **Targets: the VPT and the VPFF reach a relative training loss ≤ 5e-4 within
180 s on this machine's 2 cores** (the paper: about 5e-4 after 500,000 Adam epochs, about
6 hours on an RTX 4090).

**Loss against wall time.** `history["loss"]` and `history["time"]` of `fit` (the time
since the start of training, compilation included; for multi-phase runs the later
phases continue the clock): for LM and Gauss–Newton the relative loss on the *whole*
training set after each iteration, for Adam the mean minibatch loss of each epoch, for
L-BFGS the full-batch loss before each step. The table "train loss" is the relative loss
on the whole training set of the returned model, computed afterwards. The Adam schedule
needs the number of epochs: the first two epochs time an epoch (they are training, and
on the clock), and `fit` then plans the epochs that fit the rest of the budget.

**L-BFGS through `fit`.** `fit` calls `update(grads, state, params)`, so an optimiser
that needs the loss function (`optax.lbfgs`'s default zoom line search takes `value`,
`grad` and `value_fn`) cannot run in it. `optax.lbfgs(linesearch=None)` can: a fixed
step `learning_rate` (`lbfgs_lr`) along the L-BFGS direction, after the Adam phase. A
non-finite loss stops it (`NonFiniteLossError`), and the last good model is kept.

Validation, as in the paper: from `(sin 1.1, 0, cos 1.1)` and `(0, sin 1.1, cos 1.1)`,
`validation_steps` (500) steps against implicit midpoint with `geomlearn.evaluate`: the
relative trajectory error over 100 and 500 steps and the drift of the energy and of the
Casimir `|z|²` (the exact flow keeps both). Each trained network is saved with
`geomlearn.save` as `rigid_body_<name>.geomlearn` next to the JSON file (for
`rollout_speed --model`; not committed), and the curves are drawn in
`rigid_body_loss_vs_time.png`.
"""

from __future__ import annotations

import math
import time

from . import _common as C
from ._harness import Benchmark, Column, Option, Table, loss_at_times

TARGET_LOSS = 5e-4
TARGET_S = 180.0
PAPER = {"VPFF": 5e-4, "VPT": 5e-4, "ST": 5e-2}
T = 3
FIGURE = "rigid_body_loss_vs_time.png"

#: name → (model, trainer, budget setting)
NETWORKS = {
    "VPT": ("VPT", "lm", "budget_s"),
    "VPFF": ("VPFF", "lm", "budget_s"),
    "VPT-GN": ("VPT", "gn", "compare_budget_s"),
    "VPT-Adam": ("VPT", "adam", "compare_budget_s"),
    "VPT-Adam+L-BFGS": ("VPT", "adam-lbfgs", "compare_budget_s"),
    "ST": ("ST", "lm", "compare_budget_s"),
    "VPT+PE": ("VPT+PE", "lm", "compare_budget_s"),
    "VPT-arb": ("VPT-arb", "lm", "compare_budget_s"),
}
DEFAULT_NETWORKS = ["VPT", "VPFF", "VPT-GN", "VPT-Adam", "VPT-Adam+L-BFGS"]

FULL = {
    "dtype": "float64",
    "sizes": {"vpt": {"n_blocks": 2, "L": 3}, "vpff": {"n_blocks": 6}},
    "data": "all",
    "networks": DEFAULT_NETWORKS,
    "budget_s": TARGET_S,
    "compare_budget_s": 60.0,
    "stop_at_target": ["VPFF"],
    "lm_subset": 16384,
    "lm_chunk": 4096,
    "adam_batch": 2048,
    "adam_fraction": 0.5,
    "lbfgs_lr": 1.0,
    "lbfgs_memory": 20,
    "validation_steps": 500,
    "validation_short": 100,
    "curve_times": [5, 10, 20, 30, 60, 120, 180],
}
QUICK = {
    "dtype": "float64",
    # smoke test only: tiny networks, 13 trajectories of 20 steps, budgets of seconds
    "sizes": {"vpt": {"n_blocks": 1, "L": 1}, "vpff": {"n_blocks": 1}},
    "data": "every 100th trajectory, 20 steps",
    "networks": DEFAULT_NETWORKS,
    "budget_s": 3.0,
    "compare_budget_s": 2.0,
    "stop_at_target": ["VPFF"],
    "lm_subset": 256,
    "lm_chunk": 128,
    "adam_batch": 64,
    "adam_fraction": 0.5,
    "lbfgs_lr": 1.0,
    "lbfgs_memory": 5,
    "validation_steps": 20,
    "validation_short": 5,
    "curve_times": [1, 2, 3, 4, 5, 6, 8],
}


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    for n in names:
        if n not in NETWORKS:
            raise ValueError(f"unknown network {n!r}; valid: {', '.join(NETWORKS)}")
    return names


OPTIONS = (
    Option("--budget-s", float, "wall-clock budget of VPT and VPFF, seconds (default 180)"),
    Option("--compare-budget-s", float,
           "budget of the comparison trainers (Gauss-Newton, Adam, Adam + L-BFGS) and of "
           "ST, VPT+PE, VPT-arb, seconds (default 60)"),
    Option("--dtype", str, "training and rollout dtype (default float64)",
           choices=("float32", "float64")),
    Option("--networks", str, f"comma-separated subset of {','.join(NETWORKS)} "
           f"(default {','.join(DEFAULT_NETWORKS)})", convert=_names),
    Option("--lm-subset", int, "Levenberg-Marquardt / Gauss-Newton: random samples per "
           "iteration (default 16384)"),
    Option("--lbfgs-lr", float, "L-BFGS: fixed step along its direction (default 1)"),
)


# ------------------------------------------------------------------------- measurement


def _models(settings):
    """name → (constructor(key), is_transformer)."""
    import geomlearn as gl

    dtype = settings["dtype"]
    vpt, vpff = settings["sizes"]["vpt"], settings["sizes"]["vpff"]
    return {
        "VPFF": (lambda k: gl.VolumePreservingFeedForward(3, **vpff, key=k, dtype=dtype), False),
        "VPT": (lambda k: gl.VolumePreservingTransformer(3, **vpt, key=k, dtype=dtype), True),
        "ST": (lambda k: gl.Transformer(3, n_heads=1, L=vpt["L"], n_blocks=vpt["n_blocks"],
                                        add_connection=False, key=k, dtype=dtype), True),
        "VPT+PE": (lambda k: gl.VolumePreservingTransformer(
            3, **vpt, positional_encoding=True, key=k, dtype=dtype), True),
        "VPT-arb": (lambda k: gl.VolumePreservingTransformer(
            3, **vpt, weighting="arbitrary", key=k, dtype=dtype), True),
    }


def _n_params(model) -> int:
    import equinox as eqx
    import jax

    return sum(a.size for a in jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array)))


def relative_loss(model, data, task_kw) -> float:
    """The relative loss of `fit` on the whole data set, from the library's loss and the
    model protocol."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    from geomlearn.training import resolve_loss

    task = model.task(**task_kw)
    x, y, task = model.training_samples(data, task)
    loss = resolve_loss("relative")

    @eqx.filter_jit
    def full(m, x, y):
        pred = jax.vmap(lambda s: m.predict(s, task))(x)
        target = jax.vmap(lambda s: m.target(s, task))(y)
        flat = target.reshape(target.shape[0], -1)
        return loss(pred, target, jnp.mean(jnp.sum(jnp.square(flat), axis=1)))

    return float(full(model, x, y))


class _Run:
    """The clock, the loss curve and the progress log of one network's training."""

    def __init__(self, name, budget, *, stop_at=None, log=None):
        self.name, self.budget, self.stop_at, self.log = name, budget, stop_at, log
        self.start: float | None = None  # the clock starts with the first fit
        self.curve: list[list] = []  # [seconds, loss, phase]
        self.phases: dict[str, dict] = {}
        self.last_model = None
        self._logged = -math.inf

    def elapsed(self) -> float:
        return 0.0 if self.start is None else time.perf_counter() - self.start

    def remaining(self) -> float:
        """Seconds left (at least a millisecond: `fit` always runs one epoch)."""
        return max(self.budget - self.elapsed(), 1e-3)

    def fit(self, phase, model, data, **kwargs):
        """`geomlearn.fit` on the clock; appends its history to the curve."""
        import geomlearn as gl

        if self.start is None:
            self.start = time.perf_counter()
        offset = self.elapsed()
        n0 = len(self.curve)
        self.last_model, seen = model, {}

        def callback(epoch, m, history):
            self.last_model, seen["history"] = m, history
            t, loss = offset + history["time"][-1], history["loss"][-1]
            if self.log is not None and t - self._logged >= 10.0:
                self._logged = t
                self.log(f"  {self.name:16s} {t:7.1f} s  {phase:6s} epoch {epoch:6d}  "
                         f"loss {loss:.4e}")
            return self.stop_at is not None and loss <= self.stop_at

        stopped = None
        try:
            model, history = gl.fit(model, data, callback=callback, progress=False, **kwargs)
        except gl.NonFiniteLossError as exc:  # keep the last good model and its history
            model, history, stopped = self.last_model, seen.get("history"), str(exc)
        if history is not None:
            self.curve += [[offset + t, loss, phase]
                           for t, loss in zip(history["time"], history["loss"])]
        record = self.phases.setdefault(phase, {"epochs": 0, "stopped": None})
        record.update(epochs=record["epochs"] + len(self.curve) - n0, end_s=self.elapsed())
        record["stopped"] = record["stopped"] or stopped
        return model


def _train(run: _Run, model, data, trainer, settings, task_kw, key):
    import jax

    import geomlearn as gl

    keys = jax.random.split(key, 3)
    if trainer in ("lm", "gn"):
        make = gl.LevenbergMarquardt if trainer == "lm" else gl.GaussNewton
        solver = make(subset=settings["lm_subset"], chunk_size=settings["lm_chunk"])
        return run.fit(trainer, model, data, epochs=10**7, optimizer=solver,
                       time_budget=run.remaining(), key=keys[0], **task_kw)
    adam_end = run.budget * (settings["adam_fraction"] if trainer == "adam-lbfgs" else 1.0)
    common = dict(batch_size=settings["adam_batch"], key=keys[0], **task_kw)
    # two epochs on the clock time an epoch; then the default schedule over what fits
    model = run.fit("adam", model, data, epochs=2, **common)
    times = [c[0] for c in run.curve]
    epoch_s = times[-1] - times[-2] if len(times) >= 2 else times[-1]
    left = adam_end - run.elapsed()
    if left > 0:
        planned = max(1, int(left / max(epoch_s, 1e-9)))
        model = run.fit("adam", model, data, epochs=planned, time_budget=left,
                        **{**common, "key": keys[1]})
        run.phases["adam"]["planned_epochs"] = planned
    if trainer == "adam-lbfgs":
        import optax

        lbfgs = optax.lbfgs(learning_rate=settings["lbfgs_lr"], linesearch=None,
                            memory_size=settings["lbfgs_memory"])
        model = run.fit("lbfgs", model, data, epochs=10**7, optimizer=lbfgs,
                        time_budget=run.remaining(), key=keys[2], **task_kw)
    return model


def _first_time(curve, level):
    return next((t for t, loss, _ in curve if loss <= level), None)


def _figure(path, networks: dict, settings) -> str | None:
    """Draw the curves to `path` (`None` without matplotlib: `pip install geomlearn[plot]`)."""
    try:
        import matplotlib
    except ImportError:
        return None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    for name, net in networks.items():
        curve = [(t, loss) for t, loss, _ in net["curve"] if math.isfinite(loss) and loss > 0]
        if curve:
            ax.plot(*zip(*curve), ".-", label=f"{name} ({net['trainer']})", lw=1.2, ms=2.5)
    ax.axhline(TARGET_LOSS, color="gray", ls="--", lw=0.8)
    ax.axvline(settings["budget_s"], color="gray", ls=":", lw=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("wall time (s), compilation included")
    ax.set_ylabel("relative training loss")
    ax.set_title("Rigid body: loss against wall time (geomlearn.fit)", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both", lw=0.4)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path.name


def measure(settings: dict, ctx) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    import geomlearn as gl
    from geomlearn.integrators import integrate

    data = gl.datasets.rigid_body_vpt()
    if ctx.quick:  # a few trajectories, a short horizon
        data = gl.TrajectoryData(np.asarray(data.states)[::100, :21], data.dt)
    dtype = settings["dtype"]
    data = gl.TrajectoryData(jnp.asarray(np.asarray(data.states), dtype=dtype), data.dt)
    dt, n_val = float(data.dt), settings["validation_steps"]
    system = gl.systems.RigidBody()
    z0 = jnp.asarray(np.asarray(gl.datasets.rigid_body_vpt_validation()), dtype=dtype)
    reference = integrate(system, z0, dt, n_val, method="implicit_midpoint")
    horizons = sorted({settings["validation_short"], n_val})

    constructors = _models(settings)
    seeds = {name: i for i, name in enumerate(constructors)}  # one initial VPT for all VPTs
    networks = {}
    for name in settings["networks"]:
        model_name, trainer, budget_key = NETWORKS[name]
        make, is_transformer = constructors[model_name]
        model = make(jax.random.PRNGKey(10 + seeds[model_name]))
        task_kw = {"seq_length": T, "prediction_window": T} if is_transformer else {}
        budget = float(settings[budget_key])
        ctx.log(f"{name}: {type(model).__name__}, {_n_params(model)} parameters, {trainer}, "
                f"budget {budget:g} s")
        initial_loss = relative_loss(model, data, task_kw)
        run = _Run(name, budget, log=ctx.log,
                   stop_at=TARGET_LOSS if name in settings["stop_at_target"] else None)
        trained = _train(run, model, data, trainer, settings, task_kw,
                         jax.random.PRNGKey(100 + seeds[model_name]))
        wall = run.elapsed()
        loss = relative_loss(trained, data, task_kw)
        saved = ctx.out / f"rigid_body_{name.replace('+', '-')}.geomlearn"
        gl.save(saved, trained)
        metrics = gl.evaluate(trained, system, reference, dt=dt, horizons=horizons, **task_kw)
        networks[name] = {
            "model": type(trained).__name__,
            "config": {k: str(v) for k, v in trained.config().items()},
            "n_params": _n_params(trained),
            "trainer": trainer,
            "budget_s": budget,
            "stop_at_target": name in settings["stop_at_target"],
            "initial_loss": initial_loss,
            "loss": loss,
            "wall_s": wall,
            "time_to_target_s": _first_time(run.curve, TARGET_LOSS),
            "epochs": len(run.curve),
            "phases": run.phases,
            "curve": run.curve,
            "validation": {k: metrics[k] for k in ("trajectory_error", "invariant_drift")},
            "saved_model": saved.name,
        }
        ctx.log(f"  {name}: loss {loss:.3e} after {wall:.1f} s")
    figure = _figure(ctx.out / FIGURE, networks, settings)
    return {"networks": networks, "figure": figure, "horizons": horizons}


# ------------------------------------------------------------------------------ report


def _rows(settings, results):
    h = [str(k) for k in results["horizons"]]
    rows = []
    for name, net in results["networks"].items():
        val = net["validation"]
        rows.append({
            "name": name, "trainer": net["trainer"], "n_params": net["n_params"],
            "budget_s": net["budget_s"], "loss": net["loss"], "wall_s": net["wall_s"],
            "time_to_target_s": net["time_to_target_s"], "paper": PAPER.get(name),
            "epochs": " + ".join(f"{p['epochs']} {k}" for k, p in net["phases"].items()),
            "err_short": val["trajectory_error"][h[0]],
            "err_long": val["trajectory_error"][h[-1]],
            "casimir": val["invariant_drift"].get("casimir"),
            "energy": val["invariant_drift"].get("energy"),
        })
    return rows


def _curve_rows(settings, results):
    rows = []
    for name, net in results["networks"].items():
        curve = [(t, loss) for t, loss, _ in net["curve"]]
        row = {"name": name, "trainer": net["trainer"]}
        for i, value in enumerate(loss_at_times(curve, settings["curve_times"])):
            row[f"at_{i}"] = value
        rows.append(row)
    return rows


def _targets(settings, results):
    targets = []
    for name in ("VPT", "VPFF"):
        net = results["networks"].get(name)
        if net is None or net["trainer"] != "lm":
            continue
        t = net["time_to_target_s"]
        met = t is not None and t <= TARGET_S
        note = (f"reached at {t:.0f} s" if t is not None
                else f"{net['loss']:.3e} after {net['wall_s']:.0f} s")
        targets.append(C.target(
            f"{name} ({net['n_params']} parameters), Levenberg-Marquardt through fit: time "
            "to relative training loss 5e-4", "≤ 180 s", t, met, "s", note=note))
    return targets


def _notes(settings, results):
    notes = []
    for name, net in results["networks"].items():
        for phase, p in net["phases"].items():
            if p["stopped"]:
                notes.append(f"{name}, {phase}: stopped by a non-finite loss (the last good "
                             f"model is kept): {p['stopped'].splitlines()[0]}")
    notes.append(f"figure: {results['figure']} (loss against wall time)" if results["figure"]
                 else "no figure: matplotlib is not installed (pip install geomlearn[plot])")
    return notes


SPEC = Benchmark(
    name="rigid_body",
    description="rigid-body reproduction through geomlearn.fit: VPT and VPFF by "
    "Levenberg-Marquardt to 5e-4 within 180 s; LM vs Gauss-Newton, Adam, Adam + L-BFGS",
    full=FULL,
    quick=QUICK,
    measure=measure,
    tables=(
        Table("Rigid body, {dtype}, T=pw=3 (VPFF: pairs); validation: 2 paper initial "
              "conditions, {validation_steps} steps", (
                  Column("name", "network"),
                  Column("trainer", "trainer"),
                  Column("n_params", "params", "d"),
                  Column("budget_s", "budget (s)", ".0f"),
                  Column("loss", "train loss", ".3e"),
                  Column("wall_s", "wall (s)", ".0f"),
                  Column("time_to_target_s", "≤5e-4 at (s)", ".0f"),
                  Column("paper", "paper", ".0e"),
                  Column("epochs", "iterations / epochs"),
                  Column("err_short", "val rel. error ({validation_short} steps)", ".2e"),
                  Column("err_long", "val rel. error ({validation_steps} steps)", ".2e"),
                  Column("casimir", "Casimir drift", ".2e"),
                  Column("energy", "energy drift", ".2e"),
              ), rows=_rows),
        Table("Relative training loss at fixed wall times (fit's history; see the docstring)", (
            Column("name", "network"),
            Column("trainer", "trainer"),
            *(Column(f"at_{i}", f"{{curve_times[{i}]}} s", ".2e")
              for i in range(len(FULL["curve_times"]))),
        ), rows=_curve_rows),
    ),
    targets=_targets,
    notes=_notes,
    options=OPTIONS,
)
NAME, DESCRIPTION = SPEC.name, SPEC.description
add_arguments, run = SPEC.add_arguments, SPEC.run
