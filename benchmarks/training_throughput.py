"""Training throughput on one CPU core.

1. The SympNets paper's pendulum network — `GSympNet(2, n_layers=5, width=30,
   activation="sigmoid")` on the 40 training pairs of `datasets.pendulum_sympnets()`,
   full batch, Adam with learning rate 1e-3, MSE loss — in float64 and float32. Three ways of running the same update
   (`value_and_grad` of the loss, `optax.adam(1e-3)` update) are measured:

   - **scan**: `K` updates inside one `jax.lax.scan` in one jitted call (what a training
     loop that keeps the data on the device costs per update). Iterations/s =
     `K / median(call time)`. Its compile time is measured ahead of time
     (`jit(...).lower(...)`, then `.compile()`), and so is the compile time of a single
     jitted update step. **Target: ≥ 30,000 iterations/s in float64, compile ≤ 2 s.**
   - **python loop**: one jitted update per Python call, `N` calls, the result blocked
     on once at the end (a hand-written loop with a jitted step).
   - **geomlearn.fit**: `fit(..., batch_size=None, optimizer=optax.adam(1e-3),
     loss="mse")`; with a full batch one epoch is one update. `fit` compiles its epoch
     function on its first epoch, and reads the loss back to the host after every epoch
     (progress bar, history, non-finite check). Steady-state epochs/s is
     `1 / median(Δ history["time"])` over the epochs after the first; compile ≈ the first
     epoch's time minus that median.

2. The rigid-body `VolumePreservingTransformer(3, n_blocks=2, L=3)` (162 parameters),
   windows `T = pw = 3` from `datasets.rigid_body_vpt()`, relative loss, Adam 1e-3, at
   batch 16384 (float32 and float64): windows/s = `16384 · K / median(time of K updates)`
   (scan), and `geomlearn.fit` with `batch_size=16384` over the whole data set
   (windows/s = `(M // 16384) · 16384` per epoch).

Everything runs in one subprocess pinned to one core (see `benchmarks._common`).
"""

from __future__ import annotations

import time

from . import _common as C

NAME = "training_throughput"
DESCRIPTION = "GSympNet pendulum Adam iterations/s (one core), VPT windows/s at batch 16384"

FULL = {
    "scan_steps": 2000,
    "loop_steps": 2000,
    "fit_epochs": 3000,
    "repeats": 7,
    "vpt_batch": 16384,
    "vpt_steps": 10,
    "vpt_repeats": 5,
    "vpt_fit_epochs": 3,
    "vpt_dtypes": ["float32", "float64"],
    "dtypes": ["float64", "float32"],
    "gsympnet": {"n_layers": 5, "width": 30},
    "vpt": {"n_blocks": 2, "L": 3},
}
QUICK = {
    "scan_steps": 50,
    "loop_steps": 50,
    "fit_epochs": 30,
    "repeats": 2,
    "vpt_batch": 64,
    "vpt_steps": 2,
    "vpt_repeats": 2,
    "vpt_fit_epochs": 2,
    "vpt_dtypes": ["float32"],
    # smoke test only: tiny networks so that compilation stays short
    "dtypes": ["float64"],
    "gsympnet": {"n_layers": 2, "width": 4},
    "vpt": {"n_blocks": 1, "L": 1},
}

TARGET_ITERS = 30_000.0
TARGET_COMPILE_S = 2.0


def add_arguments(parser) -> None:
    parser.add_argument(
        "--repeats", type=int, default=None, help="timed repeats per measurement (median)"
    )


# --------------------------------------------------------------------------- child side


def _mse(pred, target):
    import jax.numpy as jnp

    return jnp.mean(jnp.square(pred - target))


def _relative(pred, target):
    # The same definition as geomlearn.fit's loss="relative": Frobenius norm over the batch.
    import jax.numpy as jnp

    return jnp.linalg.norm((pred - target).ravel()) / jnp.linalg.norm(target.ravel())


