r"""Training: `fit(model, data, *, epochs, key, ...)` → `(model, history)`.

What is fitted is the model's business (the model protocol of `geomlearn.models`:
`training_samples`, `predict`, `target`); for the built-in families:

| model                                 | samples                        | prediction                          |
|---------------------------------------|--------------------------------|-------------------------------------|
| feed-forward integrator               | one-step pairs $(z_t, z_{t+1})$ | $\Phi_\theta(z_t)$                  |
| transformer integrator                | windows `(T, d)` and the windows shifted by `pw` | last `pw` rows of the output |
| Hamiltonian network, trajectories     | one-step pairs                 | one implicit-midpoint step of $J\nabla H_\theta$ |
| Hamiltonian network, `(z, ż)` arrays  | states and time derivatives    | $J\nabla H_\theta(z)$               |

**Losses.** `"relative"` (the default, as in the SympNets and transformer papers):
$\|\hat Y - Y\|_F / \|Y\|_F$ over the whole minibatch; `"mse"`: the mean of
$(\hat Y - Y)^2$; or any callable `loss(prediction, target) -> scalar` on batched arrays.
For transformers only the last `pw` rows of each window count.

**Speed.** The data are moved to the device once. An epoch is a `jax.lax.scan` over the
shuffled minibatches (a fresh permutation per epoch, drawn from `fold_in(key, epoch)`),
with the optimiser update inside the loop, and **several epochs run in one compiled
call**: a scan over up to `GROUP_MAX` epochs whose length on each call is chosen so that
a call takes about `GROUP_SECONDS` (measured on the previous call), and never crosses a
checkpoint. The host reads back the per-epoch losses of each group, which drive the
progress bar, the history and the non-finite check; an epoch whose loss or parameters
are not finite is not applied, so the state returned or saved is always the last good
one. With a `callback`, every epoch is its own call. Compiled code is cached by
`jax.jit` on the static parts (model structure, optimiser update, loss, sizes): another
`fit` of the same setup does not compile again.

**Many devices.** When `jax.devices()` lists more than one device, the parameters and the
data are replicated on a one-axis `jax.sharding.Mesh` and every minibatch is sharded along
its batch axis (data parallelism: XLA inserts the gradient all-reduce). Beyond one
machine, start the processes with `jax.distributed.initialize()` and the same code runs
on all their devices. The result equals the one-device result to round-off.

**Default optimiser.** `optimizer=None` is Adam with a learning rate decaying
exponentially from $10^{-2}$ to $10^{-6}$ **over the planned training**:
$\eta_k = 10^{-2}\,(10^{-4})^{k/(K-1)}$ for update $k = 0, \dots, K-1$ of
$K = \text{epochs} \times \text{batches per epoch}$, so the last update of the last epoch
uses $10^{-6}$ (see `default_optimizer`).
GeometricMachineLearning.jl's `AdamOptimizerWithDecay(n_epochs)` uses the rate
$\gamma = (10^{-6}/10^{-2})^{1/n_\text{epochs}}$ but multiplies it in once per
*optimiser step*, i.e. per minibatch: its learning rate is already $10^{-6}$ after
`n_epochs` updates — within the first epochs when an epoch has many batches — and keeps
shrinking below $10^{-6}$ for the rest of training. Here the decay is spread over all
$K$ updates of the planned epochs and stops at $10^{-6}$.

**Second order.** `optimizer=geomlearn.LevenbergMarquardt(...)` trains by
Levenberg–Marquardt (Gauss–Newton with adaptive damping) on the same samples and loss,
with the same history, progress, checkpoints and resume; see
[`LevenbergMarquardt`][geomlearn.LevenbergMarquardt] for the maths and the memory bound.
`time_budget` (seconds) makes runs of different methods comparable.

**Nothing lost.** With `checkpoint=path` the model, the optimiser state, the number of
completed epochs, the key and the history are written atomically (temporary file, then
rename; see `geomlearn.io.save_checkpoint`) every `checkpoint_every` epochs and at the
end. The path is checked to be writable before training starts. `resume=True` continues from the
checkpoint; the resumed run equals an uninterrupted one bit for bit (on CPU). A
non-finite training loss raises `NonFiniteLossError` naming the epoch, and the checkpoint
keeps the last good state. `Ctrl-C` (`KeyboardInterrupt`) saves a checkpoint and returns
what was trained, with a warning.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import pathlib
import time
import warnings
from typing import Any, Callable, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import io as gio
from ._progress import ProgressBar
from ._validation import check_bool, check_int
from .models._base import Task
from .rollout import check_model

__all__ = ["fit", "default_optimizer", "choose_trainer", "NonFiniteLossError", "TrainingInterrupted"]

LOSSES = ("relative", "mse")

#: The most epochs one compiled call runs (see "Speed" in the module documentation).
GROUP_MAX = 256
#: The wall time one compiled call of several epochs aims at, in seconds.
GROUP_SECONDS = 0.05


class TrainingInterrupted(RuntimeWarning):
    """Warned when `Ctrl-C` stopped `fit`: the model trained so far is returned (and
    checkpointed when a checkpoint path was given)."""


class NonFiniteLossError(FloatingPointError):
    """The training loss (or the parameters) became NaN or infinite; the message names
    the epoch and the cause."""


# ----------------------------------------------------------------- default optimiser

_ADAM = optax.scale_by_adam()
_LR_START, _LR_END = 1e-2, 1e-6


class DefaultOptimizerState(NamedTuple):
    """State of `default_optimizer`: Adam's moments, the update count, the planned total."""

    adam: Any
    count: jax.Array
    total: jax.Array


