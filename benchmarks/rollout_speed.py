"""Rollout speed on one CPU core: the volume-preserving transformer against implicit midpoint.

The volume-preserving transformer paper's network, `VolumePreservingTransformer(3,
n_blocks=2, L=3)` (162 parameters), with `T = pw = 3`, is rolled out with
`geomlearn.iterate` — what a user runs — for 250,000 states from one initial window (the
first three implicit-midpoint states from `(sin 1.1, 0, cos 1.1)`), and, in the same run,
the rigid body is integrated with `geomlearn.integrators.integrate(...,
method="implicit_midpoint")` at `dt = 0.2` for 250,000 steps from the same initial state.
The paper reports 0.71 s for its transformer and 2.51 s for implicit midpoint (Julia, on a
CPU). **Target: ≤ 0.15 s for the transformer on one core.**

Batched: 1000 initial windows × 1000 transformer steps (each step appends `pw = 3`
states, so 3,000,000 new states), and implicit midpoint from the same 1000 initial
states for 1000 steps; states per second.

Both are measured in float64 and float32. Times are medians of several calls after a
first call that compiles (its excess over the median is reported as compile time).

**Ratio (issue 16).** In the same child, the VPT rollout and implicit midpoint are also
timed *interleaved* (VPT, midpoint, VPT, midpoint, ...; several repeats) and the median
of the per-repeat ratios VPT / midpoint is reported, single and batched: the machine is
shared, so absolute times are noisy but the ratio of neighbouring runs is not. **Goal:
ratio ≤ 1.** The compiled loop bodies are inspected (`jax.jit(...).lower(...).compile()
.as_text()`) and their XLA kernels counted: the rollout of `iterate` (which iterates
`model.inference_form()`) and a rollout of the plain model map, per network call.

**Other families**: states/s of `iterate` for SympNets on the pendulum and the linear
symplectic transformer on the coupled oscillator (random networks of the sizes of their
benchmarks), and of the volume-preserving feed-forward network on the rigid body, next to
`integrate(...)` of the same system (implicit midpoint, Störmer–Verlet where the system is
separable). **Positional encoding**: first jitted call of `PositionalEncoding(256)` on a
`(100000, 256)` float32 window (goal ≤ 0.5 s) and the size of its compiled program, and
the per-call cost of a short `(3, 3)` window.

The network: `--model PATH` loads a trained one (`geomlearn.load`; the `rigid_body`
benchmark saves its networks as `rigid_body_<name>.geomlearn` next to its JSON file);
without it the network has random parameters. The computation does not depend on the
parameter values, but a random network leaves the bounded region within a few hundred
steps and then computes with inf/NaN (which this CPU handles at full speed, unlike
subnormal numbers); the table says whether each rollout stayed finite and where the
single rollout first left the finite numbers.
"""

from __future__ import annotations

import time

from . import _common as C

NAME = "rollout_speed"
DESCRIPTION = "VPT rollout of 250,000 states vs implicit midpoint, one core"

FULL = {"n_states": 250_000, "batch": 1000, "batch_steps": 1000, "repeats": 7,
        "dtypes": ["float64", "float32"], "vpt": {"n_blocks": 2, "L": 3},
        "ratio_repeats": 9, "family_states": 250_000, "pe": {"T": 100_000, "dim": 256},
        "families": "full"}
# smoke test only: a tiny network so that compilation stays short
QUICK = {"n_states": 3_000, "batch": 8, "batch_steps": 20, "repeats": 2,
         "dtypes": ["float64"], "vpt": {"n_blocks": 1, "L": 1},
         "ratio_repeats": 2, "family_states": 500, "pe": {"T": 3_000, "dim": 16},
         "families": "quick"}
PE_TARGET_S = 0.5

PAPER_TRANSFORMER_S = 0.71
PAPER_MIDPOINT_S = 2.51
TARGET_S = 0.15
DT = 0.2
T = 3


def add_arguments(parser) -> None:
    parser.add_argument(
        "--repeats", type=int, default=None, help="timed repeats per measurement (median)"
    )
    parser.add_argument(
        "--model", default=None,
        help="a saved VolumePreservingTransformer(3, ...) (geomlearn.save) to roll out "
        "instead of a random one",
    )