def _make_update(static, predict, loss_fn, optimizer):
    """`update((params, state), (x, y)) -> ((params, state), loss)` — one Adam step."""
    import equinox as eqx
    import jax
    import optax

    def loss_of(params, x, y):
        model = eqx.combine(params, static)
        return loss_fn(jax.vmap(lambda s: predict(model, s))(x), y)

    def update(carry, batch):
        params, state = carry
        x, y = batch
        value, grads = jax.value_and_grad(loss_of)(params, x, y)
        with jax.numpy_dtype_promotion("standard"):
            updates, state = optimizer.update(grads, state, params)
            params = optax.apply_updates(params, updates)
        return (params, state), value

    return update


def _measure_step_loops(model, x, y, predict, loss_fn, *, steps, loop_steps, repeats):
    """Scan and Python-loop timings of full-batch Adam(1e-3) on `(x, y)`."""
    import equinox as eqx
    import jax
    import optax

    optimizer = optax.adam(1e-3)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    with jax.numpy_dtype_promotion("standard"):
        state = optimizer.init(params)
    update = _make_update(static, predict, loss_fn, optimizer)

    def scan_k(params, state, x, y):
        def body(carry, _):
            return update(carry, (x, y))

        (params, state), losses = jax.lax.scan(body, (params, state), None, length=steps)
        return params, state, losses[-1]

    scan_compiled, scan_compile = C.aot_compile(jax.jit(scan_k), params, state, x, y)
    scan = C.repeat(scan_compiled, repeats, params, state, x, y)
    _, _, last_loss = scan_compiled(params, state, x, y)

    def one_step(params, state, x, y):
        (params, state), value = update((params, state), (x, y))
        return params, state, value

    step_compiled, step_compile = C.aot_compile(jax.jit(one_step), params, state, x, y)

    def python_loop(params, state):
        value = None
        for _ in range(loop_steps):
            params, state, value = step_compiled(params, state, x, y)
        return value

    loop = C.repeat(python_loop, repeats, params, state)
    return {
        "scan": {
            "steps_per_call": steps,
            "compile": scan_compile,
            "time": scan,
            "iterations_per_s": steps / scan["median_s"],
            "final_loss": float(last_loss),
        },
        "step_compile": step_compile,
        "python_loop": {
            "steps_per_call": loop_steps,
            "time": loop,
            "iterations_per_s": loop_steps / loop["median_s"],
        },
    }


def _measure_fit(model, data, *, epochs, key, samples_per_epoch, **fit_kwargs):
    """`geomlearn.fit` throughput from its own per-epoch wall-clock history."""
    import numpy as np
    import optax

    import geomlearn as gl

    t0 = time.perf_counter()
    _, history = gl.fit(
        model, data, epochs=epochs, optimizer=optax.adam(1e-3), key=key, progress=False,
        **fit_kwargs,
    )
    total = time.perf_counter() - t0
    times = np.asarray(history["time"], dtype=np.float64)
    per_epoch = np.diff(times)
    steady = C.summarize(per_epoch.tolist()) if per_epoch.size else C.summarize([times[0]])
    median = steady["median_s"]
    steady.pop("runs_s")
    return {
        "epochs": epochs,
        "total_s": total,
        "first_epoch_s": float(times[0]),
        "compile_s": max(float(times[0]) - median, 0.0),
        "epoch_time": steady,
        "epochs_per_s": 1.0 / median,
        "samples_per_s": samples_per_epoch / median,
        "final_loss": float(history["loss"][-1]),
    }


