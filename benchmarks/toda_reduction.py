"""Toda lattice model reduction: PSD (plain and centred) against the symplectic autoencoder.

The reference package (GeometricMachineLearning.jl, its symplectic-autoencoder
tutorial) reduces the 400-dimensional Toda lattice (200 particles, `alpha = 0.64`, bump
initial condition, implicit midpoint, `dt = 0.1`, `t ∈ [0, 800]`) and documents that at
reduced dimension 2 the linear proper symplectic decomposition (PSD) "utterly fails"
while a symplectic autoencoder works, and that a transformer integrator in the reduced
space is about 1000× faster than the full model.

This benchmark, on the same problem:

1. integrates the full model (implicit midpoint, 8000 steps) and times it (a second,
   compiled run);
2. builds the plain and the centred PSD (one SVD each; the centred one about the
   snapshot mean) and trains a `SymplecticAutoencoder` (snapshots every 4th step,
   `riemannian_adam` with a cosine learning-rate schedule, started from the centred PSD
   with per-block loss weights by `initialize_from_psd`, a fixed number `ae_epochs` of
   epochs — not a wall-clock budget, so the result does not depend on the machine's
   load) at reduced dimensions 2 and 4, and at 2n = 2 with further seeds
   (`extra_seeds`);
3. evaluates each with `geomlearn.evaluation.evaluate_reduction`: the projection error
   (all, q, p), the reduced Hamiltonian system's reduction error (mean and max over
   t ∈ [0, 800], and at t = 800), the code-loop action against ∮p·dq of the full orbit
   (one period, T = 250.1), and the online wall time and speed-up, always next to the
   error it comes with;
4. trains a `GSympNet` on the encoded trajectory (reduced one-step pairs) by
   Levenberg–Marquardt (`nn_iterations` iterations) and rolls it out from the encoded
   initial state: in the latent space with the final state decoded
   (`ReducedIntegrator.rollout_at`), and decoding every state; error and wall time;
5. fits the manifold cotangent lift (`geomlearn.manifold_cotangent_lift`: the centred
   PSD bent along its leading direction, least squares, `lift_features` bumps) at the
   same reduced dimensions, evaluates it as in 3., and trains a `GSympNet`
   (`latent_layers` layers) on its codes taking `latent_stride` steps at a time (pairs
   `(y_k, y_{k+s})`), rolled out over the
   same horizon in the latent space: the final state decoded, and every state it
   produces (every `s`-th) decoded. The full model and every online phase of this item
   are timed as the median of `repeats` compiled calls.

**Budget.** The reference trains a 904,366-parameter autoencoder for 262,144 epochs on a
GPU; here (2 shared CPU cores) the autoencoders have gradient layers of width 16
(82k parameters at 2n = 2, most of them in the Stiefel matrices) and train for
`ae_epochs` epochs of 4 minibatches (a few minutes). Set
`OPENBLAS_NUM_THREADS=1` on a shared machine: the Cayley retraction's small linear
solve is otherwise slowed a hundredfold by thread oversubscription.
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from . import _common as C  # noqa: E402

NAME = "toda_reduction"
DESCRIPTION = ("Toda lattice (400 dims): plain and centred PSD vs symplectic autoencoder at "
               "reduced dims 2 and 4; reduced Hamiltonian system and a learned latent SympNet "
               "vs full implicit midpoint, speed paired with accuracy")

FULL = dict(n_particles=200, n_steps=8000, dt=0.1, stride=4, dims=(2, 4), width=16,
            ae_epochs=300, ae_lr=1e-2, batch=500, extra_seeds=(1,), nn_iterations=300,
            nn_layers=4, nn_width=16, times=(100.0, 200.0, 400.0, 800.0),
            lift_features=16, latent_stride=8, latent_layers=8, latent_iterations=400, repeats=7)
QUICK = dict(n_particles=10, n_steps=60, dt=0.1, stride=2, dims=(2,), width=4,
             ae_epochs=5, ae_lr=1e-2, batch=500, extra_seeds=(1,), nn_iterations=5,
             nn_layers=2, nn_width=4, times=(3.0, 6.0),
             lift_features=4, latent_stride=2, latent_layers=2, latent_iterations=3, repeats=2)


def add_arguments(parser) -> None:
    parser.add_argument("--ae-epochs", type=int, default=None,
                        help="epochs of autoencoder training per reduced dimension")


def _stiefel_max_residual(model):
    import jax

    from geomlearn.manifolds import StiefelMatrix, orthonormality_residual

    leaves = jax.tree_util.tree_leaves(model, is_leaf=lambda x: isinstance(x, StiefelMatrix))
    return max(float(orthonormality_residual(x.value)) for x in leaves
               if isinstance(x, StiefelMatrix))


def _train_autoencoder(gl, S, k, s, seed):
    """A `SymplecticAutoencoder` 400 → k started from the PSD and trained for
    `ae_epochs` epochs by Riemannian Adam with a cosine schedule `ae_lr` → `ae_lr / 100`."""
    import jax
    import jax.numpy as jnp
    import optax

    from geomlearn.manifolds import riemannian_adam

    ae = gl.SymplecticAutoencoder(S.shape[-1], k, width=s["width"],
                                  key=jax.random.PRNGKey(k + 100 * seed), dtype=jnp.float64)
    ae = gl.reduction.initialize_from_psd(ae, S)  # centred, per-block loss weights
    batch = min(s["batch"], S.shape[0])
    steps = s["ae_epochs"] * (S.shape[0] // batch)
    schedule = optax.cosine_decay_schedule(s["ae_lr"], steps, alpha=1e-2)
    t0 = time.perf_counter()
    ae, hist = gl.fit(ae, (S, S), epochs=s["ae_epochs"], batch_size=batch,
                      optimizer=riemannian_adam(schedule),
                      key=jax.random.PRNGKey(10 + k + 100 * seed), progress=False)
    return ae, hist, time.perf_counter() - t0


def _train_latent(gl, ae, X, k, s):
    """A `GSympNet` on the encoded trajectory's one-step pairs (Levenberg–Marquardt),
    combined with `ae` into a `ReducedIntegrator`; `(model, train seconds, loss)`."""
    import jax
    import jax.numpy as jnp

    Yenc = jax.vmap(ae.encode)(X)
    net = gl.GSympNet(k, n_layers=s["nn_layers"], width=s["nn_width"],
                      key=jax.random.PRNGKey(20 + k), dtype=jnp.float64)
    t0 = time.perf_counter()
    net, hist = gl.fit(net, (Yenc[:-1], Yenc[1:]), epochs=s["nn_iterations"],
                       optimizer=gl.LevenbergMarquardt(), key=jax.random.PRNGKey(30 + k),
                       progress=False)
    model = gl.reduction.ReducedIntegrator.from_parts(ae, net, n_layers=s["nn_layers"],
                                                   width=s["nn_width"])
    return model, time.perf_counter() - t0, hist["loss"][-1]


def _latent_rows(model, X, full_s, k):
    """The learned latent integrator's online phase: the rollout in the latent space with
    the final state decoded, and with every state decoded; each timed on a compiled
    second run and paired with its error."""
    import jax
    import jax.numpy as jnp

    n = X.shape[0]
    last = jax.jit(lambda z: model.rollout_at(z, [n - 1])[0])
    every = jax.jit(lambda z: model.rollout(z, n, model.task()))
    last(X[0]).block_until_ready()
    every(X[0]).block_until_ready()
    z_end, t_last = C.timed(last, X[0])
    Z, t_all = C.timed(every, X[0])
    rows = jnp.linalg.norm(Z - X, axis=1) / jnp.linalg.norm(X, axis=1)
    end = float(jnp.linalg.norm(z_end - X[-1]) / jnp.linalg.norm(X[-1]))
    return [dict(dim=k, method="autoencoder + learned GSympNet (latent rollout, final state decoded)",
                 seconds=t_last, speedup=full_s / t_last, error_mean=None, error_end=end),
            dict(dim=k, method="autoencoder + learned GSympNet (every state decoded)",
                 seconds=t_all, speedup=full_s / t_all, error_mean=float(jnp.mean(rows)),
                 error_end=float(rows[-1]))]


def _median_time(fn, arg, repeats):
    """`(result, median seconds)` of `repeats` calls of a compiled `fn` (after a warm-up)."""
    out = C.block(fn(arg))
    times = []
    for _ in range(repeats):
        out, seconds = C.timed(fn, arg)
        times.append(seconds)
    return out, C.summarize(times)["median_s"]


def _lift_latent_rows(gl, lift, X, full_s, k, s):
    """A `GSympNet` on the lift's codes, `latent_stride` steps per application (LM,
    `latent_iterations`), rolled out over the horizon: final state decoded / every
    produced state decoded; median times, errors against the full solution."""
    import jax
    import jax.numpy as jnp

    S = s["latent_stride"]
    Y = jax.vmap(lift.encode)(X)
    net = gl.GSympNet(k, n_layers=s["latent_layers"], width=s["nn_width"],
                      key=jax.random.PRNGKey(40 + k), dtype=jnp.float64)
    t0 = time.perf_counter()
    net, hist = gl.fit(net, (Y[:-S], Y[S:]), epochs=s["latent_iterations"],
                       optimizer=gl.LevenbergMarquardt(), key=jax.random.PRNGKey(50 + k),
                       progress=False)
    train_s = time.perf_counter() - t0
    n_apply = (X.shape[0] - 1) // S

    @jax.jit
    def last(z0):
        return lift.decode(jax.lax.fori_loop(0, n_apply, lambda i, y: net(y), lift.encode(z0)))

    @jax.jit
    def every(z0):
        y0 = lift.encode(z0)
        ys = jax.lax.scan(lambda y, _: (net(y), net(y)), y0, None, length=n_apply)[1]
        return jax.vmap(lift.decode)(jnp.concatenate([y0[None], ys]))

    z_end, t_last = _median_time(last, X[0], s["repeats"])
    Z, t_all = _median_time(every, X[0], s["repeats"])
    Xs = X[:: S][: Z.shape[0]]
    rows = jnp.linalg.norm(Z - Xs, axis=1) / jnp.linalg.norm(Xs, axis=1)
    end_state = X[n_apply * S]
    end = float(jnp.linalg.norm(z_end - end_state) / jnp.linalg.norm(end_state))
    name = f"lift + learned GSympNet, {S} steps per application"
    return [dict(dim=k, method=f"{name} (latent rollout, final state decoded)", seconds=t_last,
                 speedup=full_s / t_last, error_mean=None, error_end=end),
            dict(dim=k, method=f"{name} (every produced state decoded)", seconds=t_all,
                 speedup=full_s / t_all, error_mean=float(jnp.mean(rows)), error_end=float(rows[-1]))], \
        dict(train_s=train_s, loss=hist["loss"][-1], stride=S)


def _reduction_row(name, k, ev):
    return dict(dim=k, method=name, proj=ev["projection_error"]["all"],
                proj_q=ev["projection_error_q"], proj_p=ev["projection_error_p"],
                red_mean=ev["reduction_error_mean"], red_max=ev["reduction_error_max"],
                red_end=ev["reduction_error"]["all" if ev["reduction_error_mean"] is None
                                              else list(ev["reduction_error"])[-2]],
                action=ev["code_loop_action"], full_action=ev["full_action"],
                vf=ev["latent_vector_field_error"],
                note=ev["reduction_failed"] or "")


def run(*, quick: bool = False, out=None, ae_epochs=None, **_ignored) -> dict:
    C.enable_x64()
    import jax.numpy as jnp

    import geomlearn as gl
    from geomlearn.evaluation import evaluate_reduction
    from geomlearn.integrators import integrate
    from geomlearn.reduction import projection_error, proper_symplectic_decomposition

    started = time.perf_counter()
    s = dict(QUICK if quick else FULL)
    if ae_epochs is not None:
        s["ae_epochs"] = int(ae_epochs)
    toda = gl.systems.TodaLattice(s["n_particles"])
    z0 = toda.default_initial_conditions(jnp.float64)[0]
    n_steps, dt = s["n_steps"], s["dt"]
    X, full_s = _median_time(lambda z: integrate(toda, z, dt, n_steps), z0, s["repeats"])
    data = gl.TrajectoryData(X[None], dt)
    S = X[:: s["stride"]]
    horizons = [min(n_steps, int(round(t / dt))) for t in s["times"]]

    rows, speed_rows, results = [], [], {"full_s": full_s}
    for k in s["dims"]:
        evs = {"PSD (plain)": evaluate_reduction(proper_symplectic_decomposition(X, k), toda, data,
                                                 horizons=horizons),
               "PSD (centred)": evaluate_reduction(proper_symplectic_decomposition(X, k, centred=True),
                                                   toda, data, horizons=horizons)}
        ae, hist, ae_train_s = _train_autoencoder(gl, S, k, s, seed=0)
        evs["autoencoder"] = evaluate_reduction(ae, toda, data, horizons=horizons)
        results[f"autoencoder_{k}"] = dict(
            epochs=len(hist["loss"]), train_s=ae_train_s, final_loss=hist["loss"][-1],
            stiefel_residual=_stiefel_max_residual(ae),
            immersion_residual=evs["autoencoder"]["immersion_residual"])
        for name, ev in evs.items():
            rows.append(_reduction_row(name, k, ev))
            speed_rows.append(dict(dim=k, method=f"{name} + reduced H (implicit midpoint)",
                                   seconds=ev["reduced_seconds"], speedup=ev["online_speedup"],
                                   error_mean=ev["reduction_error_mean"],
                                   error_end=rows[-1]["red_end"]))
        model, nn_s, nn_loss = _train_latent(gl, ae, X, k, s)
        speed_rows += _latent_rows(model, X, full_s, k)
        results[f"gsympnet_{k}"] = dict(train_s=nn_s, loss=nn_loss)

        t0 = time.perf_counter()
        lift = gl.manifold_cotangent_lift(X, k, n_features=s["lift_features"])
        lift_s = time.perf_counter() - t0
        ev = evaluate_reduction(lift, toda, data, horizons=horizons)
        rows.append(_reduction_row("manifold cotangent lift", k, ev))
        speed_rows.append(dict(dim=k, method="manifold cotangent lift + reduced H (implicit midpoint)",
                               seconds=ev["reduced_seconds"], speedup=ev["online_speedup"],
                               error_mean=ev["reduction_error_mean"], error_end=rows[-1]["red_end"],
                               full_s_in_evaluation=ev["full_order_seconds"]))
        latent, info = _lift_latent_rows(gl, lift, X, full_s, k, s)
        speed_rows += latent
        results[f"lift_{k}"] = dict(fit_s=lift_s, immersion_residual=ev["immersion_residual"],
                                    latent=info)

    # reliability: the projection-error ratio at the first reduced dimension, more seeds
    k0 = s["dims"][0]
    psd_proj = float(projection_error(proper_symplectic_decomposition(X, k0, centred=True), X))
    ratios = [psd_proj / next(r["proj"] for r in rows if r["dim"] == k0 and r["method"] == "autoencoder")]
    for seed in s["extra_seeds"]:
        ae_s, hist_s, secs = _train_autoencoder(gl, S, k0, s, seed=seed)
        proj = float(projection_error(ae_s, X))
        ratios.append(psd_proj / proj)
        results[f"autoencoder_{k0}_seed{seed}"] = dict(proj_all=proj, ratio=psd_proj / proj,
                                                      train_s=secs, final_loss=hist_s["loss"][-1])
    results["ratios_all_seeds"] = ratios
    speed_rows.insert(0, dict(dim=toda.dim, method="full order (implicit midpoint)",
                              seconds=full_s, speedup=1.0, error_mean=0.0, error_end=0.0))
    return _finish(s, quick, ae_epochs, rows, speed_rows, results, ratios, started, out, n_steps)


def _lift_targets(rows, speed_rows, k):
    """The issue's goals for the manifold cotangent lift at reduced dimension `k`."""
    lift = next(r for r in rows if r["dim"] == k and r["method"] == "manifold cotangent lift")
    psd = next(r for r in rows if r["dim"] == k and r["method"] == "PSD (centred)")
    online = [r for r in speed_rows if r["dim"] == k and r["method"].startswith("lift + learned")]
    reduced = next(r for r in speed_rows if r["dim"] == k
                   and r["method"] == "manifold cotangent lift + reduced H (implicit midpoint)")
    last, every = online
    red_ratio = None if lift["red_mean"] is None else lift["red_mean"] / psd["red_mean"]
    action_ok = (lift["action"] is not None and lift["full_action"] is not None
                 and abs(lift["action"] - lift["full_action"]) <= 0.1 * abs(lift["full_action"]))
    latent_ratio = (None if reduced["error_mean"] is None
                    else every["error_mean"] / reduced["error_mean"])
    return [
        C.target(f"lift: mean reduction error ≤ 0.5× the centred PSD's (2n={k})", "≤ 0.5",
                 red_ratio, red_ratio is not None and red_ratio <= 0.5, "×"),
        C.target(f"lift: code-loop action within 10 % of ∮p·dq (2n={k})", "within 10 %",
                 lift["action"], action_ok),
        C.target(f"lift + latent GSympNet: mean error within 1.5× the reduced H system's (2n={k})",
                 "≤ 1.5", latent_ratio, latent_ratio is not None and latent_ratio <= 1.5, "×"),
        C.target(f"lift + latent GSympNet, final state decoded: online speed-up (2n={k})", "≥ 300",
                 last["speedup"], last["speedup"] >= 300, "×"),
        C.target(f"lift + latent GSympNet, every state decoded: online speed-up (2n={k})", "≥ 20",
                 every["speedup"], every["speedup"] >= 20, "×"),
        C.target(f"lift + reduced H system no slower than the full model (2n={k})", "≥ 1",
                 reduced["speedup"], reduced["speedup"] is not None and reduced["speedup"] >= 1, "×"),
    ]


