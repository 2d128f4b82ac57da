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
shuffled minibatches (a fresh permutation per epoch, drawn from `fold_in(key, epoch)`;
a full-batch epoch is the one update, without a loop), with the optimiser update inside,
and **several epochs run in one compiled call**: a `lax.while_loop` over up to
`GROUP_MAX` epochs whose length on each call is chosen so that a call takes about
`GROUP_SECONDS` (measured on the previous call), and never crosses a checkpoint. Per
epoch the loop adds only what correctness needs: the finiteness of the loss and of the
parameters, a select that keeps the last good state, and the per-epoch loss (and
validation loss, and learning rate where the optimiser exposes one) written into
buffers. The host reads the buffers back once per group, which drives the progress bar,
the history and the non-finite check; an epoch whose loss or parameters are not finite
is not applied, so the state returned or saved is always the last good one. With a
`callback`, every epoch is its own call. Compiled code is cached by `jax.jit` on the
static parts (model structure, optimiser update, loss, sizes): another `fit` of the same
setup does not compile again. On the SympNets pendulum network (450 parameters, 40
pairs, full batch, about 30 µs per epoch) `fit` runs at 0.92 × the iterations/s of a bare
`lax.scan` of the same update, measured in one process
(`python -m benchmarks training_throughput`; see `benchmarks/RESULTS.md`).

**Optax's extra arguments.** An optimiser that is an
`optax.GradientTransformationExtraArgs` (every `optax` alias and `optax.chain`) receives
`value` (the minibatch loss), `grad` and `value_fn` (the minibatch loss as a function of
the parameters) in its `update`, so `optax.lbfgs()` and its line search
(`optax.scale_by_zoom_linesearch`) work inside `fit`; transformations that do not use
them ignore them.

**Many devices.** When `jax.devices()` lists more than one device, the parameters and the
data are replicated on a one-axis `jax.sharding.Mesh` and every minibatch is sharded along
its batch axis (data parallelism: XLA inserts the gradient all-reduce; a
Levenberg–Marquardt iteration is computed replicated). The result equals the one-device
result to round-off.

**Many processes.** Start every process with `jax.distributed.initialize(...)` and call
`fit` with the same arguments on each: the mesh then spans all processes' devices. Tested
on CPU with two processes on one machine (`tests/test_distributed.py`) with JAX 0.10.2,
whose CPU collectives default to gloo; with another JAX version (older ones were not
tested), set `jax.config.update("jax_cpu_collectives_implementation", "gloo")` before
`jax.distributed.initialize`, since without cross-process CPU collectives the first
all-reduce fails. What `fit` guarantees there:

- *Agreement, checked.* Before the first epoch the processes all-gather a 31-bit digest
  of each argument that must agree — the key, `epochs`, `batch_size`, the number and
  shape of the samples, the data and validation data themselves, the task, loss and
  trainer, the model's parameters, the checkpoint path and interval, the resume point,
  whether a callback and a time budget are given — and every process raises the same
  `ValueError` naming the arguments that differ (and which processes differ from
  process 0). A different key per process no longer trains silently to a result that
  matches neither.
