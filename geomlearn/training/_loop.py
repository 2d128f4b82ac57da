"""Several epochs in one compiled call.

An epoch is the trainer's (`_trainers`); a `lax.while_loop` runs up to `GROUP_MAX` of
them per call and adds per epoch only what correctness needs: the finiteness of the loss
and of the parameters, a select that keeps the last good state, and the per-epoch loss,
validation loss and learning rate written into buffers that the host reads once per
group. Compiled code is cached by `jax.jit` on the static parts (model structure,
trainer, loss, sizes): another `fit` of the same setup does not compile again.
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
