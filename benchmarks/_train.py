r"""A wall-clock-budgeted trainer for the reproduction benchmarks.

The reproduction benchmarks ask what loss a network reaches *within a time budget* on
this machine. `geomlearn.fit` plans a fixed number of epochs; here the budget is
wall-clock seconds. Two methods:

- `"lm"` — **Levenberg–Marquardt** (a Gauss–Newton method with Marquardt's damping) on
  the sum of squared residuals $r(\theta) = \hat Y(\theta) - Y$ over a fixed random
  subset of `lm_samples` training samples. For networks with a few hundred parameters
  the normal matrix $J^\top J$ ($P \times P$) is small: it is accumulated over chunks of
  samples from per-sample Jacobians (`jax.jacrev`, one row block per sample), and each
  step solves $(J^\top J + \lambda\,\mathrm{diag}(J^\top J))\,\delta = -J^\top r$. A step
  that lowers the subset loss is taken and $\lambda$ divided by 3; otherwise $\lambda$
  is multiplied by 4 and the step retried. Minimising $\|r\|^2$ is minimising the
  relative loss $\|r\|/\|Y\|$ on that subset. No library in this project's stack
  (JAX, Equinox, Optax) provides Levenberg–Marquardt, hence this short implementation.
- `"adam-lbfgs"` — **Adam** (`optax.scale_by_adam`) for `adam_fraction` of the budget,
  with a learning rate decaying exponentially in *wall time* from `lr[0]` to `lr[1]`
  over that part of the budget, on the full batch or random minibatches of
  `batch_size` samples; then **L-BFGS** (`optax.lbfgs`, zoom line search) on the full
  batch for the rest (skipped when `adam_fraction >= 1`).

Steps run in jit-compiled chunks of about `chunk_s` seconds (`lax.fori_loop` with a
traced trip count, so chunks of any length share one compilation); after each chunk the
relative loss on the **whole training set** is evaluated and recorded with the wall time
since the start (compilation included), and the best parameters so far are kept. A
non-finite loss ends the phase and restores the best parameters.

The loss `"relative"` is the definition of `geomlearn.fit`:
$\|\hat Y - Y\|_F / \|Y\|_F$ over the data; for transformers only the last `pw` rows
count.
"""

from __future__ import annotations

import math
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

METHODS = ("lm", "adam-lbfgs")


def relative_loss(pred, target):
    return jnp.linalg.norm((pred - target).ravel()) / jnp.linalg.norm(target.ravel())


def _i(n: int):
    return jnp.asarray(n, dtype=jnp.int32)


def _predictor(kind: str, pw: int | None):
    if kind == "pairs":
        return lambda model, x: model(x)
    if kind == "windows":
        return lambda model, x: model(x)[x.shape[0] - pw :]
    raise ValueError(f"unknown kind {kind!r}")


class _Run:
    """Shared bookkeeping: wall time, the loss curve, the best parameters."""

    def __init__(self, loss_of, x, y, params, *, target, log):
        self.start = time.perf_counter()
        self.full_loss = jax.jit(loss_of)
        self.x, self.y = x, y
        self.curve: list = []
        self.best = math.inf
        self.best_params = params
        self.best_t = None
        self.target = target
        self.target_t = None
        self.log = log

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def note(self, phase: str, step: int, p) -> float:
        value = float(self.full_loss(p, self.x, self.y))
        t = self.elapsed()
        self.curve.append([round(t, 3), phase, int(step), value])
        if math.isfinite(value) and value < self.best:
            self.best, self.best_params, self.best_t = value, p, t
        if self.target is not None and self.target_t is None and value <= self.target:
            self.target_t = t
        if self.log is not None:
            self.log(
                f"  {t:8.1f} s  {phase:5s} step {step:7d}  loss {value:.4e}  best {self.best:.4e}"
            )
        return value


