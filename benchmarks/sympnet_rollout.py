"""Rollout throughput of the command line's small symplectic networks on one CPU core.

The networks `geomlearn train` builds by default — `GSympNet(n_layers=4, width=16)`,
`LASympNet(n_layers=3, n_linear=2)`, `HenonNet(n_layers=3, width=8)` — on phase spaces
of dimension 2 and 4, rolled out from `B = 1, 6, 16, 512` initial states (float64,
default initialisation, initial states of size 0.5), states per second of:

- **rollout**: the compiled rollout `geomlearn.iterate` runs (`model.rollout` under
  `jax.vmap`, the family's inference form contracting by broadcast or by `dot` as the
  batch size says);
- **model map**: a `lax.scan` of the model map itself under `jax.vmap`, the rollout
  before the families had an inference form;
- **hand, dot** and **hand, broadcast**: the same arithmetic written by hand on the
  batch `(B, dim)` — every contraction a `dot`, or every contraction a broadcast multiply
  and a sum;
- **`iterate`** itself, the user's call: the rollout plus its validation and finiteness
  check, whose fixed cost per call is reported (`iterate` − rollout).

Every compiled program takes the network as an argument. All are compiled before timing
and timed interleaved (`repeats` rounds; ratios are medians of the per-round ratios), so
load on the machine moves them together. The states of every form are compared with the
model map's (max absolute difference).

**Targets:** the rollout ≥ 3× the model map for 1–16 trajectories and not slower at 512;
≥ 0.8× the faster hand-written form at every batch; the same states to 1e-12.
"""

from __future__ import annotations

import statistics

from . import _common as C
from ._harness import REPEATS, Benchmark, Column, Option, Table

FAMILIES = ("gsympnet", "lasympnet", "henonnet")


def _models(dim: int, key):
    import geomlearn as gl

    return {
        "gsympnet": gl.GSympNet(dim, n_layers=4, width=16, key=key),
        "lasympnet": gl.LASympNet(dim, n_layers=3, n_linear=2, key=key),
        "henonnet": gl.HenonNet(dim, n_layers=3, width=8, key=key),
    }


def _hand_steps(broadcast: bool):
    """`step(form, z)`: one step on a batch `(B, dim)`, written by hand from the arrays of
    the family's inference form."""
    import jax
    import jax.numpy as jnp

    from geomlearn._activations import resolve_activation
    from geomlearn.models._shear_forms import GradientShearsForm, HenonForm

    def mv(K, x):  # (B, n) -> (B, w): x K^T
        return jnp.sum(x[:, None, :] * K[None], -1) if broadcast else x @ K.T

    def rmv(K, v):  # (B, w) -> (B, n): v K
        return jnp.sum(v[:, :, None] * K[None], 1) if broadcast else v @ K

    def shear(z, f, q_side):
        n = z.shape[1] // 2
        q, p = z[:, :n], z[:, n:]
        return (jnp.concatenate([q + f(p), p], 1) if q_side else jnp.concatenate([q, p + f(q)], 1))

    def gradient(form, z):
        sigma = resolve_activation(form.activation)
        for K, a, b, q_side in zip(form.K, form.a, form.b, form.changes_q):
            z = shear(z, lambda x, K=K, a=a, b=b: rmv(K, a[None] * sigma(mv(K, x) + b[None])), q_side)
        return z

    def henon(form, z):
        dsigma = jax.vmap(jax.grad(resolve_activation(form.activation)))
        n = z.shape[1] // 2
        x, y = z[:, :n], z[:, n:]
        for i in range(form.K.shape[0]):
            K, a, b, eta = form.K[i], form.a[i], form.b[i], form.eta[i]
            for _ in range(4):
                pre = mv(K, y) + b[None]
                x, y = y + eta[None], rmv(K, a[None] * dsigma(pre.ravel()).reshape(pre.shape)) - x
        return jnp.concatenate([x, y], 1)

    def linear_activation(form, z):
        sigma = resolve_activation(form.activation)
        for i, (module, sides) in enumerate(zip(form.S, form.linear_q)):
            for S, q_side in zip(module, sides):
                z = shear(z, lambda x, S=S: mv(S, x), q_side)
            z = z + form.biases[i][None]
            if i < len(form.a):
                z = shear(z, lambda x, a=form.a[i]: a[None] * sigma(x), form.activation_q[i])
        return z

    def step(form, z):
        if isinstance(form, GradientShearsForm):
            return gradient(form, z)
        return henon(form, z) if isinstance(form, HenonForm) else linear_activation(form, z)
    return step


