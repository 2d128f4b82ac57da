"""`Ctrl-C` during `fit`: taken between compiled groups, not inside JAX."""

from __future__ import annotations

import signal
import threading

__all__ = ["TrainingInterrupted"]


class TrainingInterrupted(RuntimeWarning):
    """Warned when `Ctrl-C` stopped `fit`: the model trained so far is returned (and
    checkpointed when a checkpoint path was given)."""


class InterruptFlag:
    """`Ctrl-C` is taken between compiled groups, not inside JAX: while installed (main
    thread only), the first SIGINT sets `raised` instead of raising `KeyboardInterrupt`,
    and `fit` stops after the current group (across processes: all processes together).

    A `KeyboardInterrupt` raised asynchronously inside JAX's dispatch, compilation or
    read-back could leave the runtime unusable for the model's save that follows (a
    fresh-clone CI run once hung there, and an interrupt during the first XLA compile
    could crash the process); deferring it to the loop avoids both. A second SIGINT
    raises at once, as an escape hatch."""

    def __init__(self):
        self.raised = False
        self._previous = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)

    def _handle(self, signum, frame):
        if self.raised:
            raise KeyboardInterrupt
        self.raised = True

    def restore(self):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None
