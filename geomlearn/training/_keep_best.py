"""`KeepBest`: a `fit` callback that keeps the model with the lowest score seen."""

from __future__ import annotations

import math
from collections.abc import Callable

from .._validation import check_int

__all__ = ["KeepBest"]


class KeepBest:
    r"""A [`fit`][geomlearn.training.fit] callback that scores the model every `every`
    epochs and keeps the one with the lowest score.

    The training loss of a one-step map says little about its rollout: a network whose
    one-step loss falls steadily can follow a long trajectory well at one iteration and
    drift from it at the next (on the Toda bump's codes at $2n = 4$ the latent rollout's
    mean error swings between 0.03 and 0.7 along Levenberg–Marquardt's iterations while
    the loss falls). `KeepBest` selects the iterate by a score of your choice — e.g. a
    rollout error on held-out data — without stopping the training:

    ```python
    best = gl.training.KeepBest(lambda m: rollout_error(m, val_data), every=5)
    model, history = gl.fit(model, data, epochs=400, callback=best, key=key)
    model = best.model          # the lowest-scoring model seen (epoch best.epoch)
    ```

    `score(model)` returns a float; a non-finite score (a rollout that diverged) counts
    as $+\infty$, so it is never kept over a finite one. Ties keep the earlier model.
    Call [`consider`][geomlearn.training.KeepBest.consider] with the model `fit`
    returned to include the final epoch when it is not a multiple of `every`.

    **Attributes:** `model` (the best model seen, `None` before the first score),
    `epoch` (its epoch), `best` (its score, `inf` before the first), `scores` (every
    `(epoch, score)` computed). The callback never stops the training (it returns
    `False`); pass a `patience` (in scores) to stop once that many scores in a row have
    not improved on the best.
    """

    def __init__(self, score: Callable, *, every: int = 1, patience: int | None = None):
        if not callable(score):
            raise TypeError(f"score must be a callable score(model) -> float, got {score!r}")
        self.score = score
        self.every = check_int("every", every, minimum=1)
        self.patience = None if patience is None else check_int("patience", patience, minimum=1)
        self.model, self.epoch, self.best = None, None, math.inf
        self.scores: list[tuple[int, float]] = []
        self._since_best = 0

    def consider(self, model, epoch: int) -> float:
        """Score `model` (trained for `epoch` epochs) and keep it if it beats the best so
        far; returns its score (`inf` for a non-finite one)."""
        value = float(self.score(model))
        if not math.isfinite(value):
            value = math.inf
        self.scores.append((int(epoch), value))
        if value < self.best or self.model is None:
            self.model, self.epoch, self.best, self._since_best = model, int(epoch), value, 0
        else:
            self._since_best += 1
        return value

    def __call__(self, epoch: int, model, history) -> bool:
        if epoch % self.every:
            return False
        self.consider(model, epoch)
        return self.patience is not None and self._since_best >= self.patience