def _rollouts(model, n_states: int, batch: int):
    """The compiled rollouts `z0 (B, dim) -> (B, n_states, dim)`, each taking the network
    as an argument (so none of them folds the parameters into its program)."""
    import dataclasses

    import jax
    import jax.numpy as jnp

    import geomlearn as gl

    form = model.inference_form()
    task = dataclasses.replace(model.rollout_task((batch, model.dim)), batch=batch)

    def scanned(step):
        @jax.jit
        def run(params, z0):
            _, zs = jax.lax.scan(lambda z, _: (step(params, z),) * 2, z0, None, length=n_states - 1)
            return jnp.concatenate([z0[:, None], jnp.swapaxes(zs, 0, 1)], 1)
        return run

    inference = jax.jit(lambda m, z0: jax.vmap(lambda z: m.rollout(z, n_states, task))(z0))
    hand_dot, hand_broadcast = scanned(_hand_steps(False)), scanned(_hand_steps(True))
    map_run = scanned(lambda m, z: jax.vmap(m)(z))
    return {
        "iterate": lambda z0: gl.iterate(model, z0, n_states),
        "inference_form": lambda z0: inference(model, z0),
        "model_map": lambda z0: map_run(model, z0),
        "hand_dot": lambda z0: hand_dot(form, z0),
        "hand_broadcast": lambda z0: hand_broadcast(form, z0),
    }


def measure(settings, ctx):
    import jax
    import jax.numpy as jnp
    import numpy as np

    jax.config.update("jax_enable_x64", True)
    n, rows = settings["n_states"], []
    for dim in settings["dims"]:
        models = _models(dim, jax.random.PRNGKey(0))
        for family in settings["families"]:
            for B in settings["batches"]:
                runs = _rollouts(models[family], n, B)
                z0 = jnp.asarray(0.5 * np.random.default_rng(B).normal(size=(B, dim)))
                outs = {name: np.asarray(C.block(f(z0))) for name, f in runs.items()}
                times = {name: [] for name in runs}
                for _ in range(settings["repeats"]):
                    for name, f in runs.items():
                        times[name].append(C.timed(f, z0)[1])
                ratio = lambda a, b: statistics.median(x / y for x, y in zip(times[a], times[b]))  # noqa: E731
                rate = {name: B * (n - 1) / statistics.median(t) for name, t in times.items()}
                best_hand = min(("hand_dot", "hand_broadcast"), key=lambda k: statistics.median(times[k]))
                overhead = statistics.median(a - b for a, b in zip(times["iterate"], times["inference_form"]))
                diff = max(float(np.max(np.abs(outs[k] - outs["model_map"]))) for k in outs)
                rows.append({
                    "family": family, "dim": dim, "batch": B,
                    **{f"{k}_per_s": v for k, v in rate.items()},
                    "speedup": ratio("model_map", "inference_form"),
                    "vs_best_hand": ratio(best_hand, "inference_form"), "best_hand": best_hand,
                    "iterate_overhead_s": overhead,
                    "max_difference": diff, "finite": bool(np.isfinite(outs["model_map"]).all()),
                })
                ctx.log(f"{family} dim={dim} B={B}: the rollout at {rows[-1]['speedup']:.2f}x the model map")
    return {"rows": rows}


