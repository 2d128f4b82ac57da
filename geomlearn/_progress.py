"""Training progress: how `fit(progress=...)` reports it, an option object.

`TqdmProgress()` (`progress=True`, the default) draws a `tqdm` bar in terminals and in
Jupyter notebooks and stays silent elsewhere; `NoProgress()` (`progress=False`) draws
nothing. Each is a final class on `AbstractProgress`, whose one method `start(total)`
opens the reporter of a run of `total` epochs (`update(epoch, loss, val_loss)`,
`close()`).
"""

from __future__ import annotations

import abc
import math
import sys
import time

import equinox as eqx
from tqdm.std import tqdm as text_tqdm

__all__ = ["AbstractProgress", "TqdmProgress", "NoProgress", "ProgressBar", "progress_from"]


def _isatty(stream) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return callable(isatty) and bool(isatty())
    except (ValueError, OSError):  # a closed or detached stream
        return False


def _in_jupyter_kernel() -> bool:
    """Whether this process is a Jupyter kernel (notebook, JupyterLab, VS Code, Colab).

    A kernel's stderr is not a TTY, yet its front end shows progress. IPython in a
    terminal is not a kernel (and has a TTY). Nothing is imported that the user has
    not imported already.
    """
    if "ipykernel" not in sys.modules:
        return False
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return getattr(shell, "kernel", None) is not None


# tqdm fields around the bar; tqdm itself puts ", " in front of the postfix.
_COUNT = "epoch {n_fmt}/{total_fmt}"
_TAIL = "{percentage:3.0f}%{postfix}"


def _format_rate(rate: float) -> str:
    return f"{rate:.1f} epochs/s" if rate >= 1.0 else f"{1.0 / rate:.1f} s/epoch"


class ProgressBar:
    """The progress of a training run, one bar for all its epochs.

    `epoch 12/100 |##        |  12%, loss 1.234e-03, val 1.502e-03, 240.1 epochs/s, 00:01 left`

    Drawn by `tqdm`: as a widget in a Jupyter notebook (a text bar there when
    `ipywidgets` is not installed), as a one-line bar on stderr in a terminal. Silent
    when `enabled` is false or the output is not interactive: stderr is not a TTY and
    this is not a Jupyter kernel (a log file, CI, a pipe).

    **Arguments:**

    - `total`: the number of epochs the run is planned to reach.
    - `enabled`: `False` silences the bar (`fit(..., progress=False)`).
    - `stream`: draw on this text stream instead, and only if it is a TTY (for tests
      and for callers that own a terminal); never a notebook widget.
    - `width`: the number of cells of a text bar.

    Cheap per epoch: an update between redraws costs a clock read; the bar is redrawn
    at most every `MIN_INTERVAL` seconds, and always at the last epoch and on `close`.
    The rate counts the epochs after the first update, so the compilation in the first
    epoch (and, on resume, the epochs of the earlier run) does not distort it.
    """

    MIN_INTERVAL = 0.1

    def __init__(self, total: int, *, enabled: bool = True, stream=None, width: int = 20):
        self.total = int(total)
        self.width = int(width)
        self.stream = stream
        if not enabled:
            self.enabled = False
        elif stream is not None:
            self.enabled = _isatty(stream)
        else:
            self.enabled = _isatty(sys.stderr) or _in_jupyter_kernel()
        self._bar = None
        self._first: tuple[int, float] | None = None  # (epoch, time) of the first update
        self._last_draw = -math.inf
        self._pending: tuple[int, float, float | None] | None = None

    def update(self, epoch: int, loss: float, val_loss: float | None) -> None:
        """Record that `epoch` epochs are complete (counted from 1 and from the start of
        the run, so a resumed run starts above 1), with their training and validation
        loss (`None` without validation data)."""
        if not self.enabled:
            return
        now = time.perf_counter()
        if self._bar is None:
            self._first = (epoch, now)
            self._bar = self._open(epoch, self._postfix(epoch, loss, val_loss, now))
            self._last_draw = now
            return
        if now - self._last_draw < self.MIN_INTERVAL and epoch < self.total:
            self._pending = (epoch, loss, val_loss)
            return
        self._draw(epoch, loss, val_loss, now)

    def close(self) -> None:
        """Draw the last recorded state and release the bar (a terminal gets its newline)."""
        if self._bar is None:
            return
        if self._pending is not None:
            self._draw(*self._pending, time.perf_counter())
        self._bar.close()
        self._bar = None

    def _open(self, epoch: int, postfix: str):
        common = dict(total=self.total, initial=epoch, postfix=postfix, unit="epoch",
                      dynamic_ncols=False, leave=True)
        if self.stream is None and _in_jupyter_kernel():
            from tqdm.auto import tqdm as auto_tqdm  # a widget when ipywidgets is there

            if _is_widget(auto_tqdm):
                return auto_tqdm(bar_format=f"{_COUNT} {{bar}} {_TAIL}", **common)
        file = sys.stderr if self.stream is None else self.stream
        return text_tqdm(file=file, bar_format=self._text_format(), **common)

    def _text_format(self) -> str:
        return f"{_COUNT} |{{bar:{self.width}}}| {_TAIL}"

    def _draw(self, epoch: int, loss: float, val_loss: float | None, now: float) -> None:
        self._pending = None
        self._last_draw = now
        self._bar.n = epoch
        self._bar.set_postfix_str(self._postfix(epoch, loss, val_loss, now), refresh=False)
        self._bar.refresh()

    def _postfix(self, epoch: int, loss: float, val_loss: float | None, now: float) -> str:
        text = f"loss {loss:.3e}"
        if val_loss is not None:
            text += f", val {val_loss:.3e}"
        first_epoch, first_time = self._first
        if epoch > first_epoch and now > first_time:
            rate = (epoch - first_epoch) / (now - first_time)
            text += f", {_format_rate(rate)}"
            if epoch < self.total:
                text += f", {text_tqdm.format_interval((self.total - epoch) / rate)} left"
        return text


def _is_widget(cls) -> bool:
    try:
        from tqdm.notebook import tqdm_notebook
    except ImportError:
        return False
    return issubclass(cls, tqdm_notebook)


class AbstractProgress(eqx.Module):
    """How a training run reports its progress (`fit(progress=...)`)."""

    @abc.abstractmethod
    def start(self, total: int) -> ProgressBar:
        """The reporter of a run planned to reach `total` epochs: `update(epoch, loss,
        val_loss)` after each epoch, `close()` at the end."""


class TqdmProgress(AbstractProgress):
    """A `tqdm` bar (`progress=True`): a widget in a Jupyter notebook, a one-line bar on
    stderr in a terminal, nothing when the output is not interactive (a log file, CI).

    **Arguments:** `stream`: draw on this text stream instead, only if it is a TTY
    (never a notebook widget); `width`: the cells of a text bar (default 20)."""

    stream: object = None
    width: int = 20

    def start(self, total: int) -> ProgressBar:
        return ProgressBar(total, stream=self.stream, width=self.width)


class NoProgress(AbstractProgress):
    """No progress report (`progress=False`)."""

    def start(self, total: int) -> ProgressBar:
        return ProgressBar(total, enabled=False)


def progress_from(progress) -> AbstractProgress:
    """The progress option `progress` means: `True` is `TqdmProgress()`, `False`
    `NoProgress()`, an `AbstractProgress` itself; `TypeError` otherwise."""
    if isinstance(progress, AbstractProgress):
        return progress
    if isinstance(progress, bool):
        return TqdmProgress() if progress else NoProgress()
    raise TypeError("progress must be a bool or a progress option (TqdmProgress(), "
                    f"NoProgress()), got {progress!r}")
