"""`fit`'s arguments, checked and resolved once: samples, sizes, loss, trainer, checkpoint.

With `per_process=True` (across the processes of a `jax.distributed` job) each process
resolves its own samples, and the checks and scales that read the data (finiteness, the
relative loss's scale, the data fingerprint, the sizes) are agreed in one all-gather
(`_processes.exchange_shards`); `place` then assembles the global arrays, sharded along
the sample axis, from every process's own part.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

from .. import io as gio
from .._validation import check_bool, check_int
from ..data import TrajectoryData
from ..manifolds import is_manifold_parameter
from ..rollout import check_model
from ._losses import AbstractLoss, resolve_loss
from ._processes import Shards, ShardSummary, digest, exchange_shards, to_host
from ._trainers import Run, as_trainer


@dataclasses.dataclass(frozen=True)
class Inputs:
    """`fit`'s arguments, validated and resolved."""

    run: Run
    data: tuple  # (x, y, target_sq, xv, yv, val_sq)
    epochs: int  # with `by_budget`, provisional: `fit` plans them from the measured epoch time
    by_budget: bool
    checkpoint: pathlib.Path | None
    checkpoint_every: int
    resume: bool
    time_budget: float | None
    meta: dict
    #: each process holds only its own samples (`data`: this process's), across processes
    per_process: bool = False
    #: per-process: the validation data's fingerprint combined over the processes
    val_fingerprint: str | None = None


def _check_finite(what: str, x) -> None:
    """`ValueError` naming `what` when an input holds NaN or inf (it would make every
    loss NaN: silently for validation data, blaming the learning rate for training)."""
    first, count = _bad_samples(x)
    if first >= 0:
        raise ValueError(f"{what} has a non-finite input (NaN or inf) in sample {first}; "
                         f"expected finite inputs ({count} of {x.shape[0]} samples are not)")


def _targets_sq(model, task, y, what: str):
    """The mean squared norm of the compared part of the targets (the relative loss's scale)."""
    t = jax.vmap(lambda s: model.target(s, task))(y)
    sq = float(jnp.mean(jnp.sum(jnp.square(t.reshape(t.shape[0], -1)), axis=1)))
    if not math.isfinite(sq):
        raise ValueError(f"{what} contains a non-finite target (NaN or inf)")
    return sq


def has_manifold_parameters(model) -> bool:
    """Whether the model has Stiefel/Grassmann parameters."""
    return any(is_manifold_parameter(leaf) for leaf in
               jax.tree_util.tree_leaves(model, is_leaf=is_manifold_parameter))


def _samples(model, data, val_data, *, seq_length, prediction_window):
    """The model's training samples of `data` and `val_data`: `(x, y, xv, yv, task)`."""
    for what, d in (("data", data), ("val_data", val_data)):
        if isinstance(d, TrajectoryData) and d.irregular and not model.reads_times:
            raise ValueError(
                f"{what} are irregularly sampled, but {type(model).__name__} does not read "
                "times; feed-forward and transformer integrators do")
    task = model.task(seq_length=seq_length, prediction_window=prediction_window)
    x, y, task = model.training_samples(data, task, what="data")
    if x.shape[0] < 1:
        raise ValueError("data holds no training samples")
    xv = yv = None
    if val_data is not None:
        xv, yv, vtask = model.training_samples(val_data, task, what="val_data")
        if vtask != task:
            raise ValueError(f"val_data must have the same form as data (got {vtask} for {task})")
    return x, y, xv, yv, task


def _batch_size(batch_size, M: int) -> int:
    B = M if batch_size is None else check_int("batch_size", batch_size, minimum=1)
    if B > M:
        raise ValueError(f"batch_size must be at most the number of samples {M}, got {B}")
    return B