- *Committed inputs accepted.* Data or a model that a process holds on one of its own
  devices are brought to the host and replicated (a committed single-device array
  cannot be moved to another process's devices).
- *Stopping together.* Before each compiled call the processes agree (one all-gather of
  three integers): they run the smallest proposed group, and stop when any of them asks
  to — its `callback` returned `True`, its `time_budget` is spent, or it received
  `Ctrl-C`. While `fit` runs in the main thread of a multi-process job, SIGINT sets a
  flag instead of raising, so no process leaves a collective half-done; every process
  then saves (process 0) and returns with the `TrainingInterrupted` warning. A
  `KeyboardInterrupt` raised by a callback is treated the same way.
- *One writer.* Only process 0 draws the progress bar, holds the checkpoint's lock and
  writes the checkpoint; `fit` returns on no process before that write is done, so a
  following `resume=True` reads it everywhere (the checkpoint file must be visible to
  every process — a shared file system — for a resume).
- *The same model everywhere.* Every process returns the trained model as arrays on
  its own device (a local copy of the replicated parameters).

Every process passes the whole data set. Loading only a process's shard
(`jax.make_array_from_process_local_data`) is not supported yet: the checks above
(finiteness, the relative loss's scale, the data fingerprint) read the data on the host.
With one process nothing of this runs: no collectives (the deferred `Ctrl-C` below
applies to every `fit`).

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
keeps the last good state. `Ctrl-C` saves a checkpoint and returns what was trained, with
a warning: while `fit` runs in the main thread, the first SIGINT is taken after the
current compiled group (at most about `GROUP_SECONDS`, or the first compilation), not
inside JAX, so the runtime stays usable for the save; a second SIGINT interrupts at once.
A `KeyboardInterrupt` raised by a callback is handled the same way.
"""

from __future__ import annotations

import contextlib
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

#: The most epochs one compiled call runs (see "Speed" in the module documentation):
#: large enough that the per-call cost (dispatch, read-back, history) is under 1 % of a
#: group even for a network whose epoch takes 20 µs; the groups' length is set by
#: `GROUP_SECONDS`, this only bounds it (and the length of the per-epoch buffers).
GROUP_MAX = 4096
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


def _default_learning_rate(step, total_steps: int):
    """The default optimiser's learning rate at update `step` (computed on the host, for
    the history): a float for an integer `step`, a list of floats for an array of steps."""
    span = max(int(total_steps) - 1, 1)
    ratio = _LR_END / _LR_START
    if np.ndim(step) == 0:
        return _LR_START * ratio ** (min(step, span) / span)
    # Python's pow per element: NumPy's vectorised power may differ in the last bit, by
    # position in the array, and a resumed run's history must equal an uninterrupted one
    return [_LR_START * ratio ** (min(k, span) / span) for k in np.asarray(step).tolist()]


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
    #: the optimiser takes Optax's extra arguments (`value`, `grad`, `value_fn`): e.g.
    #: `optax.lbfgs()`, whose line search evaluates the loss at trial parameters
    extra_args: bool = False


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
              None, xv is not None,
              solver is None and isinstance(optimizer, optax.GradientTransformationExtraArgs))
    dtype = jnp.result_type(float)
    data = (x, y, jnp.asarray(target_sq, dtype), xv, yv, jnp.asarray(val_sq, dtype))
    return _Inputs(run, data, epochs, checkpoint, checkpoint_every, resume, optimizer,
                   default_opt, time_budget, meta)


def _place(inputs: _Inputs, params, state, key):
    """Replicate data, parameters and key over all devices, sharding batches along them.

    Across processes the mesh holds every process's devices; inputs that a process holds
    on one of its own devices (committed data or model) are first brought to the host,
    since a committed single-device array cannot be placed on another process's devices.
    """
    devices = jax.devices()
    run, data = inputs.run, inputs.data
    if len(devices) > 1:
        if jax.process_count() > 1:
            data, params, state, key = jax.tree_util.tree_map(_to_host, (data, params, state, key))
        mesh = jax.sharding.Mesh(np.asarray(devices), ("batch",))
        replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
        sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch"))
        data, params, state, key = jax.device_put((data, params, state, key), replicated)
        run = run._replace(batch_sharding=sharding)
    return run, data, params, state, key


# ------------------------------------------------------------------- many processes


def _to_host(a):
    """A NumPy copy of a JAX array this process holds completely (else `a` unchanged)."""
    if isinstance(a, jax.Array) and a.is_fully_addressable \
            and not jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
        return np.asarray(a)
    return a


def _local(tree):
    """The process-local copy of replicated global arrays (every process holds all of a
    replicated array; its first local shard is the whole array)."""
    def one(a):
        if isinstance(a, jax.Array) and not a.is_fully_addressable:
            return a.addressable_data(0)
        return a
    return jax.tree_util.tree_map(one, tree)


def _digest(value) -> int:
    """A 31-bit digest of `value` (its `repr`, or the bytes of arrays) for comparing
    arguments across processes."""
    import hashlib

    h = hashlib.sha256()
    if isinstance(value, (np.ndarray, jax.Array)):
        h.update(gio.fingerprint(value).encode())
    else:
        h.update(repr(value).encode())
    return int.from_bytes(h.digest()[:4], "little") & 0x7FFFFFFF


#: The arguments every process of a multi-process `fit` must have the same (in this order).
_AGREED = ("key", "epochs", "batch_size", "number of samples", "sample shape", "data",
           "val_data", "task", "loss", "trainer", "model", "checkpoint", "checkpoint_every",
           "resume point (epochs done)", "callback given", "time_budget given")


def _failed_before_training() -> None:
    """Across processes, a process whose arguments were rejected (or whose checkpoint
    could not be read or locked) still takes part in the agreement all-gather, marked
    failed, so that the others raise too instead of waiting for it; then it re-raises."""
    if jax.process_count() > 1:
        _check_agreement(None)


def _check_agreement(fields: dict[str, Any] | None) -> None:
    """Across processes: `ValueError` naming every argument that is not the same on all
    of them (an all-gather of one small digest per argument, `_AGREED`). Every process
    receives the same digests, so every process raises the same error: none is left
    waiting. `fields=None`: this process failed before training (it raises its own error
    after this returns; the others raise naming it)."""
    from jax.experimental import multihost_utils

    names = list(_AGREED)
    failed = fields is None
    digests = [0] * len(names) if failed else [_digest(fields[n]) for n in names]
    mine = np.asarray([int(failed), *digests], dtype=np.int32)
    every = np.asarray(multihost_utils.process_allgather(mine)).reshape(-1, len(names) + 1)
    down = [i for i in range(every.shape[0]) if every[i, 0]]
    if failed:
        return
    if down:
        raise ValueError(
            f"fit failed before training on process(es) {down} of {every.shape[0]} (see the "
            "error there: an argument or the checkpoint was rejected); stopped here too, "
            "since the processes train only together"
        )
    every = every[:, 1:]
    differ = [j for j in range(len(names)) if not (every[:, j] == every[0, j]).all()]
    if differ:
        me = jax.process_index()
        parts = []
        for j in differ:
            others = [i for i in range(every.shape[0]) if every[i, j] != every[0, j]]
            value = fields[names[j]]
            if isinstance(value, (np.ndarray, jax.Array)):
                value = np.asarray(value).tolist()
            text = repr(value) if len(repr(value)) <= 80 else "(not shown)"
            parts.append(f"{names[j]} (processes {others} differ from process 0; "
                         f"process {me} has {text})")
        raise ValueError(
            f"fit runs on {every.shape[0]} processes, which must all call it with the same "
            f"arguments (and data); these differ: {'; '.join(parts)}"
        )


def _consensus(stop: bool, interrupted: bool, count: int) -> tuple[bool, bool, int]:
    """Across processes, before each compiled call: stop if any process wants to (a
    callback, the time budget, Ctrl-C), and run the smallest of the proposed group sizes,
    so that every process runs the same epochs and none waits in a collective alone."""
    from jax.experimental import multihost_utils

    mine = np.asarray([int(stop), int(interrupted), int(count)], dtype=np.int32)
    every = np.asarray(multihost_utils.process_allgather(mine)).reshape(-1, 3)
    return bool(every[:, 0].any()), bool(every[:, 1].any()), int(every[:, 2].min())


class _InterruptFlag:
    """`Ctrl-C` is taken between compiled groups, not inside JAX: while installed (main
    thread only), the first SIGINT sets `raised` instead of raising `KeyboardInterrupt`,
    and `fit` stops after the current group (across processes: all processes together).

    A `KeyboardInterrupt` raised asynchronously inside JAX's dispatch, compilation or
    read-back could leave the runtime unusable for the model's save that follows (a
    fresh-clone CI run once hung there, and an interrupt during the first XLA compile
    could crash the process); deferring it to the loop avoids both. A second SIGINT
    raises at once, as an escape hatch."""

    def __init__(self):
        import signal
        import threading

        self.raised = False
        self._previous = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)

    def _handle(self, signum, frame):
        if self.raised:
            raise KeyboardInterrupt
        self.raised = True

    def restore(self):
        import signal

        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None


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
            if run.extra_args:  # the minibatch's loss, for a line search (optax.lbfgs)
                updates, s = run.update(
                    grads, s, p, value=value, grad=grads,
                    value_fn=lambda q: _batch_loss(q, static, run, xb, yb, target_sq))
            else:
                updates, s = run.update(grads, s, p)
            p = optax.apply_updates(p, updates)
        return (p, s), value

    if n_batches == 1 and B == M:  # full batch: the order does not matter, no loop
        (params, opt_state), loss = train_step((params, opt_state), (x, y))
        return params, opt_state, loss
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
    """The learning rate held in an optimiser state (traced), or `None` if it holds none
    (decided at trace time, so an optimiser without one costs nothing per epoch). The
    default optimiser's is read from the host (see `_fit`), not here."""
    if isinstance(state, DefaultOptimizerState):
        return None
    for s in jax.tree_util.tree_leaves(state, is_leaf=lambda s: hasattr(s, "hyperparams")):
        hp = getattr(s, "hyperparams", None)
        if isinstance(hp, dict) and "learning_rate" in hp:
            return jnp.asarray(hp["learning_rate"], dtype=float)
    return None


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
        lr = _learning_rate_of(s)
        if lr is not None:  # only an optimiser that exposes its rate pays for the read-out
            lrs = lrs.at[i].set(lr.astype(out_dtype))
        p2, s2, loss = epoch_fn(p, s, epoch0 + i, key, x, y, target_sq, static, run)
        params_ok = _all_finite(p2)
        good = jnp.isfinite(loss) & params_ok
        if run.has_val:
            vals = vals.at[i].set(_batch_loss(p2, static, run, xv, yv, val_sq).astype(out_dtype))
        p, s = jax.lax.cond(good, lambda: (p2, s2), lambda: (p, s))
        buffers = (losses.at[i].set(loss.astype(out_dtype)), vals, finite.at[i].set(params_ok),
                   lrs)
        return p, s, i + 1, good, buffers

    start = (params, state, jnp.asarray(0, jnp.int32), jnp.asarray(True),
             (nan, nan, jnp.ones((group,), bool), nan))
    params, state, _, _, out = jax.lax.while_loop(keep_going, body, start)
    return params, state, out