def _adam_phase(run, loss_of, params, *, key, budget_end, lr, batch_size, chunk_s):
    x, y = run.x, run.y
    M = x.shape[0]
    B = M if batch_size is None else min(int(batch_size), M)
    dtype = x.dtype
    adam = optax.scale_by_adam()
    with jax.numpy_dtype_promotion("standard"):
        state = adam.init(params)
    lr0, lr1 = (float(v) for v in lr)
    span = max(budget_end - run.elapsed(), 1e-9)
    t_begin = run.elapsed()

    @jax.jit
    def chunk(p, s, k, n, frac0, dfrac):
        # the learning rate follows wall time: frac goes from 0 to 1 over the phase,
        # advanced per step by the measured step time
        def body(i, carry):
            p, s, k = carry
            if B == M:
                xb, yb = x, y
            else:
                k, sub = jax.random.split(k)
                idx = jax.random.randint(sub, (B,), 0, M)  # with replacement
                xb, yb = jnp.take(x, idx, axis=0), jnp.take(y, idx, axis=0)
            g = jax.grad(loss_of)(p, xb, yb)
            frac = jnp.clip(frac0 + i.astype(dtype) * dfrac, 0.0, 1.0)
            rate = lr0 * (lr1 / lr0) ** frac
            with jax.numpy_dtype_promotion("standard"):
                u, s = adam.update(g, s, p)
                p = jax.tree_util.tree_map(lambda a, b: a - rate * b, p, u)
            return p, s, k

        return jax.lax.fori_loop(0, n, body, (p, s, k))

    def f(v):
        return jnp.asarray(v, dtype=dtype)

    t0 = time.perf_counter()
    params, state, key = jax.block_until_ready(chunk(params, state, key, _i(1), f(0.0), f(0.0)))
    compile_s = time.perf_counter() - t0
    step = 1
    t0 = time.perf_counter()
    n_cal = 5
    params, state, key = jax.block_until_ready(
        chunk(params, state, key, _i(n_cal), f(0.0), f(0.0))
    )
    per_step = (time.perf_counter() - t0) / n_cal
    step += n_cal
    run.note("adam", step, params)
    rec = {"compile_s": compile_s, "batch_size": int(B)}
    while run.elapsed() < budget_end:
        n = max(1, int(min(chunk_s, budget_end - run.elapsed()) / per_step))
        frac0 = (run.elapsed() - t_begin) / span
        t0 = time.perf_counter()
        new, state, key = jax.block_until_ready(
            chunk(params, state, key, _i(n), f(frac0), f(per_step / span))
        )
        per_step = (time.perf_counter() - t0) / n
        step += n
        if not math.isfinite(run.note("adam", step, new)):
            rec["stopped"] = f"non-finite loss at step {step}"
            break
        params = new
    rec.update(steps=step, step_s=per_step, end_s=run.elapsed())
    return rec


def _lbfgs_phase(run, loss_of, params, *, budget_end, memory, chunk_s):
    x, y = run.x, run.y
    solver = optax.lbfgs(memory_size=memory)

    def value_fn(p):
        return loss_of(p, x, y)

    vg = optax.value_and_grad_from_state(value_fn)
    with jax.numpy_dtype_promotion("standard"):
        state = solver.init(params)

    @jax.jit
    def chunk(p, s, n):
        def body(i, carry):
            p, s = carry
            with jax.numpy_dtype_promotion("standard"):
                value, grad = vg(p, state=s)
                u, s = solver.update(grad, s, p, value=value, grad=grad, value_fn=value_fn)
                p = optax.apply_updates(p, u)
            return p, s

        return jax.lax.fori_loop(0, n, body, (p, s))

    t0 = time.perf_counter()
    params, state = jax.block_until_ready(chunk(params, state, _i(1)))
    compile_s = time.perf_counter() - t0
    step = 1
    t0 = time.perf_counter()
    params, state = jax.block_until_ready(chunk(params, state, _i(2)))
    per_step = (time.perf_counter() - t0) / 2
    step += 2
    run.note("lbfgs", step, params)
    rec = {"compile_s": compile_s, "memory": memory}
    while run.elapsed() < budget_end:
        n = max(1, int(min(chunk_s, budget_end - run.elapsed()) / per_step))
        t0 = time.perf_counter()
        new, new_state = jax.block_until_ready(chunk(params, state, _i(n)))
        per_step = (time.perf_counter() - t0) / n
        step += n
        if not math.isfinite(run.note("lbfgs", step, new)):
            rec["stopped"] = f"non-finite loss at step {step}"
            break
        params, state = new, new_state
    rec.update(steps=step, step_s=per_step, end_s=run.elapsed())
    return rec


