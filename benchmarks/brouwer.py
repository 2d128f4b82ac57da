r"""Round-off at its limit: the Casimir of a Lie–Poisson network over long rollouts.

A `LiePoissonNet` keeps $C(z) = |z|^2$ exactly for every parameter value, so over $n$
steps its Casimir can only move by rounding. If the rounding of a step is unbiased, the
errors add up like a random walk, $\sim \varepsilon\sqrt n$ (Brouwer's law); a bias in
any operation adds up like $\varepsilon n$, a steady trend.

**Model.** `LiePoissonNet(3, n_layers=6, width=2)` (the command line's `lpnet`
defaults) with **fixed random parameters**, not trained: every parameter redrawn from
$N(0, \sigma^2)$, $\sigma$ = `scale`, by NumPy from the seed, so the axes point anywhere
(not along the coordinate axes of a fresh network, on which $|n| = 1$ happens to be
exact) and the rotation angles are of the size a trained rigid-body network uses. A
Lie–Poisson network is bounded for every parameter value (it stays on its sphere).
`n_models` seeds, `n_states` initial states each from $N(0, I_3)$; float32 and float64
(the same parameters, rounded).

**Variants.**

- `sin/cos form`: the layers evaluated as $z + \sin\theta\,(z\times n) -
  2\sin^2(\theta/2)\,(z - (n\cdot z)\, n)$ with $n = v/|v|$ (the evaluation the layer used
  before it was written through the Gibbs vector), plain `lax.scan`;
- `plain`: the layers as they are, $z + \Delta_i(z)$ with $\Delta_i$ through the Gibbs
  vector (`LiePoissonRidgeLayer.increment`), plain `lax.scan` (`scan_rollout`);
- `compensated`: `geomlearn.iterate`, which rolls the network out with
  `compensated_step` (Kahan summation of every $z + \Delta_i$, the rounding carried).

**Measured.** Per rollout the relative deviation $d_t = C(z_t)/C(z_0) - 1$ for
$t \le n$; *drift*: $\max_t |d_t|$, worst over the rollouts; *drift / ε√n* with
$\varepsilon$ the unit round-off ($2^{-24}$ in float32, $2^{-53}$ in float64: half of
NumPy's `finfo(dtype).eps`); *trend*: the slope of the least-squares line through $d_t$
against $t$, times $n$, in units of $\varepsilon\sqrt n$ (largest $|\cdot|$ over the
rollouts; a random walk gives $O(1)$, a bias grows like $\sqrt n$); *growth n/10 → n*:
the median over rollouts of $\max_{t \le n}|d_t| / \max_{t \le n/10}|d_t|$ ($\approx\sqrt{10}$
for a random walk, $\approx 10$ for a trend). *Time*: a jitted rollout of all
`n_states` states of one model (`vmap`, as `iterate` runs it) and of one state, compiled
first (not timed), median of `repeats` calls, run in a process pinned to one core. Also
the time of `n_states` states with each small loop compiled as one kernel: XLA's CPU
backend does so for a `while` loop whose body accesses at most a byte threshold (1 kB
by default), else it runs the body as one call per operation, whose fixed cost dominates
a step of a few states; a second pinned process raises the threshold to `kernel_bytes`
(`XLA_FLAGS=--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=N`).
"""

from __future__ import annotations

import math

from . import _common as C
from ._harness import REPEATS, Benchmark, Column, Option, Table

VARIANTS = ("sin/cos form", "plain", "compensated")
DTYPES = ("float32", "float64")

FULL = {"n_steps": 100_000, "n_models": 2, "n_states": 4, "n_layers": 6, "width": 2,
        "scale": 0.3, "repeats": 5, "seed": 0, "kernel_bytes": 65536}
QUICK = {"n_steps": 2_000, "n_models": 1, "n_states": 2, "n_layers": 6, "width": 2,
         "scale": 0.3, "repeats": 2, "seed": 0, "kernel_bytes": 65536}
KERNEL_FLAG = "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold={}"