def _upcast(tree):
    """Half-precision leaves as float32: Adam's moments and its `eps = 1e-8` (which is 0
    in float16) need more range than float16/bfloat16 give."""
    return jax.tree_util.tree_map(
        lambda a: a.astype(jnp.float32) if jnp.finfo(a.dtype).bits < 32 else a, tree
    )


def _default_init(params, *, total_steps: int) -> DefaultOptimizerState:
    return DefaultOptimizerState(
        adam=_ADAM.init(_upcast(params)),
        count=jnp.zeros((), dtype=jnp.int32),
        total=jnp.asarray(total_steps, dtype=jnp.int32),
    )


def _default_update(grads, state: DefaultOptimizerState, params=None):
    updates, adam = _ADAM.update(_upcast(grads), state.adam, None)
    span = jnp.maximum(state.total - 1, 1)
    frac = jnp.minimum(state.count, span).astype(float) / span.astype(float)
    log_lr = math.log(_LR_START) + frac * (math.log(_LR_END) - math.log(_LR_START))
    lr = jnp.exp(log_lr)
    updates = jax.tree_util.tree_map(
        lambda u, g: (-lr.astype(u.dtype) * u).astype(g.dtype), updates, grads
    )
    return updates, DefaultOptimizerState(adam, state.count + 1, state.total)


def default_optimizer(total_steps: int) -> optax.GradientTransformation:
    r"""Adam with $\eta_k = 10^{-2}(10^{-4})^{k/(K-1)}$ for update $k$ of $K$ = `total_steps`.

    The first update uses $10^{-2}$, the last one $10^{-6}$ (and any beyond it too). $K$
    is kept in the optimiser *state*, not in the compiled code, so runs planned for
    different numbers of epochs share one compiled epoch.
    """
    total_steps = check_int("total_steps", total_steps, minimum=1)
    return optax.GradientTransformation(
        functools.partial(_default_init, total_steps=total_steps), _default_update
    )


def _default_learning_rate(step: int, total_steps: int) -> float:
    """The default optimiser's learning rate at update `step` (plain Python, for the history)."""
    span = max(int(total_steps) - 1, 1)
    return _LR_START * (_LR_END / _LR_START) ** (min(step, span) / span)


# ---------------------------------------------------------------------------- losses


class Loss(NamedTuple):
    """A training loss `fn(prediction, target)` on batches; `relative` marks the default
    relative loss, whose denominator is the data set's RMS target norm (see `fit`)."""

    fn: Callable | None
    relative: bool = False

    def __call__(self, pred, target, target_sq):
        if not self.relative:
            return self.fn(pred, target)
        # ‖Ŷ − Y‖ / ‖Y‖ with ‖Y‖² estimated as B · (mean squared target norm of the data)
        denom = jnp.sqrt(target_sq.astype(pred.dtype) * pred.shape[0])
        return jnp.linalg.norm((pred - target).ravel()) / denom


