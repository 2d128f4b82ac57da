"""The per-epoch history `fit` returns, and the error for a non-finite epoch."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["NonFiniteLossError", "STOP_REASONS"]


#: Why `fit` stopped: `history["stop_reason"]`.
STOP_REASONS = ("converged", "stalled", "budget", "epochs", "interrupted", "callback")


class NonFiniteLossError(FloatingPointError):
    """The training loss (or the parameters) became NaN or infinite; the message names
    the epoch, the cause and what to try.

    **Attributes:** `model`, the last good model (the one before the epoch that was not
    finite: the work done so far, also without a checkpoint), and `history`, the
    history up to it (`history["stop_reason"]` is `None`)."""

    model = None
    history = None


def new_history() -> dict[str, list]:
    return {"epoch": [], "loss": [], "val_loss": [], "learning_rate": [], "time": []}


def record(history, first_epoch, out, n, t_start, t_end, default_lr):
    """Append `n` epochs of a group's outputs to the history (times interpolated).

    Vectorised: a group holds up to `GROUP_MAX` epochs, and a Python loop over them
    would cost a noticeable part of a small model's epoch."""
    if n == 0:
        return
    loss, val, _, lr = (np.asarray(a[:n], np.float64) for a in out[:4])
    epochs = range(first_epoch + 1, first_epoch + n + 1)
    history["epoch"].extend(epochs)
    history["loss"].extend(loss.tolist())
    history["val_loss"].extend(none_for_nan(val))
    history["learning_rate"].extend(default_lr(np.arange(first_epoch, first_epoch + n))
                                    if default_lr else none_for_nan(lr))
    steps = np.arange(1, n + 1, dtype=np.float64)
    history["time"].extend((t_start + (t_end - t_start) * steps / n).tolist())


def none_for_nan(a: np.ndarray) -> list:
    """`a` as a list of floats, with `None` for NaN (an epoch without that value)."""
    nan = np.isnan(a)
    if nan.all():
        return [None] * a.size
    values = a.tolist()
    return [None if bad else v for v, bad in zip(values, nan.tolist())] if nan.any() else values


def non_finite_error(out, i, epoch, checkpoint, saved_epoch, hint: str) -> NonFiniteLossError:
    loss = out[0]
    value = float(loss[i])
    what = (f"the training loss became {value}" if not math.isfinite(value)
            else f"the parameters became non-finite (training loss {value})")
    kept = (f"; the checkpoint {checkpoint} keeps the last good state (epoch {saved_epoch})"
            if checkpoint is not None and saved_epoch is not None else "")
    return NonFiniteLossError(
        f"{what} at epoch {epoch}{kept}; the last good model is the error's `model` "
        f"attribute; {hint}"
    )
