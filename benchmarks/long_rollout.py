r"""Long rollouts of the transformer integrators, and multi-step training.

How far does a trained transformer integrator's rollout stay bounded, and does training
on several iterated windows of its own rollout (`geomlearn.models.multistep.MultiStep`)
help? Every network is trained by `geomlearn.fit` with
`optimizer=geomlearn.LevenbergMarquardt(...)` (the second-order training) for the same
budget of **CPU time of the benchmark process** (`time.process_time()`, compilation
included, checked after every iteration by `fit`'s callback; `budget_s`), from the same
initial parameters for every variant of a family. CPU time rather than wall time because
the machine the recorded run used was shared with other jobs, which would have made
equal wall times unequal work; `wall_cap` × the budget caps the wall time.

| family | system and data | model | `T = pw` |
|---|---|---|---|
| VPT | rigid body, `datasets.rigid_body_vpt()` (every `rigid_body_every`-th of the paper's 1238 trajectories) | `VolumePreservingTransformer(3, n_blocks=2, L=3)` (162 parameters) | 3 |
| SymT | coupled oscillator, `datasets.coupled_oscillator_lst(PRNGKey(0))` | `SymplecticTransformer(4, n_sympnet=2, width=4, L=1)` | 4 |
| LST | the same | `LinearSymplecticTransformer(4, 4, n_sympnet=2, width=4, L=1)` | 4 |
| ST | the same | `Transformer(4, n_heads=2, L=1, n_blocks=2)` | 4 |

Variants (the training loss; `k` windows of `pw` states each):

- `k=1`: the plain loss, $\|\hat Z_{t+1} - Z_{t+1}\| / \|Z_{t+1}\|$ over one window;
- `k=2`, `k=4`: `MultiStep(model, k)` — the model is iterated $k$ times from each window
  and all $k$ predicted windows are compared with the data (see `MultiStep`);
- `k=1+4`: the plain loss for `warm_fraction` of the budget, then `k=4` for the rest.

**Measured.** From each validation initial state the model is rolled out with
`geomlearn.iterate` for `n_points` states (10⁵ in the full run; the first `T` states are
the reference's). The *bounded horizon* of one rollout is the index of the first state
$\hat z_t$ that is not finite or has $|\hat z_t| > $ `bound_factor` $\times \max |z|$
over the training data (10×); "escaped" counts the rollouts that left the bound within
`n_points` states, "first escape" is the smallest such index. *Invariant drift* at a
horizon $h$: $\max_{t < h, i} |I(\hat z^i_t) - I(z^i_0)| / \max_i |I(z^i_0)|$ (infinite once
a state is not finite), for the energy and, for the rigid body, the Casimir $|z|^2$.
*Validation error*: `geomlearn.evaluate`'s relative trajectory error against the implicit
midpoint rule over `val_short` and `val_long` steps. *Train loss*: the one-step relative
loss of the returned model on the whole training set (the same measure for every variant).

Validation initial states: rigid body — the paper's two, $(\sin 1.1, 0, \cos 1.1)$ and
$(0, \sin 1.1, \cos 1.1)$ (on the training grid), plus `n_extra` random points of the
unit sphere (not on it); coupled oscillator — `n_val` new points of $[0, 1)^4$ from the
key the `coupled_oscillator_lst` benchmark validates with. One seed of initialisation.
"""

from __future__ import annotations

import math
import time

from ._harness import Benchmark, Column, Option, Table

FAMILIES = ("VPT", "SymT", "LST", "ST")
VARIANTS = ("k=1", "k=2", "k=4", "k=1+4")
SYSTEM = {"VPT": "rigid body", "SymT": "coupled oscillator", "LST": "coupled oscillator",
          "ST": "coupled oscillator"}