def _finish(s, quick, ae_epochs, rows, speed_rows, results, ratios, started, out, n_steps):
    T = int(s["times"][-1])
    err_cols = [("dim", "2n", "d"), ("method", "method", ""), ("proj", "proj (all)", ".3g"),
                ("proj_q", "proj q", ".3g"), ("proj_p", "proj p", ".3g"),
                ("red_mean", "red mean", ".3g"), ("red_max", "red max", ".3g"),
                ("red_end", f"red t={T}", ".3g"), ("action", "∮p̃dq̃ codes", ".3g"),
                ("full_action", "∮p·dq full", ".3g"), ("vf", "latent field err", ".3g"),
                ("note", "note", "")]
    speed_cols = [("dim", "dim", "d"), ("method", "online phase", ""),
                  ("seconds", "wall s", ".3g"), ("speedup", "speed-up", ".3g"),
                  ("error_mean", "error mean", ".3g"), ("error_end", f"error t={T}", ".3g")]
    tables = [C.table("Projection / reduction errors (relative) and loop actions", err_cols, rows),
              C.table(f"Online phase: {n_steps} steps, speed paired with accuracy", speed_cols,
                      speed_rows)]
    k0 = s["dims"][0]

    def row(m):
        return next(r for r in rows if r["dim"] == k0 and r["method"] == m)

    ae, psd = row("autoencoder"), row("PSD (centred)")
    ratio = min(ratios)
    red_ratio = None if ae["red_mean"] is None else ae["red_mean"] / psd["red_mean"]
    action_ok = (ae["action"] is not None and ae["full_action"] is not None
                 and abs(ae["action"] - ae["full_action"]) <= 0.1 * abs(ae["full_action"]))
    targets = [
        C.target(f"autoencoder projection error below the centred PSD's at 2n={k0} "
                 f"(worst of {len(ratios)} seeds)", "> 1", ratio, ratio > 1, "×"),
        C.target(f"autoencoder mean reduction error ≤ 0.5× the centred PSD's (2n={k0})",
                 "≤ 0.5", red_ratio, red_ratio is not None and red_ratio <= 0.5, "×"),
        C.target(f"code-loop action within 10 % of ∮p·dq (2n={k0})", "within 10 %",
                 ae["action"], action_ok),
    ]
    for k in s["dims"]:
        targets += _lift_targets(rows, speed_rows, k)
    targets = C.quick_targets(targets, quick)
    results["ratio_proj_centred_psd_over_ae"] = ratio
    payload = C.make_payload(NAME, quick=quick, options={"ae_epochs": ae_epochs},
                             settings=s, results=results, targets=targets, started=started,
                             tables=tables, notes=[
                                 "shortened reproduction on 2 shared CPU cores: small "
                                 "autoencoders (width 16) trained for ae_epochs epochs each "
                                 "(cosine schedule), started from the centred PSD with "
                                 "per-block loss weights; the reference: 904,366 parameters, "
                                 "262,144 epochs, GPU",
                                 "the learned GSympNet is trained by Levenberg–Marquardt on "
                                 "reduced one-step pairs (the encoded trajectory); every speed-up "
                                 "is listed with the error it comes with"])
    return C.finish(out, payload)