def _pivot(settings, results) -> list[dict]:
    """One row per network and dimension; per batch size "×model map / ×best hand"."""
    out = {}
    for r in results["rows"]:
        row = out.setdefault((r["family"], r["dim"]), {"family": r["family"], "dim": r["dim"],
                                                       "max_difference": 0.0})
        i = settings["batches"].index(r["batch"])
        row[f"b{i}"] = f"{r['speedup']:.2f} / {r['vs_best_hand']:.2f}"
        if i in (0, len(settings["batches"]) - 1):
            row["rate_first" if i == 0 else "rate_last"] = r["inference_form_per_s"]
        row["max_difference"] = max(row["max_difference"], r["max_difference"])
    return list(out.values())


def targets(settings, results):
    rows = results["rows"]
    small = [r["speedup"] for r in rows if r["batch"] <= 16]
    large = [r["speedup"] for r in rows if r["batch"] >= 512]
    hand = [r["vs_best_hand"] for r in rows]
    same = max(r["max_difference"] for r in rows if r["finite"])
    worst = min((r for r in rows if r["batch"] <= 16), key=lambda r: r["speedup"])
    hand_rate = max(worst["hand_dot_per_s"], worst["hand_broadcast_per_s"])
    note = (f"worst: {worst['family']}, dim {worst['dim']}, B = {worst['batch']}, whose model map "
            f"runs at {worst['model_map_per_s'] / hand_rate:.2f}× the faster hand-written form")
    out = [C.target("rollout / model map, 1-16 trajectories (worst)", "≥ 3", min(small), min(small) >= 3,
                    note=note)]
    if large:
        out.append(C.target("rollout / model map, 512 trajectories (worst)", "≥ 1", min(large), min(large) >= 1))
    out += [C.target("rollout / faster hand-written form (worst)", "≥ 0.8", min(hand), min(hand) >= 0.8),
            C.target("largest state difference from the model map", "≤ 1e-12", same, same <= 1e-12)]
    return out


SPEC = Benchmark(
    name="sympnet_rollout",
    description="rollout of the CLI's SympNets and Hénon nets on one core: inference forms vs "
    "the plain model map vs hand-written dot and broadcast forms, 1-512 trajectories",
    full={"n_states": 5_000, "dims": [2, 4], "batches": [1, 6, 16, 512],
          "families": list(FAMILIES), "repeats": 5},
    quick={"n_states": 50, "dims": [2], "batches": [1, 2, 3, 4], "families": list(FAMILIES),
           "repeats": 1},
    measure=measure,
    tables=(Table("Rollout of {n_states} states (float64): states per second, and per batch "
                  "size B the rollout's speed over the model map's / over the faster hand-written "
                  "form's", (
        Column("family", "network"), Column("dim", "dim"),
        Column("rate_first", "states/s, B = {batches[0]}", ".3g"),
        Column("rate_last", "states/s, B = {batches[3]}", ".3g"),  # four batch sizes
        *(Column(f"b{i}", f"B = {{batches[{i}]}}") for i in range(4)),
        Column("max_difference", "max |Δ|", ".1e")), rows=_pivot),)
    + (Table("Each run, {n_states} states per trajectory", (
        Column("family", "network"), Column("dim", "dim"), Column("batch", "B"),
        Column("inference_form_per_s", "rollout", ".3g"), Column("model_map_per_s", "model map", ".3g"),
        Column("hand_dot_per_s", "hand, dot", ".3g"),
        Column("hand_broadcast_per_s", "hand, broadcast", ".3g"),
        Column("iterate_per_s", "iterate", ".3g"),
        Column("iterate_overhead_s", "iterate − rollout (s)", ".1e")), rows="rows"),),
    targets=targets,
    options=(REPEATS, Option("--n-states", int, "states per trajectory")),
    one_core=True,
)
NAME, DESCRIPTION = SPEC.name, SPEC.description
add_arguments, run = SPEC.add_arguments, SPEC.run