def _model(settings, index: int, dtype):
    """The `index`-th network, every parameter from N(0, scale²) (NumPy, seeded)."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import numpy as np

    from geomlearn.models import LiePoissonNet

    rng = np.random.default_rng([settings["seed"], index])
    model = LiePoissonNet(3, n_layers=settings["n_layers"], width=settings["width"],
                          key=jax.random.PRNGKey(index), dtype=jnp.float64)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    leaves, treedef = jax.tree_util.tree_flatten(params)
    leaves = [jnp.asarray(settings["scale"] * rng.standard_normal(x.shape), dtype)
              for x in leaves]
    z0 = jnp.asarray(rng.standard_normal((settings["n_states"], 3)), dtype)
    return eqx.combine(jax.tree_util.tree_unflatten(treedef, leaves), static), z0


def _sin_cos_step(model):
    """The network map with the layers in the sin/cos form (see the module docstring)."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    params, static = eqx.partition(model.layers, eqx.is_array)

    def layer_map(z, layer_params):
        layer = eqx.combine(layer_params, static)
        n = layer.axis(z.dtype)
        s = jnp.dot(n, z)
        theta = layer.slope(s)
        half = jnp.sin(0.5 * theta)
        return z + jnp.sin(theta) * jnp.cross(z, n) - (2 * half * half) * (z - s * n), None

    return lambda z: jax.lax.scan(layer_map, z, params)[0]


def _rollouts(model, n_points: int):
    """name → a jitted function of a batch of initial states `(B, 3)`."""
    import equinox as eqx
    import jax

    from geomlearn.models._base import compensated_rollout, scan_rollout

    def batched(rollout):
        # the parameters are arguments, as in `iterate` (not constants folded at compile)
        fn = eqx.filter_jit(lambda m, z: jax.vmap(lambda y: rollout(m, y))(z))
        return lambda z: fn(model, z)

    return {
        "sin/cos form": batched(lambda m, z: scan_rollout(_sin_cos_step(m), z, n_points)),
        "plain": batched(lambda m, z: scan_rollout(m, z, n_points)),
        "compensated": batched(
            lambda m, z: compensated_rollout(m.compensated_step, z, n_points)),
    }


