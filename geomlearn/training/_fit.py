"""`fit`: the training loop over compiled groups of epochs, with history, progress,
checkpoints, `Ctrl-C` and many processes."""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from typing import Callable

import equinox as eqx
import jax
import numpy as np

from .. import io as gio
from .._progress import ProgressBar
from ._history import new_history, non_finite_error, record
from ._trainers import CONVERGED, STALLED
from ._inputs import Inputs, place, resolve
from ._interrupt import InterruptFlag, TrainingInterrupted
from ._loop import GROUP_MAX, group_length, train_group
from ._processes import (
    agreement_fields,
    check_agreement,
    consensus,
    failed_before_training,
    finished_together,
    local,
)

__all__ = ["fit"]


def fit(
    model,
    data,
    *,
    epochs: int | None = None,
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
    per_process: bool = False,
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
    - `epochs`: the total number of epochs (also on `resume`, counting the ones done);
      `None` (with a `time_budget`): as many as the budget allows — the default
      optimiser's schedule is then planned from the epoch time measured in the first
      compiled calls.
    - `batch_size`: samples per minibatch; `None` means the full data set. Each epoch
      uses `M // batch_size` minibatches of a fresh permutation (the remainder is left
      out of that epoch, a different one each time). Must be between 1 and `M`.
    - `optimizer`: any `optax.GradientTransformation` (one that takes Optax's extra
      arguments, such as `optax.lbfgs()`, receives `value`, `grad` and `value_fn` of the
      minibatch); `None` means Adam with the exponential decay $10^{-2} \to 10^{-6}$
      over all planned updates (see `default_optimizer`) — Riemannian
      Adam (`geomlearn.manifolds.riemannian_adam`) on the Stiefel/Grassmann parameters of
      a model that has them, so they stay on their manifold; or a
      [`LevenbergMarquardt`][geomlearn.LevenbergMarquardt] solver, for second-order
      least-squares training (or [`GaussNewton`][geomlearn.GaussNewton]): each epoch is
      then one iteration on the whole data set (or the solver's random subset;
      `batch_size` is not used), with the same history, checkpoints and resume.
    - `loss`: `"relative"` (default), `"mse"`, a loss object
      (`geomlearn.training.RelativeLoss()`, `MeanSquaredLoss()`) or a callable
      `loss(prediction, target)` on batches. The relative loss of a minibatch is $\|\hat Y - Y\|_F / (\sqrt{B}\,\bar y)$
      with $\bar y^2$ the mean squared norm of the targets of the whole data set — equal
      to $\|\hat Y - Y\|_F / \|Y\|_F$ on the full data set, and defined for a batch whose
      targets are all zero (a trajectory at rest at an equilibrium).
    - `prediction_window`: transformers, the number `pw` of predicted rows (default `T`).
    - `seq_length`: transformers whose `seq_length` is `None` (any `T`): the window
      length `T` to train on. Models with a fixed `seq_length` use theirs.
    - `val_data`: optional validation data in the same form as `data`; its loss is
      evaluated after every epoch.
    - `key`: a JAX PRNG key (shuffling: a fresh permutation per epoch, drawn from
      `fold_in(key, epoch)`).
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
      between compiled calls), whatever `epochs` says. `epochs` or `time_budget` (or
      both) must be given.
    - `per_process`: across the processes of a `jax.distributed` job, `data` (and
      `val_data`) are **this process's own part** of the data set — e.g.
      `TrajectoryData.shard(jax.process_index(), jax.process_count())`, or the `i`-th of
      `k` files — instead of the whole data set on every process (the default, `False`).
      See "Data on many processes" below. On one process it changes nothing.

    **Returns:** `(model, history)`: the trained model and a dict of per-epoch lists
    `epoch` (1-based), `loss` (mean training loss of the epoch), `val_loss` (`None`
    without validation data), `learning_rate` (at the start of the epoch; `None` when
    the optimiser does not expose it) and `time` (wall-clock seconds since the start of
    training, across resumes); and `stop_reason`, why training stopped: `"epochs"`
    (all done), `"budget"` (the time budget ran out), `"callback"` (it returned
    `True`), `"interrupted"` (`Ctrl-C`), `"stalled"` (a `LevenbergMarquardt` or
    `GaussNewton` trainer lowered the loss in none of its last `patience` iterations)
    or `"converged"` (such a trainer reached a relative loss at round-off).

    **Raises:** `NonFiniteLossError` (a `FloatingPointError`) naming the epoch when the
    training loss is NaN or infinite (first-order optimisers; a damped least-squares
    trainer refuses such a step instead), with the last good model as its `model`
    attribute and the history up to it as its `history` (and, with `checkpoint`, that
    state saved); `ValueError`/`TypeError` for data that do not fit
    the model, and before the first epoch for a checkpoint path that cannot be written;
    `geomlearn.io.CheckpointInUseError` when another run is writing the checkpoint;
    across processes (`jax.distributed`), `ValueError` on every process naming the
    arguments that are not the same on all of them.

    **Semantics.** Several epochs run in one compiled call (never across a checkpoint);
    an epoch whose loss or parameters are not finite is not applied, so the state
    returned or saved is always the last good one. With several devices the batches
    are sharded and the result equals the one-device result to round-off. Checkpoints
    are written atomically, and a resumed run equals an uninterrupted one bit for bit
    (on CPU). `Ctrl-C` (taken between compiled calls; a second one interrupts at once)
    or a `KeyboardInterrupt` from the callback saves a checkpoint and returns what was
    trained, with a `TrainingInterrupted` warning. Across the processes of a
    `jax.distributed` job, call `fit` with the same arguments and the whole data set on
    each (or each its own part, with `per_process=True`); they stop together, process 0 alone writes the checkpoint, and each returns
    the trained model on its own device.

    **Data on many processes** (`per_process=True`). Process $i$ of $k$ takes its $M_i$
    samples from its own part (`model.training_samples`), and the global data set is their
    concatenation in process order, $M = \sum_i M_i$, held as arrays sharded along the
    sample axis (`jax.make_array_from_process_local_data`): each process keeps only its
    samples. The checks that read the data become collective, in one all-gather of a few
    numbers per process: finiteness (every process raises the same `ValueError` naming
    the processes, and their first non-finite sample in their own numbering), the
    relative loss's scale $\bar y^2 = \sum_i s_i / \sum_i M_i$ with $s_i$ the sum of
    squared target norms on process $i$, the data fingerprint (a digest of the $k$
    per-process digests, in process order: a resume needs the same parts on the same
    processes) and the sizes. **Every process must hold the same number of samples**
    ($M_i = M/k$; the sample shapes too): unequal parts are refused with a `ValueError`
    that lists $M_i$ per process — no padding, no silent truncation.
    The result equals that of one process holding the concatenated data set to
    round-off: an Optax optimiser draws its minibatches from the global permutation of
    the $M$ samples; a `LevenbergMarquardt` or `GaussNewton` iteration accumulates
    $J^\top J$ and $J^\top r$ on each process over its own residuals only (memory
    $P^2 + c\,R\,P$ per process for chunks of $c$ samples of $R$ residuals), adds them in
    one all-reduce of $P^2 + P + 1$ numbers (and one number per trial step's loss),
    and solves the damped $P \times P$ system on every process alike.

    ```python
    train, test = gl.datasets.pendulum_sympnets()
    model = gl.GSympNet(2, n_layers=4, width=16, key=jax.random.PRNGKey(0))
    model, history = gl.fit(model, train, epochs=2000, key=jax.random.PRNGKey(1))
    ```
    """
    with contextlib.ExitStack() as stack:
        try:
            inputs = resolve(model, data, epochs=epochs, batch_size=batch_size,
                              optimizer=optimizer, loss=loss,
                              prediction_window=prediction_window, seq_length=seq_length,
                              val_data=val_data, checkpoint=checkpoint,
                              checkpoint_every=checkpoint_every, resume=resume,
                              time_budget=time_budget, per_process=per_process)
            # two runs never alternate on one checkpoint; across processes only process 0
            # writes it
            lock = inputs.checkpoint if jax.process_index() == 0 else None
            stack.enter_context(gio.checkpoint_lock(lock))
        except Exception:
            failed_before_training()
            raise
        return _train(_Training.start(inputs, model, key=key, progress=progress,
                                      callback=callback))


class _Training:
    """One `fit` between compiled groups, on the host: the parameters and optimiser
    state, the epochs done, the history, the progress bar and the checkpoint."""

    def __init__(self, inputs: Inputs, static, params, state, raw_key, key, *,
                 history, done, progress, callback):
        self.inputs, self.static, self.callback = inputs, static, callback
        self.epochs, self.raw_key, self.history, self.done = inputs.epochs, raw_key, history, done
        self.multi = jax.process_count() > 1  # no collectives of fit's own on one process
        self.writer = jax.process_index() == 0  # checkpoints and the progress bar
        self.history_lr = inputs.run.trainer.history_learning_rate(state, inputs.run.n_batches)
        self.run, self.data, self.params, self.state, self.key = place(
            inputs, params, state, gio.restore_key(raw_key, key))
        self.bar = ProgressBar(self.epochs, enabled=progress and self.writer)
        self.t_offset = history["time"][-1] if history["time"] else 0.0
        self.t0 = time.perf_counter()
        self.saved = done if done > 0 else None
        self.group = 1 if callback is not None else GROUP_MAX  # a callback sees every epoch
        self.reason, self.stalls, self.groups = None, 0, 0
        history.pop("stop_reason", None)  # a resumed run says why it stopped this time

    @classmethod
    def start(cls, inputs: Inputs, model, *, key, progress, callback) -> _Training:
        """The run's initial state, or the checkpoint's on `resume` (holding its lock)."""
        params, static = eqx.partition(model, eqx.is_inexact_array)
        with jax.numpy_dtype_promotion("standard"):
            state = inputs.run.trainer.init(params)
        raw_key, history, done = gio.raw_key(key), new_history(), 0
        if inputs.resume and inputs.checkpoint.exists():
            try:
                model, (state, raw_key), header = gio.load_checkpoint(
                    inputs.checkpoint, model, (state, raw_key), expect=inputs.meta)
            except Exception:
                failed_before_training()
                raise
            params, static = eqx.partition(model, eqx.is_inexact_array)
            history, done = header["history"], header["epoch"]
        if jax.process_count() > 1:
            check_agreement(agreement_fields(inputs, model, params, raw_key, done, callback))
        return cls(inputs, static, params, state, raw_key, key, history=history, done=done,
                   progress=progress, callback=callback)

    def model(self):
        return eqx.combine(local(self.params) if self.multi else self.params, self.static)

    def save(self) -> None:
        """Write the checkpoint; an `OSError` (full disk, read-only place) says which epoch
        the checkpoint still holds, and carries the model and history as `model` and
        `history`, as `NonFiniteLossError` does."""
        if self.writer:
            try:
                gio.save_checkpoint(
                    self.inputs.checkpoint, eqx.combine(local(self.params), self.static),
                    (local(self.state), self.raw_key), epoch=self.done, history=self.history,
                    meta={**self.inputs.meta, "planned_epochs": self.epochs})
            except OSError as e:
                kept = (f"epoch {self.saved}" if self.saved is not None else "no epoch: none was written")
                err = type(e)(e.errno, f"{e.strerror}; training stopped after epoch {self.done}, "
                                       f"the checkpoint holds {kept}; the trained model is this "
                                       "error's `model` attribute")
                err.model, err.history = self.model(), self.history
                raise err from None
        self.saved = self.done

    def save_if_unsaved(self, final: bool = False) -> None:
        """Write the checkpoint if it is behind (`final`: also to record why training
        stopped)."""
        if self.inputs.checkpoint is not None and (self.saved != self.done or final):
            self.save()

    def next_group(self, count: int, cap: int, stop: bool, interrupt) -> tuple[int, bool]:
        """The size of the next group and whether to stop (agreed across processes);
        `KeyboardInterrupt` when `Ctrl-C` was pressed (on any process)."""
        budget, every = self.inputs.time_budget, self.inputs.checkpoint_every
        stop = stop or (budget is not None and time.perf_counter() - self.t0 >= budget)
        done = self.done
        next_save = (done // every + 1) * every if self.inputs.checkpoint is not None else self.epochs
        count = max(1, min(count, cap, self.epochs - done, next_save - done))
        if self.multi:  # every process runs the same group, or all stop together
            stop, interrupted, count = consensus(stop, interrupt.raised, count)
            if interrupted:
                raise KeyboardInterrupt
        elif interrupt.raised:
            raise KeyboardInterrupt
        return count, stop

    def run_group(self, count: int) -> tuple[float, float]:
        """`count` epochs in one compiled call, recorded; returns the call's start and
        end times. `NonFiniteLossError` when an epoch was not finite."""
        t_start = time.perf_counter()
        self.params, self.state, out = train_group(
            self.params, self.state, self.done, count, self.key, self.data,
            static=self.static, run=self.run, group=self.group)
        out = [np.asarray(a) for a in jax.device_get(local(out) if self.multi else out)]
        t_end = time.perf_counter()
        good = np.isfinite(out[0][:count]) & out[2][:count]
        n_good = int(np.argmin(good)) if not good.all() else count
        record(self.history, self.done, out, n_good, self.t_offset + t_start - self.t0,
                self.t_offset + t_end - self.t0, self.history_lr)
        self.done += n_good
        if n_good < count and not (n_good and out[4][n_good - 1]):
            self.fail(out, n_good)
        self.note_signal(int(out[4][n_good - 1]) if n_good else 0, n_good)
        return t_start, t_end

    def fail(self, out, n_good: int):
        """Raise `NonFiniteLossError` with the last good model and history (saved first
        when there is a checkpoint)."""
        try:
            self.save_if_unsaved()
        except OSError:
            pass  # the error below is the one to report; the checkpoint keeps its last state
        err = non_finite_error(out, n_good, self.done + 1, self.inputs.checkpoint, self.saved,
                               self.run.trainer.non_finite_hint)
        err.model, err.history = self.model(), self.history
        raise err

    def note_signal(self, signal: int, n_good: int) -> None:
        """Count consecutive stalls (the group ends after one, so only its last epoch can
        be one); set `reason` when the trainer says to stop."""
        if signal == CONVERGED:
            self.reason = "converged"
        elif signal == STALLED:
            self.stalls = (self.stalls if n_good == 1 else 0) + 1
            patience = self.run.trainer.patience
            if patience is not None and self.stalls >= patience:
                self.reason = "stalled"
        else:
            self.stalls = 0

    def after_group(self, stop: bool, interrupt) -> bool:
        """Progress, the checkpoint when due, and the callback; whether to stop."""
        self.bar.update(self.done, self.history["loss"][-1], self.history["val_loss"][-1])
        every = self.inputs.checkpoint_every
        if self.inputs.checkpoint is not None and (self.done % every == 0
                                                   or self.done == self.epochs):
            self.save()
        if self.callback is None:
            return stop or self.reason is not None
        try:
            if self.callback(self.done, self.model(), self.history):
                self.reason = self.reason or "callback"
                return True
            return stop or self.reason is not None
        except KeyboardInterrupt:
            if not self.multi:
                raise
            interrupt.raised = True  # stop every process, after agreeing
            return stop

    def next_sizes(self, t_start: float, t_end: float, count: int, cap: int) -> tuple[int, int]:
        """`(count, cap)` for the next group: `group_length(per_epoch)` epochs, and not
        much beyond the time budget."""
        per_epoch = (t_end - t_start) / count
        self.groups += 1
        if self.inputs.by_budget and self.groups >= 2 and not self.groups & (self.groups - 1):
            self.plan_by_budget(per_epoch, t_end)  # groups 2, 4, 8, …: the first one compiled
        if self.inputs.time_budget is not None:
            left = self.inputs.time_budget - (t_end - self.t0)
            cap = min(cap, max(1, int(left / max(per_epoch, 1e-9))))
        return group_length(per_epoch), cap

    def plan_by_budget(self, per_epoch: float, now: float) -> None:
        """`epochs=None`: the epochs that fit in the rest of the budget at the measured
        time per epoch, and the optimiser's schedule planned for them."""
        left = self.inputs.time_budget - (now - self.t0)
        self.epochs = max(self.done + 1, self.done + int(left / max(per_epoch, 1e-9)))
        n_batches = self.run.n_batches
        self.state = self.run.trainer.replan(self.state, self.epochs * n_batches)
        self.history_lr = self.run.trainer.history_learning_rate(self.state, n_batches)
        self.bar.total = self.epochs

    def interrupted(self):
        """After `Ctrl-C`: save, warn, and return what was trained."""
        self.reason = "interrupted"
        self.bar.close()
        self.save_if_unsaved()
        ckpt = self.inputs.checkpoint
        where = f"; checkpoint saved to {ckpt}" if ckpt is not None else ""
        warnings.warn(
            f"training interrupted after epoch {self.done} of {self.epochs}; returning the "
            f"model trained so far{where}",
            TrainingInterrupted,
            stacklevel=4,  # fit's caller
        )
        return self.finish()

    def finish(self):
        if self.reason is None:  # the loop ran out of epochs, or of time
            all_done = self.done >= self.epochs and not self.inputs.by_budget
            self.reason = "epochs" if all_done else "budget"
        self.history["stop_reason"] = self.reason
        self.save_if_unsaved(final=True)
        finished_together(self.multi)
        return self.model(), self.history


def _train(t: _Training):
    """The loop over compiled groups, until `epochs` are done or something stops it."""
    count, cap, stop = 1, t.group, False
    interrupt = InterruptFlag()
    try:
        while t.done < t.epochs:
            count, stop = t.next_group(count, cap, stop, interrupt)
            if stop:
                break
            t_start, t_end = t.run_group(count)
            stop = t.after_group(stop, interrupt)
            count, cap = t.next_sizes(t_start, t_end, count, cap)
    except KeyboardInterrupt:
        return t.interrupted()
    finally:
        interrupt.restore()
        t.bar.close()
    return t.finish()
