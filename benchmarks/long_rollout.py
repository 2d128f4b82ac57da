r"""Long rollouts of the transformer integrators and the Lie–Poisson network.

How far does a trained integrator's rollout stay bounded and faithful, and does training
on several iterated windows of its own rollout (`geomlearn.models.multistep.MultiStep`)
help? Every network is trained by `geomlearn.fit` with
`optimizer=geomlearn.LevenbergMarquardt(...)` (the second-order training, which stops
when it stalls) for at most the same budget of **CPU time of the benchmark process**
(`time.process_time()`, compilation included, checked after every iteration by `fit`'s
callback; `budget_s`), from the same initial parameters for every variant of a family.
CPU time rather than wall time because the machine the recorded run used was shared with
other jobs, which would have made equal wall times unequal work; `wall_cap` × the budget
caps the wall time.

| family | system and data | model | `T = pw` |
|---|---|---|---|
| VPT | rigid body, `datasets.rigid_body_vpt()` (every `rigid_body_every`-th of the paper's 1238 trajectories) | `VolumePreservingTransformer(3, n_blocks=2, L=3)` (162 parameters) | 3 |
| LPNet | the same | `LiePoissonNet(3, **defaults)` with the command line's defaults (`geomlearn train --model lpnet`) | — |
| LPNet-CLI | the command line's rigid-body recipe (64 of the 1238 trajectories, 80 % for training) | the same, trained as `geomlearn train --system rigid_body --model lpnet --x64` trains it (its keys and `choose_trainer`: LM, up to 500 iterations or 150 s, stopping when it stalls) | — |
| SymT | coupled oscillator, `datasets.coupled_oscillator_lst(PRNGKey(0))` | `SymplecticTransformer(4, n_sympnet=2, width=4, L=1)` | 4 |
| LST | the same | `LinearSymplecticTransformer(4, 4, n_sympnet=2, width=4, L=1)` | 4 |
| ST | the same | `Transformer(4, n_heads=2, L=1, n_blocks=2)` | 4 |

Variants (the training loss; `k` windows of `pw` states each, or `k` steps of a point
map):

- `k=1`: the plain loss, $\|\hat Z_{t+1} - Z_{t+1}\| / \|Z_{t+1}\|$ over one window;
- `k=2`, `k=4`: `MultiStep(model, k)` — the model is iterated $k$ times from each window
  and all $k$ predicted windows are compared with the data (see `MultiStep`);
- `k=1+4`: the plain loss for `warm_fraction` of the budget, then `k=4` for the rest.

**Measured.** From each validation initial state the model is rolled out for
`n_points` steps (10⁵ in the full run) by `geomlearn.evaluate(..., horizon=n_points)`,
which streams the rollout (see `geomlearn.evaluation.long_horizon`): the *escape step*
of a rollout is the first state that is not finite or has
$|\hat z_t| > 10 \times \max |z|$ over the training data; the *valid time* the first step
whose relative error against the reference solution (Gauss–Legendre of order 6 with the
data's step, from the last given state) exceeds 0.1; per invariant (the energy and, for
the rigid body, the Casimir $|z|^2$) the *max drift*
$\max_t |I(\hat z_t) - I(z_0)| / \max_i |I(z^i_0)|$ over the states before an escape,
and the *secular trend*, the slope of the least-squares line through that relative
deviation, per 10⁴ steps. "Median escape" counts bounded rollouts as beyond the
horizon (none unless half escaped). *Validation error*: `geomlearn.evaluate`'s relative
trajectory error against the implicit midpoint rule over `val_short` and `val_long`
steps. *Train loss*: the one-step relative loss of the returned model on the whole
training set (the same measure for every variant).

Validation initial states: rigid body — the paper's two, $(\sin 1.1, 0, \cos 1.1)$ and
$(0, \sin 1.1, \cos 1.1)$ (on the training grid), plus `n_extra` random points of the
unit sphere (not on it); coupled oscillator — `n_val` new points of $[0, 1)^4$ from the
key the `coupled_oscillator_lst` benchmark validates with. One seed of initialisation.
"""

from __future__ import annotations

import time

