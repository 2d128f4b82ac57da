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
        "dtypes": ["float64", "float32"], "vpt": {"n_blocks": 2, "L": 3}}
# smoke test only: a tiny network so that compilation stays short
QUICK = {"n_states": 3_000, "batch": 8, "batch_steps": 20, "repeats": 2,
         "dtypes": ["float64"], "vpt": {"n_blocks": 1, "L": 1}}

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
    return out


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
    payload = C.make_payload(
        NAME,
        quick=quick,
        options={"repeats": repeats, "model": model},
        settings={**cfg, "dt": DT, "T": T, "pw": T, "pinning": pinning},
        results={"rows": raw["rows"]},
        tables=[C.table(title, cols, rows)],
        targets=targets,
        notes=[f"one core: {pinning['how']}"],
        started=started,
        machine=machine,
    )
    return C.finish(out, payload)