def _checkpointing(model, checkpoint, checkpoint_every, resume: bool, epochs: int):
    """`(checkpoint path or None, checkpoint_every)`, the path checked to be writable."""
    if checkpoint_every is None:
        checkpoint_every = max(1, epochs // 10)
    checkpoint_every = check_int("checkpoint_every", checkpoint_every, minimum=1)
    if checkpoint is not None:
        checkpoint = gio.check_writable(checkpoint)
        gio.checkpoint_header(model)  # a model that cannot be saved fails now, not later
    elif resume:
        raise ValueError("resume=True needs a checkpoint path")
    return checkpoint, checkpoint_every


def _time_budget(time_budget) -> float | None:
    if time_budget is None:
        return None
    time_budget = float(time_budget)
    if not time_budget > 0:
        raise ValueError(f"time_budget must be a positive number of seconds, got {time_budget}")
    return time_budget


def _data(model, task, loss: AbstractLoss, x, y, xv, yv) -> tuple:
    """`(x, y, target_sq, xv, yv, val_sq)`, the inputs checked to be finite and the
    targets' scale to suit the loss."""
    _check_finite("data", x)
    if xv is not None:
        _check_finite("val_data", xv)
    target_sq = _targets_sq(model, task, y, "data")
    loss.check_scale(target_sq)
    val_sq = _targets_sq(model, task, yv, "val_data") if xv is not None else target_sq
    dtype = jnp.result_type(float)
    return x, y, jnp.asarray(target_sq, dtype), xv, yv, jnp.asarray(val_sq, dtype)


#: `fit(epochs=None, time_budget=...)`: the epochs the loop may run (it stops on the
#: budget), the default schedule's provisional plan until the epoch time is measured,
#: and the epochs between checkpoints unless `checkpoint_every` says otherwise.
BUDGET_EPOCHS, PROVISIONAL_UPDATES, BUDGET_CHECKPOINT_EVERY = 2**31 - 1, 10**6, 100


def _epochs(epochs, time_budget) -> tuple[int, bool]:
    """`(epochs, by_budget)`: `epochs`, or (with `epochs=None`) as many as the time budget
    allows."""
    if epochs is None:
        if time_budget is None:
            raise ValueError("fit needs epochs, a time_budget, or both; got neither")
        return BUDGET_EPOCHS, True
    return check_int("epochs", epochs, minimum=1), False


def _bad_samples(x) -> tuple[int, int]:
    """`(first sample with a non-finite input or -1, how many)`."""
    bad = ~np.isfinite(np.asarray(x, np.float64)).reshape(x.shape[0], -1).all(axis=1)
    return (int(np.argmax(bad)) if bad.any() else -1), int(bad.sum())


def _sum_sq(model, task, y) -> float:
    t = jax.vmap(lambda s: model.target(s, task))(y)
    return float(jnp.sum(jnp.square(t.reshape(t.shape[0], -1))))


def _summary(model, task, x, y, xv, yv) -> ShardSummary:
    """This process's `ShardSummary` (per-process `fit`): its samples' checks and sums."""
    sq = _sum_sq(model, task, y)
    val_sq = _sum_sq(model, task, yv) if xv is not None else 0.0
    shapes = [(a.shape[1:], str(a.dtype)) for a in (x, y, xv, yv) if a is not None]
    fp = bytes.fromhex(gio.fingerprint(x, y))
    vfp = bytes.fromhex(gio.fingerprint(xv, yv)) if xv is not None else bytes(8)
    return ShardSummary(
        n=x.shape[0], n_val=-1 if xv is None else xv.shape[0], shapes=digest(shapes),
        bad=_bad_samples(x), bad_val=_bad_samples(xv) if xv is not None else (-1, 0),
        bad_target=not math.isfinite(sq), bad_val_target=not math.isfinite(val_sq),
        devices=jax.local_device_count(), fingerprint=fp, val_fingerprint=vfp, sq=sq,
        val_sq=val_sq)


def _agreed_data(loss: AbstractLoss, x, y, xv, yv, shards: Shards) -> tuple:
    """`(x, y, target_sq, xv, yv, val_sq)` of a per-process `fit`: this process's samples
    and the scales agreed over all processes."""
    loss.check_scale(shards.target_sq)
    dtype = jnp.result_type(float)
    val_sq = shards.val_sq if xv is not None else shards.target_sq
    return x, y, jnp.asarray(shards.target_sq, dtype), xv, yv, jnp.asarray(val_sq, dtype)


def _local(model, data, *, epochs, loss, prediction_window, seq_length, val_data,
           resume, time_budget, summarise):
    """The arguments this process can check alone, and its samples: `(time_budget,
    (epochs, by_budget), resume, loss, (x, y, xv, yv, task), summary or None)`."""
    check_model(model)
    time_budget = _time_budget(time_budget)
    epochs = _epochs(epochs, time_budget)
    resume = check_bool("resume", resume)
    loss_fn = resolve_loss(loss)
    samples = _samples(model, data, val_data, seq_length=seq_length,
                       prediction_window=prediction_window)
    x, y, xv, yv, task = samples
    return time_budget, epochs, resume, loss_fn, samples, (
        _summary(model, task, x, y, xv, yv) if summarise else None)


def resolve(model, data, *, epochs, batch_size, optimizer, loss, prediction_window,
             seq_length, val_data, checkpoint, checkpoint_every, resume, time_budget,
             per_process=False):
    """`fit`'s arguments as an `Inputs`; `ValueError`/`TypeError` for what cannot train.

    `per_process` (across processes): `data` and `val_data` are this process's own; the
    processes exchange their `ShardSummary`s (a process that fails before takes part,
    marked failed, so that none waits) and every later size is the global one.
    """
    shared = check_bool("per_process", per_process) and jax.process_count() > 1
    try:
        time_budget, (epochs, by_budget), resume, loss_fn, samples, summary = _local(
            model, data, epochs=epochs, loss=loss, prediction_window=prediction_window,
            seq_length=seq_length, val_data=val_data, resume=resume,
            time_budget=time_budget, summarise=shared)
    except Exception:
        if shared:
            exchange_shards(None)
        raise
    x, y, xv, yv, task = samples
    shards = exchange_shards(summary) if shared else None
    if by_budget and checkpoint_every is None:
        checkpoint_every = BUDGET_CHECKPOINT_EVERY
    M = shards.M if shared else x.shape[0]
    B = _batch_size(batch_size, M)
    checkpoint, checkpoint_every = _checkpointing(model, checkpoint, checkpoint_every,
                                                  resume, epochs)
    on_manifold = has_manifold_parameters(model)
    planned = PROVISIONAL_UPDATES if by_budget else epochs * (M // B)
    trainer = as_trainer(optimizer, on_manifold=on_manifold, total_updates=planned)
    trainer.check(model, loss_fn, on_manifold)
    data = (_agreed_data(loss_fn, x, y, xv, yv, shards) if shared
            else _data(model, task, loss_fn, x, y, xv, yv))
    meta = {
        "n_samples": M,
        "batch_size": B,
        "task": task.as_dict(),
        "loss": loss_fn.name,
        "data_fingerprint": shards.fingerprint if shared else gio.fingerprint(x, y),
        "trainer": trainer.name,
    }
    run = Run(task, loss_fn, M, B, M // B, trainer, None, xv is not None)
    return Inputs(run, data, epochs, by_budget, checkpoint, checkpoint_every, resume, time_budget,
                  meta, shared, shards.val_fingerprint if shared else None)


def place(inputs: Inputs, params, state, key):
    """Replicate data, parameters and key over all devices, sharding batches along them;
    per process (`inputs.per_process`), assemble the data instead from every process's own
    samples, sharded along the sample axis (see `_place_shards`).

    Across processes the mesh holds every process's devices; inputs that a process holds
    on one of its own devices (committed data or model) are first brought to the host,
    since a committed single-device array cannot be placed on another process's devices.
    """
    devices = jax.devices()
    run, data = inputs.run, inputs.data
    if inputs.per_process:
        return _place_shards(inputs, params, state, key)
    if len(devices) > 1:
        if jax.process_count() > 1:
            data, params, state, key = jax.tree_util.tree_map(to_host, (data, params, state, key))
        mesh = jax.sharding.Mesh(np.asarray(devices), ("batch",))
        replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
        sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch"))
        data, params, state, key = jax.device_put((data, params, state, key), replicated)
        run = run._replace(batch_sharding=sharding)
    return run, data, params, state, key


def _place_shards(inputs: Inputs, params, state, key):
    """Per-process samples as global arrays (`jax.make_array_from_process_local_data`):
    the mesh lists the devices by process, so the global sample order is process 0's
    samples, then process 1's, …; each device holds its block only. Parameters, optimiser
    state, key and the loss scales are replicated."""
    devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
    mesh = jax.sharding.Mesh(np.asarray(devices), ("batch",))
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch"))
    k = jax.process_count()

    def assemble(a):
        if a is None:
            return None
        a = np.asarray(to_host(a))
        return jax.make_array_from_process_local_data(sharding, a,
                                                      (a.shape[0] * k, *a.shape[1:]))

    x, y, target_sq, xv, yv, val_sq = inputs.data
    x, y, xv, yv = (assemble(a) for a in (x, y, xv, yv))
    rest = jax.tree_util.tree_map(to_host, (target_sq, val_sq, params, state, key))
    target_sq, val_sq, params, state, key = jax.device_put(rest, replicated)
    run = inputs.run._replace(batch_sharding=sharding, data_sharding=sharding)
    return run, (x, y, target_sq, xv, yv, val_sq), params, state, key