def _stats(traj) -> dict:
    """Whether a rollout `(..., N, d)` stayed finite, and its first non-finite state."""
    import numpy as np

    a = np.asarray(traj)
    ok = np.isfinite(a).all(axis=-1)  # (..., N)
    bad = np.where(~ok.reshape(-1, ok.shape[-1]).all(axis=0))[0]
    with np.errstate(invalid="ignore"):
        max_abs = float(np.nanmax(np.abs(a))) if np.isfinite(a).any() else float("nan")
    return {
        "finite": bool(ok.all()),
        "first_nonfinite_state": int(bad[0]) if bad.size else None,
        "max_abs": max_abs,
    }


_TRIVIAL_OPS = {"parameter", "get-tuple-element", "tuple", "constant", "bitcast"}


def kernels_per_loop_body(hlo_text: str) -> list[dict]:
    """The XLA kernels of each `while` body of a compiled program (`compile().as_text()`):
    for each body, the count of its non-trivial top-level instructions (fusions, copies,
    dots, custom calls, ...; not parameters, tuples, constants or bitcasts) and the count
    by opcode. Sorted by count, largest first."""
    import re
    from collections import Counter

    computations, current = {}, None
    for line in hlo_text.splitlines():
        if line and not line.startswith(" ") and line.rstrip().endswith("{"):
            m = re.match(r"^(?:ENTRY )?%?([\w.\-]+)", line)
            current = m.group(1) if m else None
            if current:
                computations[current] = []
            continue
        if current and line.startswith("  ") and " = " in line:
            computations[current].append(line)
    out = []
    for body in sorted(set(re.findall(r"body=%?([\w.\-]+)", hlo_text))):
        ops = []
        for line in computations.get(body, []):
            m = re.search(r" = \S+ ([\w\-]+)\(", line)
            if m and m.group(1) not in _TRIVIAL_OPS:
                ops.append(m.group(1))
        out.append({"body": body, "kernels": len(ops), "by_op": dict(Counter(ops))})
    return sorted(out, key=lambda r: -r["kernels"])


def _interleaved(fa, fb, repeats: int) -> dict:
    """Time `fa` and `fb` alternately (each already compiled) `repeats` times: medians and
    the median of the per-repeat ratios `fa / fb` (robust to load on a shared machine)."""
    import statistics

    ta, tb = [], []
    for _ in range(repeats):
        ta.append(C.timed(fa)[1])
        tb.append(C.timed(fb)[1])
    ratios = [a / b for a, b in zip(ta, tb)]
    return {"a_median_s": statistics.median(ta), "b_median_s": statistics.median(tb),
            "ratio_median": statistics.median(ratios), "ratios": ratios}


def _summary(t: dict) -> dict:
    return {k: t[k] for k in ("first_s", "compile_s", "median_s", "min_s", "max_s", "runs_s")}