def _mse_loss(pred, target):
    return jnp.mean(jnp.square(pred - target))


def resolve_loss(loss) -> Loss:
    """A `Loss` for `"relative"`, `"mse"` or a callable `loss(prediction, target)`."""
    if callable(loss):
        return Loss(loss)
    if loss == "relative":
        return Loss(None, relative=True)
    if loss == "mse":
        return Loss(_mse_loss)
    raise ValueError(f"unknown loss {loss!r}; expected one of {list(LOSSES)} or a callable")


# ------------------------------------------------------------------- the run record


class Run(NamedTuple):
    """Everything static about a training run: part of the compilation key (hashable).

    Only the optimiser's `update` is here (its `init` may carry run-specific constants,
    e.g. the default optimiser's planned number of updates, without forcing a compile).
    """

    task: Task
    loss: Loss
    M: int
    B: int
    n_batches: int
    update: Callable | None
    solver: Any
    batch_sharding: Any
    has_val: bool


@dataclasses.dataclass(frozen=True)
class _Inputs:
    """`fit`'s arguments, validated and resolved."""

    run: Run
    data: tuple  # (x, y, target_sq, xv, yv, val_sq)
    epochs: int
    checkpoint: pathlib.Path | None
    checkpoint_every: int
    resume: bool
    optimizer: Any
    default_optimizer: bool
    time_budget: float | None
    meta: dict


def _check_finite(what: str, x) -> None:
    """`ValueError` naming `what` when an input holds NaN or inf (it would make every
    loss NaN: silently for validation data, blaming the learning rate for training)."""
    bad = ~np.isfinite(np.asarray(x, np.float64)).reshape(x.shape[0], -1).all(axis=1)
    if bad.any():
        raise ValueError(f"{what} has a non-finite input (NaN or inf) in sample {int(np.argmax(bad))}; "
                         f"expected finite inputs ({int(bad.sum())} of {x.shape[0]} samples are not)")


def _targets_sq(model, task, y, what: str):
    """The mean squared norm of the compared part of the targets (the relative loss's scale)."""
    t = jax.vmap(lambda s: model.target(s, task))(y)
    sq = float(jnp.mean(jnp.sum(jnp.square(t.reshape(t.shape[0], -1)), axis=1)))
    if not math.isfinite(sq):
        raise ValueError(f"{what} contains a non-finite target (NaN or inf)")
    return sq