from ._harness import Benchmark, Column, Option, Table

FAMILIES = ("VPT", "LPNet", "LPNet-CLI", "SymT", "LST", "ST")
VARIANTS = ("k=1", "k=2", "k=4", "k=1+4")
#: the initialisation seed offset of each family (fixed, whichever subset runs)
SEED_INDEX = {"VPT": 0, "SymT": 1, "LST": 2, "ST": 3, "LPNet": 4, "LPNet-CLI": 5}
SYSTEM = {"VPT": "rigid body", "LPNet": "rigid body", "LPNet-CLI": "rigid body", "SymT": "coupled oscillator",
          "LST": "coupled oscillator", "ST": "coupled oscillator"}


def _every(value):
    return {f: value for f in FAMILIES}


FULL = {
    "dtype": "float64",
    "families": list(FAMILIES),
    "variants": list(VARIANTS),
    "sizes": "paper",
    "data": "rigid body: every 2nd of the paper's trajectories; oscillator: all",
    "budget_s": {"VPT": 40.0, "LPNet": 40.0, "LPNet-CLI": None, "SymT": 15.0, "LST": 15.0,
                 "ST": 15.0},
    "wall_cap": 10.0,
    "warm_fraction": 0.5,
    "rigid_body_every": 2,
    "lm_subset": {"VPT": 4096, "LPNet": 4096, "LPNet-CLI": None, "SymT": None, "LST": None,
                  "ST": None},
    "lm_chunk": 2048,
    "n_points": 100_000,
    "early": 1000,
    "n_extra": 6,
    "n_val": 5,
    "val_short": {"VPT": 100, "LPNet": 100, "LPNet-CLI": 100, "SymT": 30, "LST": 30, "ST": 30},
    "val_long": {"VPT": 500, "LPNet": 500, "LPNet-CLI": 500, "SymT": 300, "LST": 300, "ST": 300},
    "seed": 0,
}
QUICK = {
    "dtype": "float64",
    # smoke test only: tiny networks, a few short trajectories, a second of training
    "families": ["LST", "LPNet", "LPNet-CLI"],
    "variants": ["k=1", "k=2"],
    "sizes": "tiny",
    "data": "every 200th rigid-body trajectory, 20 steps; 2 oscillator trajectories, 40 steps",
    "budget_s": {**_every(0.5), "LPNet-CLI": None},
    "wall_cap": 10.0,
    "warm_fraction": 0.5,
    "rigid_body_every": 200,
    "lm_subset": {"VPT": 64, "LPNet": 64, "LPNet-CLI": None, "SymT": None, "LST": None,
                  "ST": None},
    "lm_chunk": 64,
    "n_points": 100,
    "early": 50,
    "n_extra": 1,
    "n_val": 2,
    "val_short": _every(5),
    "val_long": _every(20),
    "seed": 0,
}


def _list_of(valid):
    def convert(text: str) -> list[str]:
        names = [n.strip() for n in text.split(",") if n.strip()]
        for n in names:
            if n not in valid:
                raise ValueError(f"unknown name {n!r}; valid: {', '.join(valid)}")
        return names

    return convert


def _per_family(text: str) -> dict:
    return {**_every(float(text)), "LPNet-CLI": None}


OPTIONS = (
    Option("--families", str, f"comma-separated subset of {','.join(FAMILIES)}",
           convert=_list_of(FAMILIES)),
    Option("--variants", str, f"comma-separated subset of {','.join(VARIANTS)}",
           convert=_list_of(VARIANTS)),
    Option("--budget-s", float, "training budget of every network, CPU seconds of the "
           "process (default: VPT and LPNet 40, the others 15)", convert=_per_family),
    Option("--n-points", int, "steps per rollout (default 100000)"),
    Option("--seed", int, "initialisation seed (default 0)"),
)


# ------------------------------------------------------------------------- measurement


def lpnet_defaults() -> dict:
    """The constructor arguments `geomlearn train --model lpnet` uses."""
    from geomlearn.cli._registry import MODELS

    return dict(MODELS["lpnet"].defaults)


