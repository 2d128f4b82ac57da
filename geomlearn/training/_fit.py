r"""`fit`: the training loop over compiled groups of epochs, with history, progress,
checkpoints, `Ctrl-C` and many processes.

**Semantics.** Several epochs run in one compiled call (never across a checkpoint); an
epoch whose loss or parameters are not finite is not applied, so the state returned or
saved is always the last good one. With several devices the batches are sharded and the
result equals the one-device result to round-off. Checkpoints are written atomically,
and a resumed run equals an uninterrupted one bit for bit (on CPU). `Ctrl-C` (taken
between compiled calls; a second one interrupts at once) or a `KeyboardInterrupt` from
the callback saves a checkpoint and returns what was trained, with a
`TrainingInterrupted` warning. Across the processes of a `jax.distributed` job, `fit`
is called with the same arguments on each; they stop together, process 0 alone writes
the checkpoint and draws progress, and each returns the trained model on its own device.

**Data on many processes** (`per_process=True`). Process $i$ of $k$ takes its $M_i$
samples from its own part, and the global data set is their concatenation in process
order, $M = \sum_i M_i$, held as arrays sharded along the sample axis: each process
keeps only its samples. The checks that read the data become collective, in one
all-gather of a few numbers per process: finiteness (every process raises the same
`ValueError` naming the processes and their first non-finite sample), the relative
loss's scale $\bar y^2 = \sum_i s_i / \sum_i M_i$ ($s_i$ the sum of squared target norms
on process $i$), the data fingerprint (a digest of the per-process digests, in process
order) and the sizes. Every process must hold the same number of samples, $M_i = M/k$
(no padding, no silent truncation). The result equals that of one process holding the
concatenated data to round-off: an Optax optimiser draws its minibatches from the global
permutation; a `LevenbergMarquardt` or `GaussNewton` iteration accumulates $J^\top J$
and $J^\top r$ on each process over its own residuals, adds them in one all-reduce of
$P^2 + P + 1$ numbers and solves the damped $P \times P$ system on every process alike.
"""

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
from .._progress import AbstractProgress, NoProgress, progress_from
from ..second_order import LMState
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
    progress: bool | AbstractProgress = True,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int | None = None,
    resume: bool = False,
    callback: Callable | None = None,
    time_budget: float | None = None,
    per_process: bool = False,
):
    r"""Train a geomlearn model on trajectory data (see the module documentation for the
    semantics of checkpoints, interrupts and many processes).

    **Arguments:**

    - `model`: any geomlearn model; it says which samples it takes and what it predicts.
    - `data`: a `TrajectoryData` (samples taken by `model.training_samples`) or a tuple
      `(inputs, targets)` of prepared arrays; `val_data`: optional, in the same form.
    - `epochs`: the total number of epochs (on `resume` too); `None` with a
      `time_budget`: as many as it allows. `time_budget`: seconds of training at most.
    - `batch_size`: samples per minibatch (`None`: all), `M // batch_size` per epoch.
    - `optimizer`: an `optax.GradientTransformation`; `None`: Adam decaying
      $10^{-2} \to 10^{-6}$ (`default_optimizer`; Riemannian Adam on manifold
      parameters); or [`LevenbergMarquardt`][geomlearn.LevenbergMarquardt] /
      [`GaussNewton`][geomlearn.GaussNewton], one least-squares iteration per epoch.
    - `loss`: `"relative"` (default: $\|\hat Y - Y\|_F / (\sqrt{B}\,\bar y)$, $\bar y^2$
      the mean squared target norm of the data set), `"mse"`, a loss object or a
      callable `loss(prediction, target)` on batches.
    - `prediction_window`, `seq_length`: transformers' `pw` (default `T`) and `T`.
    - `key`: a JAX PRNG key (a permutation per epoch from `fold_in(key, epoch)`).
    - `progress`: how progress is reported: `True` (default, `TqdmProgress()`: a bar
      in a terminal or notebook only), `False` (`NoProgress()`) or a progress object.
    - `checkpoint`: a file (locked by the run), written every `checkpoint_every` epochs
      (`None`: `max(1, epochs // 10)`) and at the end; `resume`: continue from it if it
      exists (model class, configuration, samples and batch size must match).
    - `callback`: `callback(epoch, model, history)` after every epoch; `True` stops.
    - `per_process`: `data` is this process's own part of the data set.

    **Returns:** `(model, history)`: the trained model and per-epoch lists `epoch`,
    `loss`, `val_loss`, `learning_rate`, `time`, with `stop_reason` (`"epochs"`,
    `"budget"`, `"callback"`, `"interrupted"`, `"stalled"` or `"converged"`).

    **Raises:** `NonFiniteLossError` naming the epoch (with the last good `model` and
    `history`); `ValueError`/`TypeError` for data or options that do not fit;
    `geomlearn.io.CheckpointInUseError` when another run writes the checkpoint.

    ```python
    model, history = gl.fit(model, train, epochs=2000, key=jax.random.PRNGKey(1))
    ```
    """
    with contextlib.ExitStack() as stack:
        try:
            progress = progress_from(progress)
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


def _load_checkpoint(path, model, state, raw_key, *, expect):
    """`gio.load_checkpoint` of `(state, raw_key)`; a Levenberg–Marquardt checkpoint written
    before its state kept the running maximum of diag(JᵀJ) (`LMState.scaling`) is read
    without it, the maximum starting again from the resumed iteration's."""
    try:
        return gio.load_checkpoint(path, model, (state, raw_key), expect=expect)
    except gio.PersistenceError as error:
        if not isinstance(state, LMState) or state.scaling is None:
            raise
        try:
            model, (old, raw_key), header = gio.load_checkpoint(
                path, model, (state._replace(scaling=None), raw_key), expect=expect)
        except gio.PersistenceError:
            raise error from None
        return model, (old._replace(scaling=state.scaling), raw_key), header


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
        self.bar = (progress if self.writer else NoProgress()).start(self.epochs)
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
                model, (state, raw_key), header = _load_checkpoint(
                    inputs.checkpoint, model, state, raw_key, expect=inputs.meta)
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
