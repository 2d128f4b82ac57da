"""Training throughput on one CPU core: `geomlearn.fit` against a bare `lax.scan`.

The SympNets paper's pendulum network, `GSympNet(2, n_layers=5, width=30,
activation="sigmoid")` (450 parameters), on the 40 training pairs of
`datasets.pendulum_sympnets()`, full batch, `optax.adam(1e-3)`, MSE loss
(`geomlearn.training.resolve_loss("mse")`, predictions by the model protocol:
`model.predict`, `model.target`). The same update — `value_and_grad` of that loss, then
the Adam update — runs three ways, in one process:

- **scan**: `scan_steps` updates inside one `jax.lax.scan` in one jitted call (compiled
  ahead of time, timed separately); iterations/s = `scan_steps / median(call time)` over
  `repeats` calls. **Targets: ≥ 30,000 iterations/s in float64, compile ≤ 2 s.**
- **python loop**: one jitted update per Python call, `loop_steps` calls (one dispatch
  per update).
- **geomlearn.fit** with `batch_size=None`: one epoch is one update. `fit` runs several
  epochs per compiled call (a loop over epochs; after the first ones, groups of about
  50 ms of epochs, or of at least 16 epochs while they take ≤ 2 s:
  `geomlearn.training._loop.group_length`) and reads the losses back per group. Steady-state epochs/s =
  `(epochs − 1) / (history["time"][-1] − history["time"][0])`: the wall time after the
  first group, which is one epoch and holds the compilation. The median over
  `fit_repeats` runs (the later ones reuse `fit`'s compiled code); compile ≈ the first
  run's first epoch minus the steady epoch time. **Target: fit ≥ 0.8 × scan**, judged on
  the median, over `interleaved_pairs` alternations of (one scan call, one `fit` run),
  of the per-pair ratio: on a shared machine the load changes between measurements taken
  a minute apart, while the two of a pair, seconds apart, see nearly the same load.

**Batch-size sweep** (float64, the same network and update): `B` pendulum pairs (one
implicit-midpoint step of `h = 0.1` from states drawn uniformly in `[-2, 2]²`), full
batch, for each `B` in `sweep_batches` (40 … 102,400). Per `B`, `sweep_repeats` rounds,
each of: the scan, `steps = max(sweep_min_steps, sweep_work / B)` updates per call,
called `round(epochs / steps)` times; the python loop, `steps` updates; one `fit` run of
`epochs = max(sweep_min_epochs, steps)` epochs (all compiled before the first round). The
ratios loop ÷ scan and fit ÷ scan are taken within each round (seconds apart, under
about the same load) and their medians reported; the rates shown are the medians over
the rounds. **Target: fit ≥ 0.8 × scan at every batch size.** The python loop pays
one dispatch per update, `fit` one per group, the scan one per call: where `loop / scan`
approaches 1 the per-call overhead stops mattering. Every compiled call also allocates
its temporary buffers afresh (40 MiB at `B = 10,240`, 400 MiB at 102,400); above the C
allocator's threshold for serving a block from its heap (glibc: 32 MiB at most) the
operating system maps them anew and zeroes them page by page on every call, a per-call
cost of the order of an epoch that grows with `B` like the epoch itself: `fit`
amortises it by running at least 16 epochs per call (while they take ≤ 2 s;
`geomlearn.training._loop.group_length`), the scan over its `steps`.

Everything runs in one subprocess pinned to one core (see `benchmarks._common`).
"""

from __future__ import annotations

import time

from . import _common as C
from ._harness import REPEATS, Benchmark, Column, Option, Table

TARGET_ITERS = 30_000.0
TARGET_COMPILE_S = 2.0
TARGET_FIT_RATIO = 0.8
#: the loop/scan ratio above which per-dispatch overhead is said to stop mattering
OVERHEAD_RATIO = 0.9

FULL = {
    "dtypes": ["float64", "float32"],
    "gsympnet": {"n_layers": 5, "width": 30},
    "learning_rate": 1e-3,
    "scan_steps": 2000,
    "loop_steps": 2000,
    "fit_epochs": 20000,
    "fit_repeats": 3,
    "interleaved_pairs": 7,
    "repeats": 7,
    "sweep_batches": [40, 160, 640, 2560, 10240, 40960, 102400],
    "sweep_work": 200_000,
    "sweep_min_steps": 20,
    "sweep_min_epochs": 60,
    "sweep_repeats": 3,
}
QUICK = {
    "dtypes": ["float64"],
    # smoke test only: a tiny network so that compilation stays short
    "gsympnet": {"n_layers": 2, "width": 4},
    "learning_rate": 1e-3,
    "scan_steps": 50,
    "loop_steps": 50,
    "fit_epochs": 60,
    "fit_repeats": 2,
    "interleaved_pairs": 2,
    "repeats": 2,
    "sweep_batches": [40, 160],
    "sweep_work": 4000,
    "sweep_min_steps": 5,
    "sweep_min_epochs": 20,
    "sweep_repeats": 1,
}