def _lm_phase(run, residual, params, *, key, budget_end, samples, chunk, chunk_s):
    x, y = run.x, run.y
    M = x.shape[0]
    n_sub = min(int(samples), M)
    chunk = min(int(chunk), n_sub)
    n_sub -= n_sub % chunk  # whole chunks
    idx = np.asarray(jax.random.permutation(key, M))[:n_sub]
    xs, ys = jnp.take(x, idx, axis=0), jnp.take(y, idx, axis=0)
    flat, unravel = ravel_pytree(params)
    P = flat.size
    dtype = flat.dtype
    acc = jnp.float64 if jax.config.jax_enable_x64 else jnp.float32

    def r1(theta, xi, yi):
        return residual(unravel(theta), xi, yi).ravel()

    @jax.jit
    def sq(theta):
        r = jax.vmap(r1, (None, 0, 0))(theta, xs, ys)
        return jnp.sum(jnp.square(r.astype(acc)))

    @jax.jit
    def normal_equations(theta):
        xc = xs.reshape((n_sub // chunk, chunk) + xs.shape[1:])
        yc = ys.reshape((n_sub // chunk, chunk) + ys.shape[1:])

        def body(carry, batch):
            A, g = carry
            xb, yb = batch
            J = jax.vmap(jax.jacrev(r1), (None, 0, 0))(theta, xb, yb).reshape(-1, P).astype(acc)
            r = jax.vmap(r1, (None, 0, 0))(theta, xb, yb).reshape(-1).astype(acc)
            return (A + J.T @ J, g + J.T @ r), None

        zero = (jnp.zeros((P, P), acc), jnp.zeros((P,), acc))
        (A, g), _ = jax.lax.scan(body, zero, (xc, yc))
        return A, g

    @jax.jit
    def solve(A, g, lam):
        d = jnp.diag(A)
        damping = lam * (d + jnp.asarray(1e-12, acc) * jnp.max(d))
        delta = jnp.linalg.solve(A + jnp.diag(damping), -g)
        return delta.astype(dtype)

    t0 = time.perf_counter()
    A, g = jax.block_until_ready(normal_equations(flat))
    cur = float(sq(flat))
    jax.block_until_ready(solve(A, g, jnp.asarray(1.0, acc)))
    compile_s = time.perf_counter() - t0
    lam = 1e-2
    step, rejected = 0, 0
    run.note("lm", step, unravel(flat))
    last_note = run.elapsed()
    rec = {"compile_s": compile_s, "samples": int(n_sub), "n_params": int(P)}
    converged = False
    while (run.elapsed() < budget_end or step == 0) and not converged:  # at least one step
        if step > 0:
            A, g = normal_equations(flat)
        while True:
            new = flat + solve(A, g, jnp.asarray(lam, acc))
            value = float(sq(new))
            if math.isfinite(value) and value < cur:
                flat, cur = new, value
                lam = max(lam / 3.0, 1e-12)
                break
            rejected += 1
            lam *= 4.0
            if lam > 1e10 or run.elapsed() >= budget_end:
                converged = lam > 1e10
                break
        step += 1
        if run.elapsed() - last_note >= chunk_s or run.elapsed() >= budget_end or converged:
            run.note("lm", step, unravel(flat))
            last_note = run.elapsed()
    if run.curve[-1][1] != "lm" or run.curve[-1][2] != step:
        run.note("lm", step, unravel(flat))
    rec.update(steps=step, rejected_steps=rejected, final_lambda=lam,
               stopped="damping exceeded 1e10 (no further decrease)" if converged else None,
               end_s=run.elapsed())
    return rec


def train_budgeted(
    model,
    x,
    y,
    *,
    kind: str,
    budget_s: float,
    key,
    pw: int | None = None,
    method: str = "lm",
    adam_fraction: float = 0.5,
    lr: tuple[float, float] = (1e-2, 1e-5),
    batch_size: int | None = None,
    lbfgs_memory: int = 20,
    lm_samples: int = 16384,
    lm_chunk: int = 4096,
    chunk_s: float = 2.0,
    target: float | None = None,
    log=None,
):
    """Train `model` on `(x, y)` for `budget_s` seconds of wall time (see module doc).

    `kind` is `"pairs"` (feed-forward: `x, y` of shape `(M, d)`) or `"windows"`
    (transformers: `(M, T, d)`, the target rows are the last `pw`). Returns
    `(best_model, record)`; `record` has the curve `[seconds, phase, step, loss]` (the
    relative loss on all of `(x, y)`), the best loss and when it was reached, when
    `target` was first reached (or `None`), and per phase the steps and compile time.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; valid: {', '.join(METHODS)}")
    predict = _predictor(kind, pw)
    if kind == "windows":
        y = y[:, y.shape[1] - pw :]
    params, static = eqx.partition(model, eqx.is_inexact_array)

    def loss_of(p, xb, yb):
        m = eqx.combine(p, static)
        return relative_loss(jax.vmap(lambda s: predict(m, s))(xb), yb)

    def residual(p, xi, yi):
        return predict(eqx.combine(p, static), xi) - yi

    run = _Run(loss_of, x, y, params, target=target, log=log)
    phases = {}
    if method == "lm":
        phases["lm"] = _lm_phase(
            run, residual, params, key=key, budget_end=budget_s, samples=lm_samples,
            chunk=lm_chunk, chunk_s=chunk_s,
        )
    else:
        phases["adam"] = _adam_phase(
            run, loss_of, params, key=key, budget_end=adam_fraction * budget_s, lr=lr,
            batch_size=batch_size, chunk_s=chunk_s,
        )
        if adam_fraction < 1.0:
            # started even if the budget is spent (a tiny smoke-test budget still runs
            # both phases); its loop respects the budget
            phases["lbfgs"] = _lbfgs_phase(
                run, loss_of, run.best_params, budget_end=budget_s, memory=lbfgs_memory,
                chunk_s=chunk_s,
            )
    record = {
        "method": method,
        "budget_s": budget_s,
        "samples": int(x.shape[0]),
        "loss": "relative",
        "curve": run.curve,
        "phases": phases,
        "best_loss": run.best,
        "time_to_best_s": run.best_t,
        "target": target,
        "time_to_target_s": run.target_t,
        "wall_s": run.elapsed(),
    }
    if method == "adam-lbfgs":
        record.update(adam_fraction=adam_fraction, lr=list(lr), batch_size=batch_size)
    return eqx.combine(run.best_params, static), record


def rollout_metrics(pred, ref, system) -> dict:
    r"""Relative error, `max | |z| - 1 |`, energy drift of a rollout against a reference.

    `pred` and `ref` have shape `(N, d)`. The relative error is
    $\|\hat Z - Z\|_F / \|Z\|_F$ over the whole trajectory, and also given at the final
    state; the energy drift is $\max_t |H(\hat z_t) - H(z_0)| / |H(z_0)|$.
    """
    pred = np.asarray(pred, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    H = jax.vmap(system.hamiltonian)
    with np.errstate(invalid="ignore", over="ignore"):
        h_pred = np.asarray(H(jnp.asarray(pred)))
        h0 = float(np.asarray(system.hamiltonian(jnp.asarray(ref[0]))))
        return {
            "relative_error": float(np.linalg.norm(pred - ref) / np.linalg.norm(ref)),
            "final_error": float(np.linalg.norm(pred[-1] - ref[-1]) / np.linalg.norm(ref[-1])),
            "max_norm_deviation": float(np.max(np.abs(np.linalg.norm(pred, axis=1) - 1.0))),
            "energy_drift": float(np.max(np.abs(h_pred - h0)) / abs(h0)),
            "finite": bool(np.isfinite(pred).all()),
        }