def measure(quick: bool, repeats: int | None = None, model_path: str | None = None) -> dict:
    """Runs in the one-core child."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import numpy as np

    import geomlearn as gl
    from geomlearn.integrators import integrate

    cfg = dict(QUICK if quick else FULL)
    if repeats is not None:
        cfg["repeats"] = repeats
    system = gl.systems.RigidBody()
    v = 1.1
    z0 = np.array([np.sin(v), 0.0, np.cos(v)])
    # batch of initial states: the paper's two families of initial conditions
    vs = np.linspace(0.1, 2 * np.pi, cfg["batch"] // 2 + 1)[: cfg["batch"] // 2]
    z0s = np.concatenate(
        [np.stack([np.sin(vs), 0 * vs, np.cos(vs)], 1), np.stack([0 * vs, np.sin(vs), np.cos(vs)], 1)]
    )[: cfg["batch"]]
    if z0s.shape[0] < cfg["batch"]:
        z0s = np.concatenate([z0s, z0s[: cfg["batch"] - z0s.shape[0]]])

    out: dict = {"config": cfg, "rows": []}
    n = cfg["n_states"]
    pw = T
    n_batch_points = T + pw * cfg["batch_steps"]
    loaded = None
    if model_path is not None:
        loaded = gl.load(model_path)
        if not isinstance(loaded, gl.AbstractTransformerIntegrator) or loaded.dim != 3:
            raise ValueError(
                f"--model must hold a transformer integrator of dimension 3, got "
                f"{type(loaded).__name__} with dim={loaded.dim}"
            )
        cfg["model"] = {"path": model_path, "class": type(loaded).__name__,
                        "config": {k: str(v) for k, v in loaded.config().items()}}
    for dtype in cfg["dtypes"]:
        if loaded is not None:
            # the model's own parameters, cast to the rollout dtype
            model = jax.tree_util.tree_map(
                lambda a: a.astype(dtype) if eqx.is_inexact_array(a) else a, loaded
            )
        else:
            model = gl.VolumePreservingTransformer(
                3, **cfg["vpt"], key=jax.random.PRNGKey(0), dtype=dtype
            )
        n_params = sum(a.size for a in jax.tree_util.tree_leaves(model) if hasattr(a, "size"))
        z0d = jnp.asarray(z0, dtype=dtype)
        window = integrate(system, z0d, DT, T - 1, method="implicit_midpoint")
        z0sd = jnp.asarray(z0s, dtype=dtype)
        windows = integrate(system, z0sd, DT, T - 1, method="implicit_midpoint")

        vpt = C.first_and_steady(
            lambda: gl.iterate(model, window, n, prediction_window=pw), cfg["repeats"]
        )
        mid = C.first_and_steady(
            lambda: integrate(system, z0d, DT, n, method="implicit_midpoint"), cfg["repeats"]
        )
        vpt_b = C.first_and_steady(
            lambda: gl.iterate(model, windows, n_batch_points, prediction_window=pw),
            cfg["repeats"],
        )
        mid_b = C.first_and_steady(
            lambda: integrate(system, z0sd, DT, cfg["batch_steps"], method="implicit_midpoint"),
            cfg["repeats"],
        )
        # the ratio, interleaved in this process; and the kernels of the loop bodies
        ratio = _interleaved(
            lambda: gl.iterate(model, window, n, prediction_window=pw),
            lambda: integrate(system, z0d, DT, n, method="implicit_midpoint"),
            cfg["ratio_repeats"],
        )
        ratio_b = _interleaved(
            lambda: gl.iterate(model, windows, n_batch_points, prediction_window=pw),
            lambda: integrate(system, z0sd, DT, cfg["batch_steps"], method="implicit_midpoint"),
            cfg["ratio_repeats"],
        )
        # per new state: the transformer appends pw states per call, midpoint one per step
        ratio["per_state_ratio"] = ratio["ratio_median"] * (n + 1) / n
        ratio_b["per_state_ratio"] = ratio_b["ratio_median"] * (
            cfg["batch_steps"] / (pw * cfg["batch_steps"])
        )
        kernels = _kernel_counts(model, window, n, pw, system, z0d)
        new_states_b = cfg["batch"] * pw * cfg["batch_steps"]
        mid_states_b = cfg["batch"] * cfg["batch_steps"]
        out["rows"].append(
            {
                "dtype": dtype,
                "n_params": int(n_params),
                "single": {
                    "transformer": {
                        **_summary(vpt), "n_states": n, "shape": list(vpt["result"].shape),
                        "model_calls": -(-(n - T) // pw), **_stats(vpt["result"]),
                    },
                    "implicit_midpoint": {
                        **_summary(mid), "n_steps": n, "shape": list(mid["result"].shape),
                        **_stats(mid["result"]),
                    },
                },
                "ratio": {"single": ratio, "batched": ratio_b},
                "kernels": kernels,
                "batched": {
                    "transformer": {
                        **_summary(vpt_b), "batch": cfg["batch"], "steps": cfg["batch_steps"],
                        "new_states": new_states_b,
                        "states_per_s": new_states_b / vpt_b["median_s"],
                        "shape": list(vpt_b["result"].shape), **_stats(vpt_b["result"]),
                    },
                    "implicit_midpoint": {
                        **_summary(mid_b), "batch": cfg["batch"], "steps": cfg["batch_steps"],
                        "new_states": mid_states_b,
                        "states_per_s": mid_states_b / mid_b["median_s"],
                        "shape": list(mid_b["result"].shape), **_stats(mid_b["result"]),
                    },
                },
            }
        )
    out["families"] = _families(cfg)
    out["positional_encoding"] = _positional_encoding(cfg["pe"]["T"], cfg["pe"]["dim"], cfg["repeats"])
    return out


def _kernel_counts(model, window, n, pw, system, z0) -> dict:
    """Kernels per loop body: `iterate`'s rollout (the inference form), a rollout of the
    plain model map, and implicit midpoint (outer loop and its solver loop)."""
    import jax
    import jax.numpy as jnp

    from geomlearn.integrators import integrate

    T = window.shape[0]
    task = model.rollout_task(window.shape, prediction_window=pw)
    form_text = jax.jit(lambda m, w: m.rollout(w, n, task)).lower(model, window).compile().as_text()

    def plain(m, w):
        def body(win, _):
            new = m(win)[T - pw:]
            return jnp.concatenate([win[pw:], new], axis=0), new

        return jax.lax.scan(body, w, None, length=-(-(n - T) // pw))[1]

    plain_text = jax.jit(plain).lower(model, window).compile().as_text()
    mid_text = jax.jit(lambda z: integrate(system, z, DT, n, method="implicit_midpoint")).lower(z0).compile().as_text()
    return {
        "inference_form": kernels_per_loop_body(form_text)[0]["kernels"],
        "model_map": kernels_per_loop_body(plain_text)[0]["kernels"],
        "implicit_midpoint_loops": [b["kernels"] for b in kernels_per_loop_body(mid_text)],
        "inference_form_by_op": kernels_per_loop_body(form_text)[0]["by_op"],
    }


def _families(cfg) -> list[dict]:
    """states/s of `iterate` for other families next to `integrate` on the same system
    (float64, one rollout of `family_states` states, random networks)."""
    import jax
    import jax.numpy as jnp

    import geomlearn as gl
    from geomlearn.integrators import integrate

    full = cfg["families"] == "full"
    n = cfg["family_states"]
    key = jax.random.PRNGKey(1)
    pend, osc, rigid = gl.systems.Pendulum(), gl.systems.CoupledHarmonicOscillator(), gl.systems.RigidBody()
    zp = jnp.array([1.0, 0.0])
    zo = jnp.array([1.0, 0.5, 0.0, 0.0])
    zr = jnp.array([0.0, 0.8912, 0.4536])
    models = [
        ("pendulum", "G-SympNet", gl.GSympNet(2, n_layers=5 if full else 2, width=30 if full else 4, activation="sigmoid", key=key), zp, None),
        ("pendulum", "LA-SympNet", gl.LASympNet(2, n_layers=3 if full else 2, n_linear=2 if full else 1, activation="sigmoid", key=key), zp, None),
        ("coupled oscillator", "LST (T=pw=4)", gl.LinearSymplecticTransformer(4, 4, n_sympnet=2 if full else 1, width=4 if full else 2, L=1, key=key), None, zo),
        ("rigid body", "VP feed-forward", gl.VolumePreservingFeedForward(3, n_blocks=6 if full else 1, key=key), zr, None),
    ]
    rows = []
    for system_name, name, model, z0, zw in models:
        if zw is not None:
            initial = integrate(osc, zw, 0.3, 3, method="implicit_midpoint")  # a (4, 4) window
        else:
            initial = z0
        t = C.first_and_steady(lambda: gl.iterate(model, initial, n), cfg["repeats"])
        rows.append({"system": system_name, "what": f"{name} (iterate)", "states_per_s": n / t["median_s"],
                     "median_s": t["median_s"], "compile_s": t["compile_s"], "finite": _stats(t["result"])["finite"]})
    for system_name, system, z0, dt, methods in (
        ("pendulum", pend, zp, 0.1, ("stormer_verlet", "implicit_midpoint")),
        ("coupled oscillator", osc, zo, 0.3, ("stormer_verlet", "implicit_midpoint")),
        ("rigid body", rigid, zr, DT, ("implicit_midpoint",)),
    ):
        for method in methods:
            t = C.first_and_steady(lambda: integrate(system, z0, dt, n, method=method), cfg["repeats"])
            rows.append({"system": system_name, "what": f"integrate, {method}", "states_per_s": n / t["median_s"],
                         "median_s": t["median_s"], "compile_s": t["compile_s"], "finite": _stats(t["result"])["finite"]})
    return rows


def _positional_encoding(T: int, dim: int, repeats: int) -> dict:
    """First jitted call of `PositionalEncoding(dim)` on a `(T, dim)` float32 window, its
    steady cost and compiled size; the per-call cost of a short `(3, 3)` window."""
    import jax
    import jax.numpy as jnp

    import geomlearn as gl

    pe = gl.PositionalEncoding(dim)
    x = jnp.zeros((T, dim), jnp.float32)
    C.block(x)
    jitted = jax.jit(pe)
    first = C.first_and_steady(lambda: jitted(x), repeats)
    size = len(jax.jit(gl.PositionalEncoding(dim)).lower(x).compile().as_text())
    small = gl.PositionalEncoding(3)
    xs = jnp.zeros((3, 3), jnp.float32)
    eager = C.first_and_steady(lambda: small(xs), max(repeats, 20))
    small_jit = jax.jit(small)
    jit_small = C.first_and_steady(lambda: small_jit(xs), max(repeats, 20))
    return {"T": T, "dim": dim, "first_call_s": first["first_s"], "steady_s": first["median_s"],
            "program_chars": size, "short_eager_s": eager["median_s"],
            "short_jit_s": jit_small["median_s"], "short_jit_first_s": jit_small["first_s"]}


def run(*, quick: bool = False, out=None, repeats: int | None = None,
        model: str | None = None) -> dict:
    started = time.perf_counter()
    model_path = None if model is None else str(C.Path(model).resolve())
    raw = C.run_pinned(
        "benchmarks.rollout_speed", "measure",
        {"quick": quick, "repeats": repeats, "model_path": model_path},
    )
    machine = raw.pop("_machine")
    pinning = raw.pop("_pinning")
    cfg = raw["config"]

    rows = []
    for r in raw["rows"]:
        for what, label, paper in (
            ("transformer", "VPT (geomlearn.iterate)", PAPER_TRANSFORMER_S),
            ("implicit_midpoint", "implicit midpoint (integrate)", PAPER_MIDPOINT_S),
        ):
            s, b = r["single"][what], r["batched"][what]
            rows.append(
                {
                    "dtype": r["dtype"],
                    "what": label,
                    "median_s": s["median_s"],
                    "compile_s": s["compile_s"],
                    "states_per_s": cfg["n_states"] / s["median_s"],
                    "paper_s": paper,
                    "batched_states_per_s": b["states_per_s"],
                    "finite": s["finite"] and b["finite"],
                    "first_nonfinite": s["first_nonfinite_state"],
                }
            )
    targets = []
    for r in raw["rows"]:
        t = r["single"]["transformer"]["median_s"]
        targets.append(
            C.target(
                f"VPT rollout of {cfg['n_states']:,} states, {r['dtype']}, one core",
                f"≤ {TARGET_S} s (paper 0.71 s)", t, t <= TARGET_S, "s",
                note=f"implicit midpoint in the same run: "
                f"{r['single']['implicit_midpoint']['median_s']:.3f} s (paper 2.51 s)",
            )
        )
    for r in raw["rows"]:
        for part in ("single", "batched"):
            q = r["ratio"][part]["per_state_ratio"]  # time per state, VPT / midpoint
            targets.append(
                C.target(
                    f"VPT rollout / implicit midpoint per state, {part}, {r['dtype']} (same "
                    "process, interleaved)",
                    "≤ 1", q, q <= 1.0, "",
                    note=f"kernels per network call: {r['kernels']['inference_form']} "
                    f"(plain model map: {r['kernels']['model_map']})",
                )
            )
    pe = raw["positional_encoding"]
    targets.append(
        C.target(
            f"PositionalEncoding({pe['dim']}) first jitted call, T={pe['T']:,}, float32",
            f"≤ {PE_TARGET_S} s", pe["first_call_s"], pe["first_call_s"] <= PE_TARGET_S, "s",
            note=f"compiled program {pe['program_chars']:,} characters",
        )
    )
    targets = C.quick_targets(targets, quick)
    cols = [
        ("dtype", "dtype", ""),
        ("what", "what", ""),
        ("median_s", f"{cfg['n_states']:,} states (s)", ".4f"),
        ("compile_s", "compile (s)", ".3f"),
        ("states_per_s", "states/s", ",.0f"),
        ("paper_s", "paper (s)", ".2f"),
        ("batched_states_per_s", f"batched {cfg['batch']}x{cfg['batch_steps']} states/s", ",.0f"),
        ("finite", "finite", ""),
        ("first_nonfinite", "first non-finite state", "d"),
    ]
    title = (
        "Rollout, one core ("
        + (f"trained {cfg['model']['class']} from {model}" if model else
           "random VolumePreservingTransformer(3, "
           + ", ".join(f"{k}={v}" for k, v in cfg["vpt"].items()) + ")")
        + ", T=pw=3; implicit midpoint dt=0.2)"
    )
    ratio_rows = []
    for r in raw["rows"]:
        for part in ("single", "batched"):
            q = r["ratio"][part]
            ratio_rows.append({
                "dtype": r["dtype"], "part": part, "vpt_s": q["a_median_s"],
                "mid_s": q["b_median_s"], "ratio": q["ratio_median"],
                "per_state": q["per_state_ratio"],
                "k_form": r["kernels"]["inference_form"], "k_model": r["kernels"]["model_map"],
                "k_mid": "+".join(map(str, r["kernels"]["implicit_midpoint_loops"])),
            })
    ratio_cols = [
        ("dtype", "dtype", ""), ("part", "rollout", ""),
        ("vpt_s", "VPT (s)", ".4f"), ("mid_s", "implicit midpoint (s)", ".4f"),
        ("ratio", "ratio (median of interleaved)", ".2f"), ("per_state", "ratio per state", ".2f"),
        ("k_form", "kernels/call (iterate)", "d"), ("k_model", "kernels/call (model map)", "d"),
        ("k_mid", "kernels/step midpoint (loops)", ""),
    ]
    fam_cols = [("system", "system", ""), ("what", "what", ""), ("states_per_s", "states/s", ",.0f"),
                ("median_s", "time (s)", ".4f"), ("compile_s", "compile (s)", ".3f"), ("finite", "finite", "")]
    pe = raw["positional_encoding"]
    pe_rows = [{"what": f"first jitted call, ({pe['T']:,}, {pe['dim']}) float32", "value": pe["first_call_s"] * 1e3},
               {"what": "steady call, same window", "value": pe["steady_s"] * 1e3},
               {"what": "short (3, 3) window, eager call", "value": pe["short_eager_s"] * 1e3},
               {"what": "short (3, 3) window, jitted call", "value": pe["short_jit_s"] * 1e3}]
    payload = C.make_payload(
        NAME,
        quick=quick,
        options={"repeats": repeats, "model": model},
        settings={**cfg, "dt": DT, "T": T, "pw": T, "pinning": pinning},
        results={"rows": raw["rows"], "families": raw["families"],
                 "positional_encoding": raw["positional_encoding"]},
        tables=[
            C.table(title, cols, rows),
            C.table("VPT / implicit midpoint, interleaved in one process (median of per-repeat ratios)",
                    ratio_cols, ratio_rows),
            C.table(f"Other families, float64, {cfg['family_states']:,} states, one core",
                    fam_cols, raw["families"]),
            C.table("Positional encoding (ms)", [("what", "what", ""), ("value", "ms", ".3f")], pe_rows),
        ],
        targets=targets,
        notes=[f"one core: {pinning['how']}"],
        started=started,
        machine=machine,
    )
    return C.finish(out, payload)