def _drift(states, n_steps: int) -> dict:
    """Drift, trend and growth of the Casimir along rollouts `(B, n + 1, 3)`."""
    import numpy as np

    z = np.asarray(states, np.float64)
    c = np.sum(z * z, axis=-1)
    d = c[:, 1:] / c[:, :1] - 1.0
    t = np.arange(1, n_steps + 1, dtype=np.float64)
    slopes = np.polyfit(t, d.T, 1)[0] * n_steps
    tenth = np.max(np.abs(d[:, : n_steps // 10]), axis=1)
    growth = np.max(np.abs(d), axis=1) / np.maximum(tenth, np.finfo(np.float64).tiny)
    return {"drift": float(np.max(np.abs(d))), "trend": float(slopes[np.argmax(np.abs(slopes))]),
            "growth": float(np.median(growth))}


def _measure_dtype(settings, dtype_name: str, ctx) -> list[dict]:
    import jax.numpy as jnp
    import numpy as np

    import geomlearn as gl

    dtype = jnp.dtype(dtype_name)
    n = settings["n_steps"]
    unit = float(jnp.finfo(dtype).eps) / 2 * math.sqrt(n)
    rows = {v: {"drift": 0.0, "trend": 0.0, "growth": [], "time_batch": [], "time_one": []}
            for v in VARIANTS}
    for index in range(settings["n_models"]):
        model, z0 = _model(settings, index, dtype)
        for name, fn in _rollouts(model, n + 1).items():
            states = C.block(fn(z0))  # the first call compiles
            if name == "compensated":  # what `iterate` runs, state for state
                same = np.array_equal(np.asarray(gl.iterate(model, z0, n + 1)), states)
                rows[name]["iterate_equal"] = rows[name].get("iterate_equal", True) and same
            stats = _drift(states, n)
            row = rows[name]
            row["drift"] = max(row["drift"], stats["drift"])
            row["trend"] = max(row["trend"], stats["trend"], key=abs)
            row["growth"].append(stats["growth"])
            row["time_batch"].append(C.repeat(fn, settings["repeats"], z0)["median_s"])
            C.block(fn(z0[:1]))
            row["time_one"].append(C.repeat(fn, settings["repeats"], z0[:1])["median_s"])
        ctx.log(f"{dtype_name}: model {index} done")
    out = []
    base = rows["plain"]
    for name, row in rows.items():
        out.append({
            "dtype": dtype_name, "variant": name, "drift": row["drift"],
            "ratio": row["drift"] / unit, "trend": row["trend"] / unit,
            "growth": sorted(row["growth"])[len(row["growth"]) // 2],
            "time_batch_s": sum(row["time_batch"]), "time_one_s": sum(row["time_one"]),
            "time_ratio_batch": sum(row["time_batch"]) / sum(base["time_batch"]),
            "time_ratio_one": sum(row["time_one"]) / sum(base["time_one"]),
            "iterate_equal": row.get("iterate_equal"),
        })
    return out


def batch_times(settings) -> dict:
    """`{dtype: {variant: seconds}}`: the median time of each variant's rollout of the
    `n_states` states, summed over the networks (run by `measure` in a process with the
    loop threshold raised)."""
    import jax.numpy as jnp

    times = {d: {v: 0.0 for v in VARIANTS} for d in DTYPES}
    for dtype_name in DTYPES:
        for index in range(settings["n_models"]):
            model, z0 = _model(settings, index, jnp.dtype(dtype_name))
            for name, fn in _rollouts(model, settings["n_steps"] + 1).items():
                C.block(fn(z0))
                times[dtype_name][name] += C.repeat(fn, settings["repeats"], z0)["median_s"]
    return {"times": times}


def measure(settings, ctx) -> dict:
    C.enable_x64()
    rows = []
    for dtype_name in DTYPES:
        rows.extend(_measure_dtype(settings, dtype_name, ctx))
    flag = KERNEL_FLAG.format(settings["kernel_bytes"])
    kernel = C.run_pinned("benchmarks.brouwer", "batch_times", {"settings": dict(settings)},
                          xla_flags=flag)["times"]
    for row in rows:
        mine = kernel[row["dtype"]]
        row["time_kernel_s"] = mine[row["variant"]]
        row["time_ratio_kernel"] = mine[row["variant"]] / mine["plain"]
    return {"rows": rows, "kernel_flag": flag}


def targets(settings, results) -> list[dict]:
    out = []
    for row in results["rows"]:
        if row["variant"] != "compensated":
            continue
        dt = row["dtype"]
        out.append(C.target(f"{dt}: geomlearn.iterate runs the compensated rollout",
                            "same states", None, row["iterate_equal"]))
        out.append(C.target(f"{dt}: Casimir drift / (ε√n), compensated", "≤ 5",
                            row["ratio"], row["ratio"] <= 5.0))
        out.append(C.target(f"{dt}: |trend| / (ε√n), compensated", "≤ 5",
                            abs(row["trend"]), abs(row["trend"]) <= 5.0))
        for key, what in (("time_ratio_batch", f"{settings['n_states']} states"),
                          ("time_ratio_one", "one state"),
                          ("time_ratio_kernel", f"{settings['n_states']} states, loops as "
                                                "one kernel")):
            out.append(C.target(f"{dt}: rollout time compensated / plain, {what}", "≤ 1.3",
                                row[key], row[key] <= 1.3, "×"))
    return out


def notes(settings, results) -> list[str]:
    return [
        "ε: the unit round-off (2^-24 float32, 2^-53 float64); n = "
        f"{settings['n_steps']} steps; {settings['n_models']} networks × "
        f"{settings['n_states']} initial states, fixed random parameters (σ = "
        f"{settings['scale']}), not trained",
        "trend: slope of the least-squares line through C(z_t)/C(z_0) - 1 against t, "
        "times n, in units of ε√n; growth: max drift up to n over max drift up to n/10 "
        "(√10 ≈ 3.16 for a random walk, 10 for a trend)",
        "time: median of the repeats, summed over the networks; ratios against `plain`",
    ]


SPEC = Benchmark(
    name="brouwer",
    description="LiePoissonNet Casimir over 1e5 steps in float32 and float64: plain vs "
    "compensated rollout (drift / ε√n, trend, time)",
    full=FULL,
    quick=QUICK,
    measure=measure,
    tables=(Table("Casimir |z|^2 over {n_steps} steps, LiePoissonNet ({n_layers} layers, "
                  "width {width}, random parameters)",
                  (Column("dtype", "dtype"), Column("variant", "rollout"),
                   Column("drift", "max rel. drift", ".2e"),
                   Column("ratio", "drift / ε√n", ".2f"),
                   Column("trend", "trend / ε√n", ".2f"),
                   Column("growth", "growth n/10 → n", ".2f"),
                   Column("time_batch_s", "time, {n_states} states (s)", ".4f"),
                   Column("time_ratio_batch", "× plain", ".2f"),
                   Column("time_one_s", "time, 1 state (s)", ".4f"),
                   Column("time_ratio_one", "× plain (1 state)", ".2f"),
                   Column("time_kernel_s", "time, {n_states} states, one kernel (s)", ".4f"),
                   Column("time_ratio_kernel", "× plain (one kernel)", ".2f")),
                  rows="rows"),),
    targets=targets,
    notes=notes,
    options=(Option("--n-steps", int, "steps per rollout (default 100000)"), REPEATS,
             Option("--seed", int, "parameter and initial-state seed (default 0)")),
    one_core=True,
)
NAME, DESCRIPTION = SPEC.name, SPEC.description
add_arguments, run = SPEC.add_arguments, SPEC.run