FULL = {
    "dtype": "float64",
    "families": list(FAMILIES),
    "variants": list(VARIANTS),
    "sizes": "paper",
    "data": "rigid body: every 2nd of the paper's trajectories; oscillator: all",
    "budget_s": {"VPT": 40.0, "SymT": 15.0, "LST": 15.0, "ST": 15.0},
    "wall_cap": 10.0,
    "warm_fraction": 0.5,
    "rigid_body_every": 2,
    "lm_subset": {"VPT": 4096, "SymT": None, "LST": None, "ST": None},
    "lm_chunk": 2048,
    "n_points": 100_000,
    "drift_horizons": [1000, 10_000, 100_000],
    "bound_factor": 10.0,
    "n_extra": 6,
    "n_val": 5,
    "val_short": {"VPT": 100, "SymT": 30, "LST": 30, "ST": 30},
    "val_long": {"VPT": 500, "SymT": 300, "LST": 300, "ST": 300},
    "seed": 0,
}
QUICK = {
    "dtype": "float64",
    # smoke test only: tiny networks, a few short trajectories, a second of training
    "families": ["LST"],
    "variants": ["k=1", "k=2"],
    "sizes": "tiny",
    "data": "every 200th rigid-body trajectory, 20 steps; 2 oscillator trajectories, 40 steps",
    "budget_s": {"VPT": 0.5, "SymT": 0.5, "LST": 0.5, "ST": 0.5},
    "wall_cap": 10.0,
    "warm_fraction": 0.5,
    "rigid_body_every": 200,
    "lm_subset": {"VPT": 64, "SymT": None, "LST": None, "ST": None},
    "lm_chunk": 64,
    "n_points": 100,
    "drift_horizons": [50, 100],
    "bound_factor": 10.0,
    "n_extra": 1,
    "n_val": 2,
    "val_short": {"VPT": 5, "SymT": 5, "LST": 5, "ST": 5},
    "val_long": {"VPT": 20, "SymT": 20, "LST": 20, "ST": 20},
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
    value = float(text)
    return {f: value for f in FAMILIES}


OPTIONS = (
    Option("--families", str, f"comma-separated subset of {','.join(FAMILIES)}",
           convert=_list_of(FAMILIES)),
    Option("--variants", str, f"comma-separated subset of {','.join(VARIANTS)}",
           convert=_list_of(VARIANTS)),
    Option("--budget-s", float, "training budget of every network, CPU seconds of the "
           "process (default: VPT 40, the others 15)", convert=_per_family),
    Option("--n-points", int, "states per rollout (default 100000)"),
    Option("--seed", int, "initialisation seed (default 0)"),
)


# ------------------------------------------------------------------------- measurement


def _model(family: str, sizes: str, key, dtype):
    import geomlearn as gl

    tiny = sizes == "tiny"
    if family == "VPT":
        kw = {"n_blocks": 1, "L": 1} if tiny else {"n_blocks": 2, "L": 3}
        return gl.VolumePreservingTransformer(3, **kw, key=key, dtype=dtype), 3
    kw = {"n_sympnet": 1, "width": 2} if tiny else {"n_sympnet": 2, "width": 4}
    if family == "SymT":
        return gl.SymplecticTransformer(4, **kw, L=1, key=key, dtype=dtype), 4
    if family == "LST":
        return gl.LinearSymplecticTransformer(4, 4, **kw, L=1, key=key, dtype=dtype), 4
    if family == "ST":
        kw = {"n_heads": 1, "n_blocks": 1} if tiny else {"n_heads": 2, "n_blocks": 2}
        return gl.Transformer(4, **kw, L=1, key=key, dtype=dtype), 4
    raise ValueError(f"unknown family {family!r}; valid: {', '.join(FAMILIES)}")


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
        paper = np.asarray(gl.datasets.rigid_body_vpt_validation(), np.float64)
        rng = np.random.default_rng(1000 + settings["seed"])
        extra = rng.standard_normal((settings["n_extra"], 3))
        extra /= np.linalg.norm(extra, axis=1, keepdims=True)
        z0 = np.concatenate([paper, extra])
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


def _train(model, data, variant, budget, settings, family, T, key):
    """`(trained model, LM iterations, CPU seconds, wall seconds)` of one variant."""
    import jax

    import geomlearn as gl
    from geomlearn.models.multistep import MultiStep

    solver = gl.LevenbergMarquardt(subset=settings["lm_subset"][family],
                                   chunk_size=settings["lm_chunk"])
    common = dict(epochs=10**7, optimizer=solver, seq_length=T, prediction_window=T,
                  progress=False)
    k1, k2 = jax.random.split(key)
    t0, c0 = time.perf_counter(), time.process_time()
    phases = ([(1, budget * settings["warm_fraction"]), (4, budget)] if variant == "k=1+4"
              else [(int(variant[2:]), budget)])
    iterations = 0
    for (k, until), phase_key in zip(phases, (k1, k2)):
        # the budget is this process's CPU time (compilation included), checked after
        # every iteration: the machine is shared, so wall time would measure the others
        over = lambda *_: time.process_time() - c0 >= until  # noqa: E731
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


def _rollout_stats(states, system, bound, horizons):
    """Escape indices and invariant drifts of rollouts `(B, N, d)` (NumPy float64)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    with np.errstate(over="ignore", invalid="ignore"):  # an overflowed rollout is data
        norms = np.linalg.norm(states, axis=-1)
    bad = ~np.isfinite(norms) | (norms > bound) | ~np.isfinite(states).all(axis=-1)
    escape = [int(np.argmax(b)) if b.any() else None for b in bad]
    drifts = {}
    for name, fn in system.invariants.items():
        vals = np.asarray(jax.jit(jax.vmap(jax.vmap(fn)))(jnp.asarray(states)), np.float64)
        start = vals[:, :1]
        scale = np.max(np.abs(start))
        with np.errstate(over="ignore", invalid="ignore"):
            dev = np.abs(vals - start) / scale
        dev[~np.isfinite(dev)] = np.inf
        drifts[name] = {str(h): float(np.max(dev[:, :h])) for h in horizons
                        if h <= states.shape[1]}
    return escape, drifts


def measure(settings: dict, ctx) -> dict:
    import jax
    import numpy as np

    import geomlearn as gl
    from geomlearn.integrators import integrate

    from .rigid_body import relative_loss

    dtype = settings["dtype"]
    n_points = settings["n_points"]
    problems, runs = {}, []
    for fi, family in enumerate(settings["families"]):
        system_name = SYSTEM[family]
        if system_name not in problems:
            problems[system_name] = _problem(system_name, ctx.quick, settings, dtype)
        system, data, z0 = problems[system_name]
        dt = float(data.dt)
        bound = settings["bound_factor"] * float(np.max(np.linalg.norm(
            np.asarray(data.states, np.float64), axis=-1)))
        short, long = settings["val_short"][family], settings["val_long"][family]
        reference = integrate(system, z0, dt, long, method="implicit_midpoint")
        budget = float(settings["budget_s"][family])
        for variant in settings["variants"]:
            init, T = _model(family, settings["sizes"],
                             jax.random.PRNGKey(100 * settings["seed"] + fi), dtype)
            task_kw = {"seq_length": T, "prediction_window": T}
            ctx.log(f"{family} {variant}: {_n_params(init)} parameters, budget {budget:g} s")
            trained, iterations, cpu, wall = _train(
                init, data, variant, budget, settings, family, T,
                jax.random.PRNGKey(1000 + 100 * settings["seed"] + fi))
            train_loss = relative_loss(trained, data, task_kw)
            metrics = gl.evaluate(trained, system, reference, dt=dt, horizons=[short, long],
                                  **task_kw)
            t0 = time.perf_counter()
            windows = np.asarray(reference)[:, :T]
            states = np.asarray(gl.iterate(trained, windows, n_points), np.float64)
            rollout_s = time.perf_counter() - t0
            escape, drifts = _rollout_stats(states, system, bound,
                                            settings["drift_horizons"])
            escaped = [e for e in escape if e is not None]
            runs.append({
                "family": family, "system": system_name, "variant": variant,
                "model": type(trained).__name__, "n_params": _n_params(trained),
                "iterations": iterations, "train_cpu_s": cpu, "train_wall_s": wall,
                "train_loss": train_loss,
                "val_short": metrics["trajectory_error"][str(short)],
                "val_long": metrics["trajectory_error"][str(long)],
                "n_rollouts": len(escape), "n_escaped": len(escaped),
                "first_escape": min(escaped) if escaped else None,
                "escape": escape, "drift": drifts, "rollout_s": rollout_s,
                "structure_residual": metrics["structure_residual"],
            })
            ctx.log(f"  loss {train_loss:.3e}, val {runs[-1]['val_long']:.3e}, escaped "
                    f"{len(escaped)}/{len(escape)} (first {runs[-1]['first_escape']}), "
                    f"{iterations} iterations in {cpu:.1f} CPU s ({wall:.1f} s wall)")
    return {"runs": runs}


# ------------------------------------------------------------------------------ report


def _rows(settings, results):
    hs = [str(h) for h in settings["drift_horizons"] if h <= settings["n_points"]]
    rows = []
    for r in results["runs"]:
        energy, casimir = r["drift"].get("energy", {}), r["drift"].get("casimir")
        rows.append({
            "family": r["family"], "variant": r["variant"], "iterations": r["iterations"],
            "train_cpu_s": r["train_cpu_s"], "train_wall_s": r["train_wall_s"],
            "train_loss": r["train_loss"],
            "val_short": r["val_short"], "val_long": r["val_long"],
            "escaped": f"{r['n_escaped']}/{r['n_rollouts']}",
            "first_escape": (r["first_escape"] if r["first_escape"] is not None
                             else f"> {settings['n_points']}"),
            "energy_first": energy.get(hs[0]), "energy_last": energy.get(hs[-1]),
            "casimir_last": None if casimir is None else casimir.get(hs[-1]),
        })
    return rows


def _title(settings, results):
    fams = ", ".join(f"{f} {settings['budget_s'][f]:g} s" for f in settings["families"])
    return (f"Long rollouts ({settings['n_points']} states), Levenberg-Marquardt within "
            f"{fams} of CPU time; k = windows in the training loss")


def _notes(settings, results):
    hs = [h for h in settings["drift_horizons"] if h <= settings["n_points"]]
    return [
        f"bound: |z| > {settings['bound_factor']:g} x the largest |z| of the training data, "
        "or a non-finite state; drift columns: max relative invariant deviation over the "
        f"first {hs[0]} and {hs[-1]} states (inf after an escape)",
        "validation error: relative trajectory error against the implicit midpoint rule "
        "over val_short / val_long steps (VPT: 100 / 500; oscillator: 30 / 300)",
        "k=1+4: plain loss for warm_fraction of the budget, then the 4-window loss",
    ]


SPEC = Benchmark(
    name="long_rollout",
    description="bounded horizon of 1e5-state rollouts of VPT, SymT, LST, ST after LM "
    "training; multi-step (k-window) training vs the one-window loss at equal time",
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
            Column("first_escape", "first escape (state)"),
            Column("energy_first", "energy drift (first)", ".1e"),
            Column("energy_last", "energy drift (all)", ".1e"),
            Column("casimir_last", "Casimir drift (all)", ".1e"),
        ), rows=_rows),
    ),
    notes=_notes,
    options=OPTIONS,
)
NAME, DESCRIPTION = SPEC.name, SPEC.description
add_arguments, run = SPEC.add_arguments, SPEC.run