# ------------------------------------------------------------------ measurement (child)


def _n_params(model) -> int:
    import equinox as eqx
    import jax

    return sum(a.size for a in jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array)))


def _update_fn(model, data, optimizer, loss="mse"):
    """`(params, opt_state, x, y, update)`: the samples `model.training_samples` takes from
    `data`, and one full-batch optimiser update on them, built from the library's loss and
    the model protocol — the update `fit` runs per epoch."""
    import equinox as eqx
    import jax
    import optax

    from geomlearn.training import resolve_loss

    task = model.task()
    x, y, task = model.training_samples(data, task)
    loss_fn = resolve_loss(loss)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    # the relative loss's scale: the mean squared norm of the compared targets (fit's)
    t = jax.vmap(lambda s: model.target(s, task))(y).reshape(y.shape[0], -1)
    target_sq = jax.numpy.mean(jax.numpy.sum(jax.numpy.square(t), axis=1))

    def loss_of(p, xb, yb):
        m = eqx.combine(p, static)
        pred = jax.vmap(lambda s: m.predict(s, task))(xb)
        target = jax.vmap(lambda s: m.target(s, task))(yb)
        return loss_fn(pred, target, target_sq)

    def update(p, s, xb, yb):
        value, grads = jax.value_and_grad(loss_of)(p, xb, yb)
        with jax.numpy_dtype_promotion("standard"):  # as fit does: optax under standard rules
            updates, s = optimizer.update(grads, s, p)
            p = optax.apply_updates(p, updates)
        return p, s, value

    with jax.numpy_dtype_promotion("standard"):
        state = optimizer.init(params)
    return params, state, x, y, update


def _scan_of(update, steps):
    """`(params, state, x, y) -> (params, state, last loss)`: `steps` updates in one
    `lax.scan` (the data are arguments of the compiled call, as they are for `fit`)."""
    import jax

    def scan_k(p, s, x, y):
        def body(carry, _):
            p, s, value = update(*carry, x, y)
            return (p, s), value

        (p, s), values = jax.lax.scan(body, (p, s), None, length=steps)
        return p, s, values[-1]

    return scan_k


def _scan_and_loop(model, data, optimizer, *, scan_steps, loop_steps, repeats, keep=False):
    """The bare scan and the one-dispatch-per-update loop of the same update (with
    `keep`, also the compiled scan and its arguments, for `_interleaved`)."""
    import jax

    params, state, x, y, update = _update_fn(model, data, optimizer)
    scan_c, scan_compile = C.aot_compile(jax.jit(_scan_of(update, scan_steps)),
                                         params, state, x, y)
    scan = C.repeat(scan_c, repeats, params, state, x, y)
    last = float(scan_c(params, state, x, y)[2])
    step_c, step_compile = C.aot_compile(jax.jit(update), params, state, x, y)

    def loop(p, s):
        value = None
        for _ in range(loop_steps):
            p, s, value = step_c(p, s, x, y)
        return value

    loop_t = C.repeat(loop, repeats, params, state)
    out = {
        "scan": {"steps_per_call": scan_steps, "compile": scan_compile, "time": scan,
                 "iterations_per_s": scan_steps / scan["median_s"], "final_loss": last},
        "python_loop": {"steps_per_call": loop_steps, "compile": step_compile, "time": loop_t,
                        "iterations_per_s": loop_steps / loop_t["median_s"]},
    }
    if keep:
        out["_scan_call"] = (scan_c, (params, state, x, y), scan_steps)
    return out


