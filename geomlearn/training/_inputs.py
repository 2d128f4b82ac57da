"""`fit`'s arguments, checked and resolved once: samples, sizes, loss, trainer, checkpoint."""

from __future__ import annotations

import dataclasses
import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

from .. import io as gio
from .._validation import check_bool, check_int
from ..manifolds import is_manifold_parameter
from ..rollout import check_model
from ._losses import AbstractLoss, resolve_loss
from ._processes import to_host
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


def has_manifold_parameters(model) -> bool:
    """Whether the model has Stiefel/Grassmann parameters."""
    return any(is_manifold_parameter(leaf) for leaf in
               jax.tree_util.tree_leaves(model, is_leaf=is_manifold_parameter))


def _samples(model, data, val_data, *, seq_length, prediction_window):
    """The model's training samples of `data` and `val_data`: `(x, y, xv, yv, task)`."""
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


def resolve(model, data, *, epochs, batch_size, optimizer, loss, prediction_window,
             seq_length, val_data, checkpoint, checkpoint_every, resume, time_budget):
    """`fit`'s arguments as an `Inputs`; `ValueError`/`TypeError` for what cannot train."""
    check_model(model)
    time_budget = _time_budget(time_budget)
    epochs, by_budget = _epochs(epochs, time_budget)
    if by_budget and checkpoint_every is None:
        checkpoint_every = BUDGET_CHECKPOINT_EVERY
    resume = check_bool("resume", resume)
    loss_fn = resolve_loss(loss)
    x, y, xv, yv, task = _samples(model, data, val_data, seq_length=seq_length,
                                  prediction_window=prediction_window)
    M = x.shape[0]
    B = _batch_size(batch_size, M)
    checkpoint, checkpoint_every = _checkpointing(model, checkpoint, checkpoint_every,
                                                  resume, epochs)
    on_manifold = has_manifold_parameters(model)
    planned = PROVISIONAL_UPDATES if by_budget else epochs * (M // B)
    trainer = as_trainer(optimizer, on_manifold=on_manifold, total_updates=planned)
    trainer.check(model, loss_fn, on_manifold)
    data = _data(model, task, loss_fn, x, y, xv, yv)
    meta = {
        "n_samples": M,
        "batch_size": B,
        "task": task.as_dict(),
        "loss": loss_fn.name,
        "data_fingerprint": gio.fingerprint(x, y),
        "trainer": trainer.name,
    }
    run = Run(task, loss_fn, M, B, M // B, trainer, None, xv is not None)
    return Inputs(run, data, epochs, by_budget, checkpoint, checkpoint_every, resume, time_budget,
                  meta)


def place(inputs: Inputs, params, state, key):
    """Replicate data, parameters and key over all devices, sharding batches along them.

    Across processes the mesh holds every process's devices; inputs that a process holds
    on one of its own devices (committed data or model) are first brought to the host,
    since a committed single-device array cannot be placed on another process's devices.
    """
    devices = jax.devices()
    run, data = inputs.run, inputs.data
    if len(devices) > 1:
        if jax.process_count() > 1:
            data, params, state, key = jax.tree_util.tree_map(to_host, (data, params, state, key))
        mesh = jax.sharding.Mesh(np.asarray(devices), ("batch",))
        replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
        sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch"))
        data, params, state, key = jax.device_put((data, params, state, key), replicated)
        run = run._replace(batch_sharding=sharding)
    return run, data, params, state, key