# ----------------------------------------------------------------------------- fit


def _new_history() -> dict[str, list]:
    return {"epoch": [], "loss": [], "val_loss": [], "learning_rate": [], "time": []}


def _record(history, first_epoch, out, n, t_start, t_end, default_lr):
    """Append `n` epochs of a group's outputs to the history (times interpolated).

    Vectorised: a group holds up to `GROUP_MAX` epochs, and a Python loop over them
    would cost a noticeable part of a small model's epoch."""
    if n == 0:
        return
    loss, val, _, lr = (np.asarray(a[:n], np.float64) for a in out)
    epochs = range(first_epoch + 1, first_epoch + n + 1)
    history["epoch"].extend(epochs)
    history["loss"].extend(loss.tolist())
    history["val_loss"].extend(_none_for_nan(val))
    history["learning_rate"].extend(default_lr(np.arange(first_epoch, first_epoch + n))
                                    if default_lr else _none_for_nan(lr))
    steps = np.arange(1, n + 1, dtype=np.float64)
    history["time"].extend((t_start + (t_end - t_start) * steps / n).tolist())


def _none_for_nan(a: np.ndarray) -> list:
    """`a` as a list of floats, with `None` for NaN (an epoch without that value)."""
    nan = np.isnan(a)
    if nan.all():
        return [None] * a.size
    values = a.tolist()
    return [None if bad else v for v, bad in zip(values, nan.tolist())] if nan.any() else values


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
    - `optimizer`: any `optax.GradientTransformation` (one that takes Optax's extra
      arguments, such as `optax.lbfgs()`, receives `value`, `grad` and `value_fn` of the
      minibatch); `None` means Adam with the
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
      Across processes, one process's `True` stops all of them after that epoch.
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
    `geomlearn.io.CheckpointInUseError` when another run is writing the checkpoint;
    across processes (`jax.distributed`), `ValueError` on every process naming the
    arguments that are not the same on all of them (see "Many processes" in the module
    documentation).

    ```python
    train, test = gl.datasets.pendulum_sympnets()
    model = gl.GSympNet(2, n_layers=4, width=16, key=jax.random.PRNGKey(0))
    model, history = gl.fit(model, train, epochs=2000, key=jax.random.PRNGKey(1))
    ```
    """
    with contextlib.ExitStack() as stack:
        try:
            inputs = _resolve(model, data, epochs=epochs, batch_size=batch_size,
                              optimizer=optimizer, loss=loss,
                              prediction_window=prediction_window, seq_length=seq_length,
                              val_data=val_data, checkpoint=checkpoint,
                              checkpoint_every=checkpoint_every, resume=resume,
                              time_budget=time_budget)
            # two runs never alternate on one checkpoint; across processes only process 0
            # writes it
            lock = inputs.checkpoint if jax.process_index() == 0 else None
            stack.enter_context(gio.checkpoint_lock(lock))
        except Exception:
            _failed_before_training()
            raise
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
        try:
            model, (state, raw_key), header = gio.load_checkpoint(
                ckpt, model, (state, raw_key), expect=inputs.meta
            )
        except Exception:
            _failed_before_training()
            raise
        params, static = eqx.partition(model, eqx.is_inexact_array)
        history, done = header["history"], header["epoch"]
    multi = jax.process_count() > 1  # no collectives of fit's own on one process
    writer = jax.process_index() == 0  # checkpoints and the progress bar
    if multi:
        _check_agreement(_agreement_fields(inputs, model, params, raw_key, done, callback))
    # the default optimiser's rate is a closed form of the update count: the history
    # computes it on the host instead of reading it out of every compiled epoch
    planned = int(state.total) if isinstance(state, DefaultOptimizerState) else None
    run, data_on_device, params, state, run_key = _place(
        inputs, params, state, gio.restore_key(raw_key, key))
    default_lr = (lambda e: _default_learning_rate(e * run.n_batches, planned)) if planned else None

    def save(p, s, epoch):
        if writer:
            gio.save_checkpoint(ckpt, eqx.combine(_local(p), static), (_local(s), raw_key),
                                epoch=epoch, history=history,
                                meta={**inputs.meta, "planned_epochs": epochs})

    bar = ProgressBar(epochs, enabled=progress and writer)
    t_offset = history["time"][-1] if history["time"] else 0.0
    t0 = time.perf_counter()
    saved = done if done > 0 else None
    group = 1 if callback is not None else GROUP_MAX  # a callback sees every epoch
    count, cap, stop = 1, group, False
    interrupt = _InterruptFlag()
    try:
        while done < epochs:
            elapsed = time.perf_counter() - t0
            stop = stop or (inputs.time_budget is not None and elapsed >= inputs.time_budget)
            next_save = (done // every + 1) * every if ckpt is not None else epochs
            count = max(1, min(count, cap, epochs - done, next_save - done))
            if multi:  # every process runs the same group, or all stop together
                stop, interrupted, count = _consensus(stop, interrupt.raised, count)
                if interrupted:
                    raise KeyboardInterrupt
            elif interrupt.raised:
                raise KeyboardInterrupt
            if stop:
                break
            t_start = time.perf_counter()
            params, state, out = _train_group(params, state, done, count, run_key,
                                              data_on_device, static=static, run=run,
                                              group=group)
            out = [np.asarray(a) for a in jax.device_get(_local(out) if multi else out)]
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
            if callback is not None:
                current = eqx.combine(_local(params) if multi else params, static)
                try:
                    stop = bool(callback(done, current, history))
                except KeyboardInterrupt:
                    if not multi:
                        raise
                    interrupt.raised = True  # stop every process, after agreeing
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
        _finished_together(multi)
        return eqx.combine(_local(params) if multi else params, static), history
    finally:
        interrupt.restore()
        bar.close()
    if ckpt is not None and saved != done:
        save(params, state, done)
    _finished_together(multi)
    return eqx.combine(_local(params) if multi else params, static), history


def _finished_together(multi: bool) -> None:
    """Across processes, `fit` returns on none before process 0 has written the final
    checkpoint, so that a following `fit(..., resume=True)` on any process reads it."""
    if multi:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices("geomlearn.fit: finished")


def _agreement_fields(inputs: _Inputs, model, params, raw_key, done, callback) -> dict:
    """What every process of a multi-process `fit` must have the same: the arguments that
    decide the epochs run (sizes, epochs, resume point, key) and the values trained
    (model, data). Compared by `_check_agreement` before the first epoch."""
    x, y, _, xv, yv, _ = inputs.data
    leaves = [np.asarray(_to_host(a)) for a in jax.tree_util.tree_leaves(params)]
    return {
        "key": np.asarray(_to_host(raw_key)),
        "epochs": inputs.epochs,
        "batch_size": inputs.run.B,
        "number of samples": inputs.run.M,
        "sample shape": (tuple(x.shape[1:]), tuple(y.shape[1:])),
        "data": inputs.meta["data_fingerprint"],
        "val_data": None if xv is None else gio.fingerprint(_to_host(xv), _to_host(yv)),
        "task": inputs.meta["task"],
        "loss": inputs.meta["loss"],
        "trainer": inputs.meta["trainer"],
        "model": (type(model).__name__, gio.fingerprint(*leaves) if leaves else ""),
        "checkpoint": None if inputs.checkpoint is None else str(inputs.checkpoint),
        "checkpoint_every": inputs.checkpoint_every,
        "resume point (epochs done)": done,
        "callback given": callback is not None,
        "time_budget given": inputs.time_budget is not None,
    }


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
