"""Several epochs in one compiled call.

An epoch is the trainer's (`_trainers`); a `lax.while_loop` runs up to `GROUP_MAX` of
them per call and adds per epoch only what correctness needs: the finiteness of the loss
and of the parameters, a select that keeps the last good state, and the per-epoch loss,
validation loss and learning rate written into buffers that the host reads once per
group; the host sizes the groups (`group_length`). Compiled code is cached by `jax.jit`
on the static parts (model structure, trainer, loss, sizes): another `fit` of the same
setup does not compile again.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from ._trainers import CONTINUE, Run, batch_loss

#: The most epochs one compiled call runs: large enough that the per-call cost
#: (dispatch, read-back, history) is under 1 % of a group even for a network whose epoch
#: takes 20 µs; the groups' length is set by `GROUP_SECONDS`, this only bounds it (and
#: the length of the per-epoch buffers).
GROUP_MAX = 4096
#: The wall time one compiled call of several epochs aims at, in seconds.
GROUP_SECONDS = 0.05
#: The fewest epochs one compiled call runs while they take at most
#: `GROUP_SECONDS_MAX` (see `group_length`).
GROUP_MIN_EPOCHS = 16
#: The longest a call of `GROUP_MIN_EPOCHS` slow epochs may take, in seconds: the
#: delay of the progress bar and of `Ctrl-C`.
GROUP_SECONDS_MAX = 2.0


def group_length(per_epoch: float) -> int:
    """The number of epochs of the next compiled call, from the wall time per epoch of the
    last one: about `GROUP_SECONDS` of epochs, but at least `GROUP_MIN_EPOCHS` as long as
    they take at most `GROUP_SECONDS_MAX`; at least 1 and at most `GROUP_MAX`.

    Why a floor in epochs and not only a wall time: every call allocates the compiled
    code's temporary buffers afresh. Once they exceed the C allocator's threshold for
    serving a block from its heap (glibc: 32 MiB at most; a full batch of about $10^4$
    samples for a network of width 30 in float64), the operating system maps them anew
    on every call and zeroes them page by page on first touch, a cost proportional to
    the buffers, as the epoch's own work is, and of the order of one epoch (figures:
    `benchmarks/RESULTS.md`, "Training throughput"). A wall time alone would run such
    epochs one or two per call and pay that cost on each; `GROUP_MIN_EPOCHS` epochs
    share it.

    **Arguments:**

    - `per_epoch`: seconds per epoch of the last call (its wall time over its epochs).

    **Returns:** the number of epochs, an `int` in `[1, GROUP_MAX]`.
    """
    per_epoch = max(float(per_epoch), 1e-9)
    floor = min(GROUP_MIN_EPOCHS, int(GROUP_SECONDS_MAX / per_epoch))
    return max(1, min(GROUP_MAX, max(int(GROUP_SECONDS / per_epoch), floor)))


def all_finite(tree):
    leaves = [jnp.all(jnp.isfinite(a)) for a in jax.tree_util.tree_leaves(tree)
              if jnp.issubdtype(a.dtype, jnp.inexact)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.asarray(True)


@functools.partial(jax.jit, static_argnames=("static", "run", "group"))
def train_group(params, state, epoch0, count, key, data, *, static, run: Run, group: int):
    """Up to `group` epochs in one compiled call: a `lax.while_loop` that runs epochs
    `epoch0, epoch0 + 1, …` while fewer than `count` have run (a traced count, so one
    compile serves every group size) and while every epoch so far was finite. A
    non-finite epoch is not applied: the returned state is the last good one; the loop
    also ends after an epoch whose signal is not `CONTINUE` (a stall, convergence), for
    the host to decide. Returns per-epoch `(loss, val_loss, parameters finite, learning
    rate, signal)` in buffers of length `group`, NaN (and `True`, `CONTINUE`) where an
    epoch did not run."""
    x, y, target_sq, xv, yv, val_sq = data
    trainer = run.trainer
    out_dtype = jnp.result_type(float)
    nan = jnp.full((group,), jnp.nan, dtype=out_dtype)

    def keep_going(carry):
        _, _, i, ok, _ = carry
        return (i < count) & ok

    def body(carry):
        p, s, i, _, (losses, vals, finite, lrs, signals) = carry
        lr = trainer.learning_rate(s)
        if lr is not None:  # only an optimiser that exposes its rate pays for the read-out
            lrs = lrs.at[i].set(lr.astype(out_dtype))
        p2, s2, loss, signal = trainer.epoch(p, s, epoch0 + i, key, x, y, target_sq, static, run)
        params_ok = all_finite(p2)
        good = jnp.isfinite(loss) & params_ok
        if run.has_val:
            vals = vals.at[i].set(batch_loss(p2, static, run, xv, yv, val_sq).astype(out_dtype))
        p, s = jax.lax.cond(good, lambda: (p2, s2), lambda: (p, s))
        buffers = (losses.at[i].set(loss.astype(out_dtype)), vals, finite.at[i].set(params_ok),
                   lrs, signals.at[i].set(signal))
        return p, s, i + 1, good & (signal == CONTINUE), buffers

    start = (params, state, jnp.asarray(0, jnp.int32), jnp.asarray(True),
             (nan, nan, jnp.ones((group,), bool), nan, jnp.zeros((group,), jnp.int32)))
    params, state, _, _, out = jax.lax.while_loop(keep_going, body, start)
    return params, state, out
