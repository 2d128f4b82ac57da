"""A one-line progress bar for training, drawn only on a terminal."""

from __future__ import annotations

import sys
import time


class ProgressBar:
    """`epoch 12/100 [####------] loss 1.2e-03 val 1.5e-03 240.1 epochs/s` on stderr.

    Drawn only when `enabled` and the stream is a TTY; redrawn at most 10 times a second
    (and at the last epoch), so it costs nothing measurable per epoch.
    """

    def __init__(self, total: int, *, enabled: bool = True, stream=None, width: int = 20):
        self.stream = sys.stderr if stream is None else stream
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = bool(enabled) and callable(isatty) and bool(isatty())
        self.total = total
        self.width = width
        self._last_draw = 0.0
        self._start = time.perf_counter()
        self._start_epoch: int | None = None
        self._drawn = False

    def update(self, epoch: int, loss: float, val_loss: float | None) -> None:
        if not self.enabled:
            return
        if self._start_epoch is None:
            self._start_epoch = epoch - 1
            self._start = time.perf_counter()
        now = time.perf_counter()
        if now - self._last_draw < 0.1 and epoch < self.total:
            return
        self._last_draw = now
        done = int(self.width * epoch / max(self.total, 1))
        bar = "#" * done + "-" * (self.width - done)
        rate = (epoch - self._start_epoch) / max(now - self._start, 1e-9)
        val = "" if val_loss is None else f" val {val_loss:.3e}"
        line = f"\repoch {epoch}/{self.total} [{bar}] loss {loss:.3e}{val} {rate:.1f} epochs/s"
        self.stream.write(line)
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self.enabled and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