def _model(family: str, sizes: str, key, dtype):
    """`(model, T)`: the initial network of a family (`T = None` for a point map)."""
    import geomlearn as gl

    tiny = sizes == "tiny"
    if family == "VPT":
        kw = {"n_blocks": 1, "L": 1} if tiny else {"n_blocks": 2, "L": 3}
        return gl.VolumePreservingTransformer(3, **kw, key=key, dtype=dtype), 3
    if family == "LPNet":
        kw = {"n_layers": 2, "width": 1} if tiny else lpnet_defaults()
        return gl.LiePoissonNet(3, **kw, key=key, dtype=dtype), None
    kw = {"n_sympnet": 1, "width": 2} if tiny else {"n_sympnet": 2, "width": 4}
    if family == "SymT":
        return gl.SymplecticTransformer(4, **kw, L=1, key=key, dtype=dtype), 4
    if family == "LST":
        return gl.LinearSymplecticTransformer(4, 4, **kw, L=1, key=key, dtype=dtype), 4
    if family == "ST":
        kw = {"n_heads": 1, "n_blocks": 1} if tiny else {"n_heads": 2, "n_blocks": 2}
        return gl.Transformer(4, **kw, L=1, key=key, dtype=dtype), 4
    raise ValueError(f"unknown family {family!r}; valid: {', '.join(FAMILIES)}")


def validation_states(settings):
    """The rigid body's validation initial states `(2 + n_extra, 3)` (NumPy float64): the
    paper's two, then `n_extra` random points of the unit sphere."""
    import numpy as np

    import geomlearn as gl

    paper = np.asarray(gl.datasets.rigid_body_vpt_validation(), np.float64)
    rng = np.random.default_rng(1000 + settings["seed"])
    extra = rng.standard_normal((settings["n_extra"], 3))
    extra /= np.linalg.norm(extra, axis=1, keepdims=True)
    return np.concatenate([paper, extra])