def measure(quick: bool, repeats: int | None = None) -> dict:
    """Runs in the one-core child; returns the raw measurements."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import geomlearn as gl

    cfg = dict(QUICK if quick else FULL)
    if repeats is not None:
        cfg["repeats"] = cfg["vpt_repeats"] = repeats
    out: dict = {"config": cfg, "pendulum": [], "vpt": []}

    # ---------------------------------------------------------------- pendulum GSympNet
    train, _ = gl.datasets.pendulum_sympnets()
    x64, y64 = (np.asarray(a) for a in train.pairs())
    for dtype in cfg["dtypes"]:
        x = jnp.asarray(x64, dtype=dtype)
        y = jnp.asarray(y64, dtype=dtype)
        model = gl.GSympNet(
            2, **cfg["gsympnet"], activation="sigmoid", key=jax.random.PRNGKey(0), dtype=dtype
        )
        n_params = sum(a.size for a in jax.tree_util.tree_leaves(model) if hasattr(a, "size"))
        row = _measure_step_loops(
            model, x, y, lambda m, s: m(s), _mse,
            steps=cfg["scan_steps"], loop_steps=cfg["loop_steps"], repeats=cfg["repeats"],
        )
        row["fit"] = _measure_fit(
            model, (x, y), epochs=cfg["fit_epochs"], key=jax.random.PRNGKey(1),
            samples_per_epoch=x.shape[0], loss="mse",
        )
        row.update(dtype=dtype, n_params=int(n_params), n_pairs=int(x.shape[0]))
        out["pendulum"].append(row)

    # ---------------------------------------------------------------- rigid-body VPT
    data = gl.datasets.rigid_body_vpt()
    X, Y = (np.asarray(a) for a in data.windows(3, 3))
    B = min(cfg["vpt_batch"], X.shape[0])
    idx = np.random.default_rng(0).permutation(X.shape[0])[:B]
    for dtype in cfg["vpt_dtypes"]:
        xb = jnp.asarray(X[idx], dtype=dtype)
        yb = jnp.asarray(Y[idx], dtype=dtype)
        model = gl.VolumePreservingTransformer(
            3, **cfg["vpt"], key=jax.random.PRNGKey(0), dtype=dtype
        )
        n_params = sum(a.size for a in jax.tree_util.tree_leaves(model) if hasattr(a, "size"))
        row = _measure_step_loops(
            model, xb, yb, lambda m, s: m(s), _relative,
            steps=cfg["vpt_steps"], loop_steps=cfg["vpt_steps"], repeats=cfg["vpt_repeats"],
        )
        for name in ("scan", "python_loop"):
            row[name]["windows_per_s"] = row[name]["iterations_per_s"] * B
        n_fit = X.shape[0] if not quick else 4 * B
        fit_x = jnp.asarray(X[:n_fit], dtype=dtype)
        fit_y = jnp.asarray(Y[:n_fit], dtype=dtype)
        row["fit"] = _measure_fit(
            model, (fit_x, fit_y), epochs=cfg["vpt_fit_epochs"], key=jax.random.PRNGKey(1),
            samples_per_epoch=(n_fit // B) * B, batch_size=B, loss="relative",
        )
        row.update(dtype=dtype, n_params=int(n_params), batch=int(B), n_windows=int(n_fit))
        out["vpt"].append(row)
    return out


# --------------------------------------------------------------------------- parent side


def _kw(d: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in d.items())


def run(*, quick: bool = False, out=None, repeats: int | None = None) -> dict:
    started = time.perf_counter()
    raw = C.run_pinned(
        "benchmarks.training_throughput", "measure", {"quick": quick, "repeats": repeats}
    )
    machine = raw.pop("_machine")
    pinning = raw.pop("_pinning")
    cfg = raw["config"]

    pend_rows = []
    for r in raw["pendulum"]:
        for how, key in (("scan", "scan"), ("python loop", "python_loop"), ("geomlearn.fit", "fit")):
            m = r[key]
            if key == "fit":
                rate, compile_s, median = m["epochs_per_s"], m["compile_s"], m["epoch_time"]["median_s"]
            else:
                rate = m["iterations_per_s"]
                compile_s = (m["compile"] if key == "scan" else r["step_compile"])["total_s"]
                median = m["time"]["median_s"]
            pend_rows.append(
                {
                    "dtype": r["dtype"],
                    "how": how,
                    "rate": rate,
                    "compile_s": compile_s,
                    "median_s": median,
                    "final_loss": m.get("final_loss"),
                }
            )
    vpt_rows = []
    for r in raw["vpt"]:
        for how, key in (("scan", "scan"), ("python loop", "python_loop"), ("geomlearn.fit", "fit")):
            m = r[key]
            if key == "fit":
                rate, compile_s = m["samples_per_s"], m["compile_s"]
            else:
                rate = m["windows_per_s"]
                compile_s = (m["compile"] if key == "scan" else r["step_compile"])["total_s"]
            vpt_rows.append(
                {"dtype": r["dtype"], "how": how, "batch": r["batch"], "rate": rate,
                 "compile_s": compile_s}
            )

    f64 = next((r for r in raw["pendulum"] if r["dtype"] == "float64"), raw["pendulum"][0])
    iters = f64["scan"]["iterations_per_s"]
    scan_c, step_c = f64["scan"]["compile"], f64["step_compile"]
    targets = [
        C.target(
            f"GSympNet pendulum, {f64['dtype']}, one core: iterations/s (scan)",
            "≥ 30,000 it/s", iters, iters >= TARGET_ITERS, "it/s",
        ),
        C.target(
            f"GSympNet pendulum, {f64['dtype']}: compile time of the training loop",
            "≤ 2 s", scan_c["total_s"], scan_c["total_s"] <= TARGET_COMPILE_S, "s",
            note=f"trace + lower + XLA compile of the {f64['scan']['steps_per_call']}-step "
            f"scan ({scan_c['trace_lower_s']:.2f} + {scan_c['compile_s']:.2f} s); of a single "
            f"jitted step {step_c['total_s']:.2f} s; geomlearn.fit's first epoch exceeds its "
            f"steady epochs by {f64['fit']['compile_s']:.2f} s",
        ),
        C.target(
            f"GSympNet pendulum, {f64['dtype']}, one core: geomlearn.fit epochs/s (= iterations/s)",
            "(no target; reported)", f64["fit"]["epochs_per_s"], None, "it/s",
        ),
    ]
    cols = [
        ("dtype", "dtype", ""),
        ("how", "how", ""),
        ("rate", "iterations/s", ",.0f"),
        ("median_s", "median time/call (s)", ".4g"),
        ("compile_s", "compile (s)", ".3f"),
        ("final_loss", "final loss", ".3e"),
    ]
    vcols = [
        ("dtype", "dtype", ""),
        ("how", "how", ""),
        ("batch", "batch", "d"),
        ("rate", "windows/s", ",.0f"),
        ("compile_s", "compile (s)", ".3f"),
    ]
    targets = C.quick_targets(targets, quick)
    tables = [
        C.table(
            f"GSympNet(2, {_kw(cfg['gsympnet'])}, activation='sigmoid'), 40 pairs, "
            "Adam 1e-3, MSE, one core", cols, pend_rows,
        ),
        C.table(
            f"VolumePreservingTransformer(3, {_kw(cfg['vpt'])}), T=pw=3, relative loss, "
            "Adam 1e-3, one core", vcols, vpt_rows,
        ),
    ]
    payload = C.make_payload(
        NAME,
        quick=quick,
        options={"repeats": repeats},
        settings={**raw["config"], "pinning": pinning},
        results={"pendulum": raw["pendulum"], "vpt": raw["vpt"]},
        tables=tables,
        targets=targets,
        notes=[
            "compile: trace + lower + XLA compile, ahead of time, of the scan (scan) and of "
            "the single jitted step (python loop); for geomlearn.fit, the first epoch's time "
            "minus the median epoch time. Rates are medians of "
            f"{cfg['repeats']} timed calls after compilation.",
            f"one core: {pinning['how']}",
        ],
        started=started,
        machine=machine,
    )
    return C.finish(out, payload)