def _interleaved(scan_call, model, data, optimizer, *, epochs, pairs):
    """`pairs` alternations of (bare scan, `fit` run) of the same number of updates, in
    one process: on a shared machine the load changes between measurements taken a
    minute apart, so the ratio fit ÷ scan is taken per pair (the two measured seconds
    apart, over about the same wall time) and its median reported."""
    import jax

    scan_c, args, steps = scan_call
    calls = max(1, epochs // steps)  # as many scan updates as fit epochs

    def scan_all():
        for _ in range(calls):
            jax.block_until_ready(scan_c(*args))

    ratios, scans, fits = [], [], []
    for _ in range(pairs):
        scan_s = C.timed(scan_all)[1]
        fit = _fit_rate(model, data, optimizer, epochs=epochs, repeats=1)["epochs_per_s"]
        scans.append(calls * steps / scan_s)
        fits.append(fit)
        ratios.append(fit / scans[-1])
    mid = sorted(range(pairs), key=lambda i: ratios[i])[pairs // 2]
    return {"pairs": pairs, "ratios": ratios, "scan_iterations_per_s": scans,
            "fit_epochs_per_s": fits, "median_ratio": ratios[mid]}


def _fit_rate(model, data, optimizer, *, epochs, repeats):
    """`geomlearn.fit`'s steady-state epochs/s (see the module documentation)."""
    import jax

    import geomlearn as gl

    runs = []
    for r in range(repeats):
        t0 = time.perf_counter()
        _, history = gl.fit(model, data, epochs=epochs, optimizer=optimizer, loss="mse",
                            key=jax.random.PRNGKey(1), progress=False)
        total = time.perf_counter() - t0
        t = history["time"]
        steady = (len(t) - 1) / (t[-1] - t[0])
        runs.append({"total_s": total, "first_epoch_s": t[0], "epochs_per_s": steady,
                     "final_loss": history["loss"][-1]})
    rates = sorted(run["epochs_per_s"] for run in runs)
    median = rates[len(rates) // 2]
    return {
        "epochs": epochs,
        "runs": runs,
        "epochs_per_s": median,
        "compile_s": max(runs[0]["first_epoch_s"] - 1.0 / median, 0.0),
        "final_loss": runs[0]["final_loss"],
    }


def _gsympnet(settings, dtype):
    import jax

    import geomlearn as gl

    return gl.GSympNet(2, **settings["gsympnet"], activation="sigmoid",
                       key=jax.random.PRNGKey(0), dtype=dtype)


def _sweep_data(B: int, dtype):
    """`B` one-step pendulum pairs (implicit midpoint, h = 0.1) from uniform states."""
    import jax
    import numpy as np

    import geomlearn as gl
    from geomlearn.integrators import integrate

    z0 = jax.random.uniform(jax.random.PRNGKey(B), (B, 2), dtype=dtype, minval=-2.0, maxval=2.0)
    traj = integrate(gl.systems.Pendulum(), z0, 0.1, 1, method="implicit_midpoint")
    return np.asarray(traj[:, 0]), np.asarray(traj[:, 1])


def measure(settings: dict, ctx) -> dict:
    """Runs in the one-core child."""
    import jax.numpy as jnp
    import numpy as np
    import optax

    import geomlearn as gl

    train, _ = gl.datasets.pendulum_sympnets()
    x64, y64 = (np.asarray(a) for a in train.pairs())
    # one optimiser object: fit's compiled epochs are cached on its update function
    optimizer = optax.adam(settings["learning_rate"])
    rows = []
    for dtype in settings["dtypes"]:
        data = (jnp.asarray(x64, dtype=dtype), jnp.asarray(y64, dtype=dtype))
        model = _gsympnet(settings, dtype)
        row = _scan_and_loop(model, data, optimizer, scan_steps=settings["scan_steps"],
                             loop_steps=settings["loop_steps"], repeats=settings["repeats"],
                             keep=True)
        row["fit"] = _fit_rate(model, data, optimizer, epochs=settings["fit_epochs"],
                               repeats=settings["fit_repeats"])
        row["interleaved"] = _interleaved(row.pop("_scan_call"), model, data, optimizer,
                                          epochs=settings["fit_epochs"],
                                          pairs=settings["interleaved_pairs"])
        row.update(dtype=dtype, n_params=_n_params(model), n_pairs=int(x64.shape[0]))
        rows.append(row)

    model = _gsympnet(settings, "float64")
    sweep = [_sweep_point(model, optimizer, B, settings) for B in settings["sweep_batches"]]
    return {"pendulum": rows, "sweep": sweep}


def _median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def _sweep_point(model, optimizer, B: int, settings) -> dict:
    """One batch size of the sweep (see the module documentation): `sweep_repeats` rounds
    of (scan, python loop, `fit`), the ratios taken within each round."""
    import jax
    import jax.numpy as jnp

    x, y = _sweep_data(B, "float64")
    data = (jnp.asarray(x), jnp.asarray(y))
    steps = max(settings["sweep_min_steps"], int(settings["sweep_work"] // B))
    epochs = max(settings["sweep_min_epochs"], steps)
    calls = max(1, round(epochs / steps))
    params, state, xs, ys, update = _update_fn(model, data, optimizer)
    args = (params, state, xs, ys)
    scan_c = C.aot_compile(jax.jit(_scan_of(update, steps)), *args)[0]
    step_c = C.aot_compile(jax.jit(update), *args)[0]

    def scan_all():
        for _ in range(calls):
            out = scan_c(*args)
        return out

    def loop():
        p, s, value = params, state, None
        for _ in range(steps):
            p, s, value = step_c(p, s, xs, ys)
        return value

    C.block(scan_c(*args))
    C.block(step_c(*args))
    _fit_rate(model, data, optimizer, epochs=2, repeats=1)  # compiles fit's group
    scans, loops, fits = [], [], []
    for _ in range(settings["sweep_repeats"]):
        scans.append(calls * steps / C.timed(scan_all)[1])
        loops.append(steps / C.timed(loop)[1])
        fits.append(_fit_rate(model, data, optimizer, epochs=epochs, repeats=1)["epochs_per_s"])
    fit_ratios = [f / s for f, s in zip(fits, scans)]
    loop_ratios = [lp / s for lp, s in zip(loops, scans)]
    scan = _median(scans)
    return {
        "batch": B, "steps": steps, "fit_epochs": epochs, "scan_calls": calls,
        "scan": scan, "python_loop": _median(loops), "fit": _median(fits),
        "scan_samples_per_s": scan * B,
        "loop_over_scan": _median(loop_ratios), "fit_over_scan": _median(fit_ratios),
        "rounds": {"scan": scans, "python_loop": loops, "fit": fits,
                   "loop_over_scan": loop_ratios, "fit_over_scan": fit_ratios},
    }


# ------------------------------------------------------------------ report (parent)


def _pendulum_rows(settings, results):
    rows = []
    for r in results["pendulum"]:
        scan = r["scan"]["iterations_per_s"]
        for how, m in (("scan", r["scan"]), ("python loop", r["python_loop"]),
                       ("geomlearn.fit", r["fit"])):
            rate = m.get("iterations_per_s", m.get("epochs_per_s"))
            compile_s = m["compile"]["total_s"] if "compile" in m else m["compile_s"]
            rows.append({"dtype": r["dtype"], "how": how, "rate": rate, "ratio": rate / scan,
                         "compile_s": compile_s, "final_loss": m.get("final_loss")})
        if "interleaved" in r:  # the ratio the target is judged on
            i = r["interleaved"]
            fits = sorted(i["fit_epochs_per_s"])
            rows.append({"dtype": r["dtype"], "how": "fit (interleaved)",
                         "rate": fits[len(fits) // 2], "ratio": i["median_ratio"],
                         "compile_s": None, "final_loss": None})
    return rows


def _overhead_batch(sweep) -> int | None:
    """The smallest batch from which the python loop stays within `OVERHEAD_RATIO` of the scan."""
    ok = [r["loop_over_scan"] >= OVERHEAD_RATIO for r in sweep]
    for i in range(len(sweep)):
        if all(ok[i:]):
            return sweep[i]["batch"]
    return None


def _targets(settings, results):
    f64 = next((r for r in results["pendulum"] if r["dtype"] == "float64"),
               results["pendulum"][0])
    scan, fit = f64["scan"]["iterations_per_s"], f64["fit"]["epochs_per_s"]
    inter = f64.get("interleaved")
    ratio = inter["median_ratio"] if inter else fit / scan
    c, step_c = f64["scan"]["compile"], f64["python_loop"]["compile"]
    return [
        C.target(f"GSympNet pendulum, {f64['dtype']}, one core: iterations/s (scan)",
                 "≥ 30,000 it/s", scan, scan >= TARGET_ITERS, "it/s"),
        C.target(
            f"GSympNet pendulum, {f64['dtype']}: compile time of the training loop",
            "≤ 2 s", c["total_s"], c["total_s"] <= TARGET_COMPILE_S, "s",
            note=f"trace + lower + XLA compile of the {f64['scan']['steps_per_call']}-step "
            f"scan ({c['trace_lower_s']:.2f} + {c['compile_s']:.2f} s); of one jitted step "
            f"{step_c['total_s']:.2f} s; fit's first epoch exceeds its steady epochs by "
            f"{f64['fit']['compile_s']:.2f} s",
        ),
        C.target(
            f"GSympNet pendulum, {f64['dtype']}, one core: geomlearn.fit epochs/s vs the "
            "bare scan", "≥ 0.8 × scan", ratio, ratio >= TARGET_FIT_RATIO, "× scan",
            note=(f"median of {inter['pairs']} interleaved (scan, fit) pairs; "
                  f"separately: fit {fit:,.0f} epochs/s, scan {scan:,.0f} it/s"
                  if inter else f"fit {fit:,.0f} epochs/s, scan {scan:,.0f} it/s"),
        ),
        _sweep_target(results["sweep"]),
    ]


def _sweep_target(sweep):
    worst = min(sweep, key=lambda r: r["fit_over_scan"])
    ratio = worst["fit_over_scan"]
    return C.target(
        "GSympNet pendulum, float64, one core: geomlearn.fit vs the bare scan at every "
        f"batch size (B = {sweep[0]['batch']:,} … {sweep[-1]['batch']:,})",
        "≥ 0.8 × scan at every B", ratio, ratio >= TARGET_FIT_RATIO, "× scan",
        note=f"the lowest, at B = {worst['batch']:,}; per B: "
        + ", ".join(f"{r['batch']}: {r['fit_over_scan']:.2f}" for r in sweep)
        + " (median over rounds of the per-round ratio)",
    )


def _notes(settings, results):
    B = _overhead_batch(results["sweep"])
    where = (f"from B = {B} on, one dispatch per update (python loop) stays within "
             f"{1 - OVERHEAD_RATIO:.0%} of the scan" if B is not None else
             "the python loop stays more than "
             f"{1 - OVERHEAD_RATIO:.0%} behind the scan at every batch size measured")
    return [
        ("compile: trace + lower + XLA compile, ahead of time, of the scan and of the "
         "single jitted step (python loop); for geomlearn.fit, its first epoch minus the "
         f"steady epoch time. Scan and loop rates are medians of {settings['repeats']} "
         f"timed calls; fit's the median of {settings['fit_repeats']} runs of "
         f"{settings['fit_epochs']} epochs. Final loss: scan after {settings['scan_steps']} "
         f"updates, fit after {settings['fit_epochs']} epochs."),
        (f"batch-size sweep: {settings['sweep_repeats']} rounds per B of (scan, python "
         "loop, one fit run), each of about the same updates; rates are medians over the "
         "rounds, the ÷ scan ratios medians of the per-round ratios; "
         f"{where}."),
    ]


def _title(settings, results):
    kw = ", ".join(f"{k}={v}" for k, v in settings["gsympnet"].items())
    return (f"GSympNet(2, {kw}, activation='sigmoid'), 40 pairs full batch, "
            f"Adam {settings['learning_rate']:g}, MSE, one core")


SPEC = Benchmark(
    name="training_throughput",
    description="GSympNet pendulum: geomlearn.fit vs bare lax.scan iterations/s (one core), "
    "batch-size sweep",
    full=FULL,
    quick=QUICK,
    measure=measure,
    tables=(
        Table(_title, (
            Column("dtype", "dtype"),
            Column("how", "how"),
            Column("rate", "iterations/s", ",.0f"),
            Column("ratio", "÷ scan", ".2f"),
            Column("compile_s", "compile (s)", ".3f"),
            Column("final_loss", "final loss", ".3e"),
        ), rows=_pendulum_rows),
        Table("Batch-size sweep (float64, full batch B pendulum pairs, one core)", (
            Column("batch", "B", "d"),
            Column("scan", "scan it/s", ",.0f"),
            Column("python_loop", "python loop it/s", ",.0f"),
            Column("fit", "fit epochs/s", ",.0f"),
            Column("scan_samples_per_s", "scan samples/s", ",.0f"),
            Column("loop_over_scan", "loop ÷ scan", ".2f"),
            Column("fit_over_scan", "fit ÷ scan", ".2f"),
        ), rows="sweep"),
    ),
    targets=_targets,
    notes=_notes,
    options=(REPEATS,
             Option("--sweep-batches", str, "comma-separated batch sizes of the sweep",
                    convert=lambda text: [int(v) for v in text.split(",") if v]),
             Option("--interleaved-pairs", int, "alternations of (scan, fit) for the ratio")),
    one_core=True,
)
NAME, DESCRIPTION = SPEC.name, SPEC.description
add_arguments, run = SPEC.add_arguments, SPEC.run