def _problem(system_name: str, quick: bool, settings, dtype):
    """`(system, data, validation initial conditions)`."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import geomlearn as gl

    if system_name == "rigid body":
        system = gl.systems.RigidBody()
        data = gl.datasets.rigid_body_vpt()
        every = settings["rigid_body_every"]
        data = gl.TrajectoryData(np.asarray(data.states)[::every, : 21 if quick else None],
                                 data.dt)
        z0 = validation_states(settings)
    else:
        system = gl.systems.CoupledHarmonicOscillator()
        data_key, val_key = jax.random.split(jax.random.PRNGKey(0))
        data = gl.datasets.coupled_oscillator_lst(data_key)
        if quick:
            data = gl.TrajectoryData(np.asarray(data.states)[:2, :41], data.dt)
        z0 = np.asarray(jax.random.uniform(val_key, (settings["n_val"], 4), dtype=jnp.float64))
    data = gl.TrajectoryData(jnp.asarray(np.asarray(data.states), dtype=dtype), data.dt)
    return system, data, jnp.asarray(z0, dtype=dtype)


def _n_params(model) -> int:
    import equinox as eqx
    import jax

    return sum(a.size for a in jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array)))


def _task_kw(T) -> dict:
    """The window options of `fit`/`evaluate`: none for a point map."""
    return {} if T is None else {"seq_length": T, "prediction_window": T}


def _train(model, data, variant, budget, settings, family, T, key):
    """`(trained model, LM iterations, CPU seconds, wall seconds)` of one variant."""
    import jax

    import geomlearn as gl
    from geomlearn.models.multistep import MultiStep

    solver = gl.LevenbergMarquardt(subset=settings["lm_subset"][family],
                                   chunk_size=settings["lm_chunk"])
    common = dict(epochs=10**7, optimizer=solver, progress=False, **_task_kw(T))
    k1, k2 = jax.random.split(key)
    t0, c0 = time.perf_counter(), time.process_time()
    phases = ([(1, budget * settings["warm_fraction"]), (4, budget)] if variant == "k=1+4"
              else [(int(variant[2:]), budget)])
    iterations = 0
    for (k, until), phase_key in zip(phases, (k1, k2)):
        # the budget is this process's CPU time (compilation included), checked after
        # every iteration: the machine is shared, so wall time would measure the others
        def over(*_, until=until):
            return time.process_time() - c0 >= until

        if over():
            continue
        wrapped = model if k == 1 else MultiStep(model, k)
        try:
            trained, history = gl.fit(wrapped, data, callback=over, key=phase_key,
                                      time_budget=settings["wall_cap"] * budget, **common)
        except gl.NonFiniteLossError:  # LM rejects non-finite trials; should not happen
            trained, history = wrapped, {"loss": []}
        model = trained.model if k > 1 else trained
        iterations += len(history["loss"])
    return model, iterations, time.process_time() - c0, time.perf_counter() - t0


def _train_cli(system, settings, quick):
    """`(trained model, LM iterations, CPU seconds, wall seconds)` of the Lie–Poisson
    network as `geomlearn train --system rigid_body --model lpnet` trains it: the command
    line's data recipe, model defaults, keys and trainer (`choose_trainer`: LM, up to 500
    iterations or 150 s, stopping when it stalls)."""
    import jax

    import geomlearn as gl
    from geomlearn.cli._recipes import for_system
    from geomlearn.cli._registry import MODELS

    k_model, k_fit = jax.random.split(jax.random.PRNGKey(settings["seed"]))
    train, held_out, _ = for_system("rigid_body", system, n_trajectories=5 if quick else None,
                                    seed=settings["seed"], dtype=settings["dtype"])
    tiny = {"n_layers": 2, "width": 1} if quick else {}
    model = MODELS["lpnet"].build(3, key=k_model, **tiny)
    x, _, _ = model.training_samples(train, model.task())
    solver, epochs, budget, _ = gl.choose_trainer(model, int(x.shape[0]),
                                                  epochs=2 if quick else None)
    t0, c0 = time.perf_counter(), time.process_time()
    trained, history = gl.fit(model, train, val_data=held_out, epochs=epochs, optimizer=solver,
                              time_budget=budget, key=k_fit, progress=False)
    return trained, len(history["loss"]), time.process_time() - c0, time.perf_counter() - t0


def _early_drift(long, early: int) -> dict:
    """Per invariant, the largest running max drift over the rollouts at the last
    sampled step `≤ early` (`None` if every rollout had escaped by then)."""
    import numpy as np

    at = np.flatnonzero(long.steps <= early)
    if not at.size:
        return {}
    i = at[-1]
    out = {"step": int(long.steps[i])}
    for name, series in long.max_drift.items():
        col = series[:, i]
        out[name] = float(np.nanmax(col)) if np.isfinite(col).any() else None
    return out


def _measure_one(family, variant, problem, settings, ctx, fi):
    """The record of one trained network: training, validation and long horizon."""
    import jax
    import numpy as np

    import geomlearn as gl

    from .rigid_body import relative_loss

    system, data, z0, reference, bound = problem
    dt = float(data.dt)
    short, long = settings["val_short"][family], settings["val_long"][family]
    if family == "LPNet-CLI":  # the command line's data, model and trainer
        ctx.log(f"{family}: geomlearn train --system rigid_body --model lpnet")
        T = None
        trained, iterations, cpu, wall = _train_cli(system, settings, ctx.quick)
    else:
        budget = float(settings["budget_s"][family])
        init, T = _model(family, settings["sizes"],
                         jax.random.PRNGKey(100 * settings["seed"] + fi), settings["dtype"])
        ctx.log(f"{family} {variant}: {_n_params(init)} parameters, budget {budget:g} s")
        trained, iterations, cpu, wall = _train(
            init, data, variant, budget, settings, family, T,
            jax.random.PRNGKey(1000 + 100 * settings["seed"] + fi))
    task_kw = _task_kw(T)
    train_loss = relative_loss(trained, data, task_kw)
    metrics = gl.evaluate(trained, system, reference, dt=dt, horizons=[short, long],
                          horizon=settings["n_points"], bound=bound, **task_kw)
    lh = metrics["long_horizon"]
    escaped = [e for e in lh["escape_step"] if e is not None]
    record = {
        "family": family, "system": SYSTEM[family], "variant": variant,
        "model": type(trained).__name__, "n_params": _n_params(trained),
        "iterations": iterations, "train_cpu_s": cpu, "train_wall_s": wall,
        "train_loss": train_loss,
        "val_short": metrics["trajectory_error"][str(short)],
        "val_long": metrics["trajectory_error"][str(long)],
        "first_escape": min(escaped) if escaped else None,
        "long_horizon": lh, "rollout_s": lh["seconds"],
        "early_drift": _early_drift(metrics.long_horizon, settings["early"]),
        "structure_residual": metrics["structure_residual"],
        "data_bound": bound, "n_initial": int(np.asarray(z0).shape[0]),
    }
    ctx.log(f"  loss {train_loss:.3e}, val {record['val_long']:.3e}, escaped "
            f"{lh['n_escaped']}/{lh['n_trajectories']} (first {record['first_escape']}), "
            f"{iterations} iterations in {cpu:.1f} CPU s ({wall:.1f} s wall), "
            f"rollout {lh['seconds']:.1f} s")
    return record


def measure(settings: dict, ctx) -> dict:
    import numpy as np

    from geomlearn.integrators import integrate

    problems, runs = {}, []
    for family in settings["families"]:
        name = SYSTEM[family]
        if name not in problems:
            system, data, z0 = _problem(name, ctx.quick, settings, settings["dtype"])
            longest = max(settings["val_long"][f] for f in settings["families"]
                          if SYSTEM[f] == name)
            reference = integrate(system, z0, float(data.dt), longest,
                                  method="implicit_midpoint")
            bound = float(np.max(np.linalg.norm(np.asarray(data.states, np.float64), axis=-1)))
            problems[name] = (system, data, z0, reference, bound)
        # the command line's training has no variants: it runs once, as "k=1"
        variants = (["k=1"] if "k=1" in settings["variants"] else []) if family == "LPNet-CLI" \
            else settings["variants"]
        for variant in variants:
            runs.append(_measure_one(family, variant, problems[name], settings, ctx,
                                     SEED_INDEX[family]))
    return {"runs": runs}


# ------------------------------------------------------------------------------ report


def _invariant(r, name, field):
    inv = r["long_horizon"]["invariants"].get(name)
    return None if inv is None else inv[field]


def _beyond(value, settings):
    return value if value is not None else f"> {settings['n_points']}"


def _rows(settings, results):
    rows = []
    for r in results["runs"]:
        lh = r["long_horizon"]
        rows.append({
            "family": r["family"], "variant": r["variant"], "iterations": r["iterations"],
            "train_cpu_s": r["train_cpu_s"], "train_wall_s": r["train_wall_s"],
            "train_loss": r["train_loss"],
            "val_short": r["val_short"], "val_long": r["val_long"],
            "escaped": f"{lh['n_escaped']}/{lh['n_trajectories']}",
            "first_escape": _beyond(r["first_escape"], settings),
            "median_escape": _beyond(lh["median_escape_step"], settings),
            "median_valid": _beyond(lh["median_valid_time"], settings),
            "energy_drift": _invariant(r, "energy", "worst_max_drift"),
            "energy_trend": _invariant(r, "energy", "worst_trend"),
            "casimir_early": r["early_drift"].get("casimir"),
            "casimir_drift": _invariant(r, "casimir", "worst_max_drift"),
            "casimir_trend": _invariant(r, "casimir", "worst_trend"),
        })
    return rows


def _title(settings, results):
    fams = ", ".join(f"{f} {settings['budget_s'][f]:g} s" for f in settings["families"]
                     if settings["budget_s"].get(f) is not None)
    return (f"Long rollouts ({settings['n_points']} steps), Levenberg-Marquardt within "
            f"{fams} of CPU time; k = windows in the training loss")


def _notes(settings, results):
    return [
        ("escape: a state not finite or |z| > 10 x the largest |z| of the training data; "
         "median escape counts bounded rollouts as beyond the horizon"),
        ("drift: max relative invariant deviation over the states before an escape, worst "
         "rollout; trend: slope of its least-squares line per 10^4 steps (largest |slope|); "
         f"Casimir (first): max drift within the first ~{settings['early']} steps"),
        ("valid time: first step with relative error > 0.1 against Gauss-Legendre 6; "
         "validation error: relative trajectory error against the implicit midpoint rule "
         "over val_short / val_long steps (rigid body: 100 / 500; oscillator: 30 / 300)"),
        "k=1+4: plain loss for warm_fraction of the budget, then the 4-window loss",
        ("LPNet-CLI: trained as `geomlearn train --system rigid_body --model lpnet` trains it "
         "(its data recipe, 64 of the 1238 trajectories, and its trainer: LM up to 500 "
         "iterations or 150 s wall, stopping when it stalls); validated on the same states"),
    ]


def _run_of(results, family, variant="k=1"):
    return next((r for r in results["runs"]
                 if r["family"] == family and r["variant"] == variant), None)


def _lpnet_targets(settings, lp, vpt, family):
    """The goals of one Lie–Poisson network's run `lp` (against the VPT's run `vpt`)."""
    from ._common import target

    lh, n = lp["long_horizon"], settings["n_points"]
    energy = lh["invariants"]["energy"]
    casimir = lh["invariants"]["casimir"]["worst_max_drift"]
    trend, drift = energy["worst_trend"] or 0.0, energy["worst_max_drift"] or 0.0
    ratio = abs(trend) * n / lh["trend_steps"] / drift if drift else 0.0
    out = [
        target(f"{family} rollouts escaped within {n} steps", "0", lh["n_escaped"],
               lh["n_escaped"] == 0, f"of {lh['n_trajectories']}"),
        target(f"{family} Casimir |z|^2 max relative drift", "≤ 1e-12", casimir,
               casimir is not None and casimir <= 1e-12, note=settings["dtype"]),
        target(f"{family} energy max relative drift", "≤ 1e-2", drift, drift <= 1e-2),
        target(f"{family} energy trend x horizon / max drift (no secular drift)", "≤ 0.1",
               ratio, ratio <= 0.1),
    ]
    if vpt is not None:
        out.append(target(f"{family} / VPT {settings['val_long'][family]}-step validation "
                          "error", "≤ 1", lp["val_long"] / vpt["val_long"],
                          lp["val_long"] <= vpt["val_long"]))
    return out


def _targets(settings, results):
    """The Lie–Poisson networks' goals, measured on their `k=1` runs (and the VPT's)."""
    vpt, out = _run_of(results, "VPT"), []
    for family in ("LPNet", "LPNet-CLI"):
        lp = _run_of(results, family)
        if lp is not None:
            out.extend(_lpnet_targets(settings, lp, vpt, family))
    return out


SPEC = Benchmark(
    name="long_rollout",
    description="escapes and invariant drift of 1e5-step rollouts of VPT, LPNet, SymT, "
    "LST, ST after LM training; multi-step (k-window) training vs the one-window loss",
    full=FULL,
    quick=QUICK,
    measure=measure,
    tables=(
        Table(_title, (
            Column("family", "network"),
            Column("variant", "loss"),
            Column("iterations", "LM iter.", "d"),
            Column("train_cpu_s", "train CPU (s)", ".0f"),
            Column("train_wall_s", "wall (s)", ".0f"),
            Column("train_loss", "1-step train loss", ".2e"),
            Column("val_short", "val. error (short)", ".2e"),
            Column("val_long", "val. error (long)", ".2e"),
            Column("escaped", "escaped"),
            Column("first_escape", "first escape"),
            Column("median_escape", "median escape"),
            Column("median_valid", "median valid time"),
            Column("energy_drift", "energy drift", ".1e"),
            Column("energy_trend", "energy trend /1e4", ".1e"),
            Column("casimir_early", "Casimir drift (first)", ".1e"),
            Column("casimir_drift", "Casimir drift", ".1e"),
            Column("casimir_trend", "Casimir trend /1e4", ".1e"),
        ), rows=_rows),
    ),
    targets=_targets,
    notes=_notes,
    options=OPTIONS,
)
NAME, DESCRIPTION = SPEC.name, SPEC.description
add_arguments, run = SPEC.add_arguments, SPEC.run