def _resolve(model, data, *, epochs, batch_size, optimizer, loss, prediction_window,
             seq_length, val_data, checkpoint, checkpoint_every, resume, time_budget):
    check_model(model)
    epochs = check_int("epochs", epochs, minimum=1)
    resume = check_bool("resume", resume)
    loss_fn = resolve_loss(loss)
    task = model.task(seq_length=seq_length, prediction_window=prediction_window)
    x, y, task = model.training_samples(data, task, what="data")
    M = x.shape[0]
    if M < 1:
        raise ValueError("data holds no training samples")
    xv = yv = None
    if val_data is not None:
        xv, yv, vtask = model.training_samples(val_data, task, what="val_data")
        if vtask != task:
            raise ValueError(f"val_data must have the same form as data (got {vtask} for {task})")
    B = M if batch_size is None else check_int("batch_size", batch_size, minimum=1)
    if B > M:
        raise ValueError(f"batch_size must be at most the number of samples {M}, got {B}")
    if checkpoint_every is None:
        checkpoint_every = max(1, epochs // 10)
    checkpoint_every = check_int("checkpoint_every", checkpoint_every, minimum=1)
    if checkpoint is not None:
        checkpoint = gio.check_writable(checkpoint)
        gio.checkpoint_header(model)  # a model that cannot be saved fails now, not later
    elif resume:
        raise ValueError("resume=True needs a checkpoint path")
    if time_budget is not None:
        time_budget = float(time_budget)
        if not time_budget > 0:
            raise ValueError(f"time_budget must be a positive number of seconds, got {time_budget}")
    from .second_order import LevenbergMarquardt

    solver = optimizer if isinstance(optimizer, LevenbergMarquardt) else None
    from .manifolds import is_manifold_parameter, riemannian_adam

    on_manifold = any(is_manifold_parameter(leaf) for leaf in
                      jax.tree_util.tree_leaves(model, is_leaf=is_manifold_parameter))
    if solver is not None and on_manifold:
        raise ValueError(
            f"{type(model).__name__} has manifold parameters (Stiefel/Grassmann matrices), which "
            "a LevenbergMarquardt step would move off their manifold; train it with "
            "optimizer=None (Riemannian Adam) or geomlearn.manifolds.riemannian_adam"
        )
    default_opt = optimizer is None and not on_manifold
    if default_opt:
        optimizer = default_optimizer(epochs * (M // B))
    elif optimizer is None:  # the same decay 1e-2 → 1e-6, Riemannian on manifold leaves
        optimizer = riemannian_adam(optax.exponential_decay(
            _LR_START, max(epochs * (M // B) - 1, 1), _LR_END / _LR_START))
    elif solver is None and not isinstance(optimizer, optax.GradientTransformation):
        raise TypeError(
            "optimizer must be an optax.GradientTransformation or a "
            f"geomlearn.LevenbergMarquardt, got {type(optimizer).__name__}"
        )
    if solver is not None and not isinstance(loss, str):
        raise ValueError(
            "a LevenbergMarquardt optimizer minimises a sum of squares: use loss='relative' "
            "or 'mse' (both have its minimiser), not a custom loss callable"
        )
    _check_finite("data", x)
    if xv is not None:
        _check_finite("val_data", xv)
    target_sq = _targets_sq(model, task, y, "data")
    if loss_fn.relative and target_sq == 0:
        raise ValueError(
            "every target of the data is zero, so the relative loss ‖Ŷ − Y‖/‖Y‖ is undefined; "
            'use loss="mse"'
        )
    val_sq = _targets_sq(model, task, yv, "val_data") if xv is not None else target_sq
    meta = {
        "n_samples": M,
        "batch_size": B,
        "task": dataclasses.asdict(task),
        "loss": loss if isinstance(loss, str) else getattr(loss, "__name__", "callable"),
        "data_fingerprint": gio.fingerprint(x, y),
        "trainer": "first_order" if solver is None else type(solver).__name__,
    }
    run = Run(task, loss_fn, M, B, M // B, None if solver else optimizer.update, solver,
              None, xv is not None)
    dtype = jnp.result_type(float)
    data = (x, y, jnp.asarray(target_sq, dtype), xv, yv, jnp.asarray(val_sq, dtype))
    return _Inputs(run, data, epochs, checkpoint, checkpoint_every, resume, optimizer,
                   default_opt, time_budget, meta)


def _place(inputs: _Inputs, params, state):
    """Replicate data and parameters over all devices, sharding batches along them."""
    devices = jax.devices()
    run, data = inputs.run, inputs.data
    if len(devices) > 1:
        mesh = jax.sharding.Mesh(np.asarray(devices), ("batch",))
        replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
        sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch"))
        data, params, state = jax.device_put((data, params, state), replicated)
        run = run._replace(batch_sharding=sharding)
    return run, data, params, state


# ------------------------------------------------------------------ compiled epochs


def _batch_loss(params, static, run: Run, xb, yb, target_sq):
    model = eqx.combine(params, static)
    pred = jax.vmap(lambda s: model.predict(s, run.task))(xb)
    target = jax.vmap(lambda s: model.target(s, run.task))(yb)
    return run.loss(pred, target, target_sq)


def _first_order_epoch(params, opt_state, epoch, key, x, y, target_sq, static, run: Run):
    """One epoch: a `lax.scan` over the shuffled minibatches, optimiser step inside."""
    M, B, n_batches = run.M, run.B, run.n_batches

    def train_step(carry, batch):
        p, s = carry
        xb, yb = batch
        if run.batch_sharding is not None:  # data parallel: shard the batch axis
            xb = jax.lax.with_sharding_constraint(xb, run.batch_sharding)
            yb = jax.lax.with_sharding_constraint(yb, run.batch_sharding)
        value, grads = jax.value_and_grad(_batch_loss)(p, static, run, xb, yb, target_sq)
        # Optax is not written for strict dtype promotion; trace its update in the
        # standard mode (parameters keep their dtype through apply_updates).
        with jax.numpy_dtype_promotion("standard"):
            updates, s = run.update(grads, s, p)
            p = optax.apply_updates(p, updates)
        return (p, s), value

    if n_batches == 1 and B == M:  # full batch: the order does not matter
        batches = (x[None], y[None])
    else:
        perm = jax.random.permutation(jax.random.fold_in(key, epoch), M)
        perm = perm[: n_batches * B].reshape(n_batches, B)
        batches = (jnp.take(x, perm, axis=0), jnp.take(y, perm, axis=0))
    (params, opt_state), losses = jax.lax.scan(train_step, (params, opt_state), batches)
    return params, opt_state, jnp.mean(losses)


def _second_order_epoch(params, state, epoch, key, x, y, target_sq, static, run: Run):
    """One Levenberg–Marquardt iteration (see `geomlearn.LevenbergMarquardt`); the loss
    reported is the training loss after it, on all samples."""

    def residual(p, xi, yi):
        model = eqx.combine(p, static)
        return (model.predict(xi, run.task) - model.target(yi, run.task)).ravel()

    params, state, _ = run.solver.step(
        params, state, residual, x, y, jax.random.fold_in(key, epoch)
    )
    return params, state, _batch_loss(params, static, run, x, y, target_sq)


def _learning_rate_of(state):
    """The learning rate held in an optimiser state (traced), or NaN if it holds none."""
    if isinstance(state, DefaultOptimizerState):
        span = jnp.maximum(state.total - 1, 1)
        frac = jnp.minimum(state.count, span).astype(float) / span.astype(float)
        return jnp.exp(math.log(_LR_START) + frac * (math.log(_LR_END) - math.log(_LR_START)))
    for s in jax.tree_util.tree_leaves(state, is_leaf=lambda s: hasattr(s, "hyperparams")):
        hp = getattr(s, "hyperparams", None)
        if isinstance(hp, dict) and "learning_rate" in hp:
            return jnp.asarray(hp["learning_rate"], dtype=float)
    return jnp.asarray(jnp.nan, dtype=float)


def _all_finite(tree):
    leaves = [jnp.all(jnp.isfinite(a)) for a in jax.tree_util.tree_leaves(tree)
              if jnp.issubdtype(a.dtype, jnp.inexact)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.asarray(True)


@functools.partial(jax.jit, static_argnames=("static", "run", "group"))
def _train_group(params, state, epoch0, count, key, data, *, static, run: Run, group: int):
    """Up to `group` epochs in one compiled call: a `lax.while_loop` that runs epochs
    `epoch0, epoch0 + 1, …` while fewer than `count` have run (a traced count, so one
    compile serves every group size) and while every epoch so far was finite. A
    non-finite epoch is not applied: the returned state is the last good one. Returns
    per-epoch `(loss, val_loss, parameters finite, learning rate)` in buffers of length
    `group`, NaN (and `True`) where an epoch did not run."""
    x, y, target_sq, xv, yv, val_sq = data
    epoch_fn = _first_order_epoch if run.solver is None else _second_order_epoch
    out_dtype = jnp.result_type(float)
    nan = jnp.full((group,), jnp.nan, dtype=out_dtype)

    def keep_going(carry):
        _, _, i, ok, _ = carry
        return (i < count) & ok

    def body(carry):
        p, s, i, _, (losses, vals, finite, lrs) = carry
        lr = _learning_rate_of(s).astype(out_dtype)
        p2, s2, loss = epoch_fn(p, s, epoch0 + i, key, x, y, target_sq, static, run)
        params_ok = _all_finite(p2)
        good = jnp.isfinite(loss) & params_ok
        if run.has_val:
            vals = vals.at[i].set(_batch_loss(p2, static, run, xv, yv, val_sq).astype(out_dtype))
        p, s = jax.lax.cond(good, lambda: (p2, s2), lambda: (p, s))
        buffers = (losses.at[i].set(loss.astype(out_dtype)), vals, finite.at[i].set(params_ok),
                   lrs.at[i].set(lr))
        return p, s, i + 1, good, buffers

    start = (params, state, jnp.asarray(0, jnp.int32), jnp.asarray(True),
             (nan, nan, jnp.ones((group,), bool), nan))
    params, state, _, _, out = jax.lax.while_loop(keep_going, body, start)
    return params, state, out


# ----------------------------------------------------------------------------- fit


def _new_history() -> dict[str, list]:
    return {"epoch": [], "loss": [], "val_loss": [], "learning_rate": [], "time": []}


def _record(history, first_epoch, out, n, t_start, t_end, default_lr):
    """Append `n` epochs of a group's outputs to the history (times interpolated)."""
    loss, val, _, lr = out
    for i in range(n):
        epoch = first_epoch + i + 1
        history["epoch"].append(epoch)
        history["loss"].append(float(loss[i]))
        history["val_loss"].append(None if math.isnan(val[i]) else float(val[i]))
        rate = default_lr(epoch - 1) if default_lr else (None if math.isnan(lr[i]) else float(lr[i]))
        history["learning_rate"].append(rate)
        history["time"].append(t_start + (t_end - t_start) * (i + 1) / n)


def _non_finite(out, i, epoch, checkpoint, saved_epoch) -> NonFiniteLossError:
    loss, _, params_ok, _ = out
    value = float(loss[i])
    what = (f"the training loss became {value}" if not math.isfinite(value)
            else f"the parameters became non-finite (training loss {value})")
    kept = (f"; the checkpoint {checkpoint} keeps the last good state (epoch {saved_epoch})"
            if checkpoint is not None and saved_epoch is not None else "")
    return NonFiniteLossError(
        f"{what} at epoch {epoch}{kept}; lower the learning rate, or check the data for "
        "outliers"
    )


def fit(
    model,
    data,
    *,
    epochs: int,
    batch_size: int | None = None,
    optimizer=None,
    loss: str | Callable = "relative",
    prediction_window: int | None = None,
    seq_length: int | None = None,
    val_data=None,
    key,
    progress: bool = True,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int | None = None,
    resume: bool = False,
    callback: Callable | None = None,
    time_budget: float | None = None,
):
    r"""Train a geomlearn model on trajectory data.

    **Arguments:**

    - `model`: any geomlearn model (a subclass of `geomlearn.models.AbstractModel`); it
      says which samples it takes and what it predicts (the model protocol).
    - `data`: a `TrajectoryData` (pairs, windows or implicit-midpoint pairs are taken
      from it by `model.training_samples`), or a tuple `(inputs, targets)` of arrays
      already prepared: `(M, d)` pairs for a feed-forward integrator, `(M, T, d)` windows
      for a transformer, `(M, d)` states and their time derivatives `ż` for a Hamiltonian
      network (vector-field regression).
    - `epochs`: the total number of epochs (also on `resume`, counting the ones done).
    - `batch_size`: samples per minibatch; `None` means the full data set. Each epoch
      uses `M // batch_size` minibatches of a fresh permutation (the remainder is left
      out of that epoch, a different one each time). Must be between 1 and `M`.
    - `optimizer`: any `optax.GradientTransformation`; `None` means Adam with the
      exponential decay $10^{-2} \to 10^{-6}$ over all planned updates (see the module
      documentation for how this differs from GeometricMachineLearning.jl) — Riemannian
      Adam (`geomlearn.manifolds.riemannian_adam`) on the Stiefel/Grassmann parameters of
      a model that has them, so they stay on their manifold; or a
      [`LevenbergMarquardt`][geomlearn.LevenbergMarquardt] solver, for second-order
      least-squares training: each epoch is then one Levenberg–Marquardt iteration on
      the whole data set (or the solver's random subset; `batch_size` is not used).
    - `loss`: `"relative"` (default), `"mse"` or a callable `loss(prediction, target)` on
      batches. The relative loss of a minibatch is $\|\hat Y - Y\|_F / (\sqrt{B}\,\bar y)$
      with $\bar y^2$ the mean squared norm of the targets of the whole data set — equal
      to $\|\hat Y - Y\|_F / \|Y\|_F$ on the full data set, and defined for a batch whose
      targets are all zero (a trajectory at rest at an equilibrium).
    - `prediction_window`: transformers, the number `pw` of predicted rows (default `T`).
    - `seq_length`: transformers whose `seq_length` is `None` (any `T`): the window
      length `T` to train on. Models with a fixed `seq_length` use theirs.
    - `val_data`: optional validation data in the same form as `data`; its loss is
      evaluated after every epoch.
    - `key`: a JAX PRNG key (shuffling).
    - `progress`: draw a progress bar (epoch, loss, validation loss, epochs/s) on
      stderr — only when stderr is a terminal.
    - `checkpoint`: a file path for checkpoints; `None` for none. The run holds a lock
      on it (`geomlearn.io.checkpoint_lock`), so a second run with the same path fails
      at once instead of overwriting this one's progress.
    - `checkpoint_every`: epochs between checkpoints (`None`: `max(1, epochs // 10)`);
      one is always written at the end.
    - `resume`: continue from `checkpoint` if that file exists (a fresh start otherwise,
      so a preemptible job can always pass `resume=True`). The model's class and
      configuration, the number of samples and the batch size must match the
      checkpoint; the checkpoint's key is used, and the default optimiser keeps the
      schedule it was planned with (stored in its state), so a resume with a larger
      `epochs` trains on at $10^{-6}$.
    - `callback`: `callback(epoch, model, history)` after every epoch; return `True` to
      stop training early. (With a callback every epoch is its own compiled call.)
    - `time_budget`: stop after this many seconds of training (wall time, checked
      between compiled calls), whatever `epochs` says.

    **Returns:** `(model, history)`: the trained model and a dict of per-epoch lists
    `epoch` (1-based), `loss` (mean training loss of the epoch), `val_loss` (`None`
    without validation data), `learning_rate` (at the start of the epoch; `None` when
    the optimiser does not expose it) and `time` (wall-clock seconds since the start of
    training, across resumes).

    **Raises:** `NonFiniteLossError` (a `FloatingPointError`) naming the epoch when the
    training loss is NaN or infinite; `ValueError`/`TypeError` for data that do not fit
    the model, and before the first epoch for a checkpoint path that cannot be written;
    `geomlearn.io.CheckpointInUseError` when another run is writing the checkpoint.

    ```python
    train, test = gl.datasets.pendulum_sympnets()
    model = gl.GSympNet(2, n_layers=4, width=16, key=jax.random.PRNGKey(0))
    model, history = gl.fit(model, train, epochs=2000, key=jax.random.PRNGKey(1))
    ```
    """
    inputs = _resolve(model, data, epochs=epochs, batch_size=batch_size, optimizer=optimizer,
                      loss=loss, prediction_window=prediction_window, seq_length=seq_length,
                      val_data=val_data, checkpoint=checkpoint,
                      checkpoint_every=checkpoint_every, resume=resume, time_budget=time_budget)
    with gio.checkpoint_lock(inputs.checkpoint):  # two runs never alternate on one checkpoint
        return _fit(inputs, model, key=key, progress=progress, callback=callback)


def _fit(inputs: _Inputs, model, *, key, progress, callback):
    """`fit` after validation (holding the checkpoint's lock)."""
    epochs, ckpt, every = inputs.epochs, inputs.checkpoint, inputs.checkpoint_every
    params, static = eqx.partition(model, eqx.is_inexact_array)
    trainer = inputs.run.solver or inputs.optimizer
    with jax.numpy_dtype_promotion("standard"):
        state = trainer.init(params)
    raw_key, history, done = gio.raw_key(key), _new_history(), 0
    if inputs.resume and ckpt.exists():
        model, (state, raw_key), header = gio.load_checkpoint(
            ckpt, model, (state, raw_key), expect=inputs.meta
        )
        params, static = eqx.partition(model, eqx.is_inexact_array)
        history, done = header["history"], header["epoch"]
    run_key = gio.restore_key(raw_key, key)
    run, data_on_device, params, state = _place(inputs, params, state)
    planned = int(state.total) if inputs.default_optimizer else None
    default_lr = (lambda e: _default_learning_rate(e * run.n_batches, planned)) if planned else None

    def save(p, s, epoch):
        gio.save_checkpoint(ckpt, eqx.combine(p, static), (s, raw_key), epoch=epoch,
                            history=history, meta={**inputs.meta, "planned_epochs": epochs})

    bar = ProgressBar(epochs, enabled=progress)
    t_offset = history["time"][-1] if history["time"] else 0.0
    t0 = time.perf_counter()
    saved = done if done > 0 else None
    group = 1 if callback is not None else GROUP_MAX  # a callback sees every epoch
    count, cap = 1, group
    try:
        while done < epochs:
            elapsed = time.perf_counter() - t0
            if inputs.time_budget is not None and elapsed >= inputs.time_budget:
                break
            next_save = (done // every + 1) * every if ckpt is not None else epochs
            count = max(1, min(count, cap, epochs - done, next_save - done))
            t_start = time.perf_counter()
            params, state, out = _train_group(params, state, done, count, run_key,
                                              data_on_device, static=static, run=run,
                                              group=group)
            out = [np.asarray(a) for a in jax.device_get(out)]
            t_end = time.perf_counter()
            good = np.isfinite(out[0][:count]) & out[2][:count]
            n_good = int(np.argmin(good)) if not good.all() else count
            _record(history, done, out, n_good, t_offset + t_start - t0, t_offset + t_end - t0,
                    default_lr)
            done += n_good
            if n_good < count:
                raise _non_finite(out, n_good, done + 1, ckpt, saved)
            bar.update(done, history["loss"][-1], history["val_loss"][-1])
            if ckpt is not None and (done % every == 0 or done == epochs):
                save(params, state, done)
                saved = done
            if callback is not None and callback(done, eqx.combine(params, static), history):
                break
            per_epoch = (t_end - t_start) / count
            if inputs.time_budget is not None:  # do not overshoot the budget by much
                left = inputs.time_budget - (t_end - t0)
                cap = min(cap, max(1, int(left / max(per_epoch, 1e-9))))
            count = max(1, int(GROUP_SECONDS / max(per_epoch, 1e-9)))
    except KeyboardInterrupt:
        bar.close()
        if ckpt is not None and saved != done:
            save(params, state, done)
        where = f"; checkpoint saved to {ckpt}" if ckpt is not None else ""
        warnings.warn(
            f"training interrupted after epoch {done} of {epochs}; returning the model "
            f"trained so far{where}",
            TrainingInterrupted,
            stacklevel=3,
        )
        return eqx.combine(params, static), history
    finally:
        bar.close()
    if ckpt is not None and saved != done:
        save(params, state, done)
    return eqx.combine(params, static), history


#: Parameters up to which `choose_trainer` picks Levenberg–Marquardt (Adam above).
LM_MAX_PARAMS = 2000


def choose_trainer(model, n_samples: int, *, trainer: str = "auto", epochs=None, time_budget=None):
    """The trainer the command line uses: `(optimizer, epochs, time_budget, description)`.

    Structure-preserving integrators are small networks fitted to redundant data — a
    small nonlinear least-squares problem — so `trainer="auto"` picks
    Levenberg–Marquardt (`geomlearn.LevenbergMarquardt`; a random subset of 4096 samples
    per iteration on larger data sets; up to 500 iterations or 150 s) for models with at
    most `LM_MAX_PARAMS` parameters and no manifold parameters, and the default Adam of
    `fit` (3000 full-batch epochs on up to 512 samples, else 100 epochs; Riemannian on
    manifold parameters) otherwise. `trainer="lm"` or `"adam"`
    forces one; `epochs` and `time_budget` override the defaults. `optimizer` is `None`
    for the default Adam.
    """
    from .second_order import LevenbergMarquardt

    from .manifolds import is_manifold_parameter

    n_params = sum(a.size for a in jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array)))
    if trainer not in ("auto", "lm", "adam"):
        raise ValueError(f"trainer must be 'auto', 'lm' or 'adam', got {trainer!r}")
    on_manifold = any(is_manifold_parameter(leaf) for leaf in
                      jax.tree_util.tree_leaves(model, is_leaf=is_manifold_parameter))
    if trainer == "auto":
        trainer = "lm" if n_params <= LM_MAX_PARAMS and not on_manifold else "adam"
    if trainer == "lm":
        epochs = 500 if epochs is None else epochs
        time_budget = 150.0 if time_budget is None else time_budget
        solver = LevenbergMarquardt(subset=4096 if n_samples > 4096 else None,
                                    max_params=max(LM_MAX_PARAMS, n_params))
        return solver, epochs, time_budget, (
            f"Levenberg–Marquardt ({n_params} parameters), up to {epochs} iterations or "
            f"{time_budget:g} s")
    epochs = (3000 if n_samples <= 512 else 100) if epochs is None else epochs
    adam = "Riemannian Adam" if on_manifold else "Adam"
    return None, epochs, time_budget, f"{adam} ({n_params} parameters), {epochs} epochs"
