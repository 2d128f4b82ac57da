r"""Training losses as objects: the relative loss, the mean squared error, or a callable.

A loss is called on a batch as `loss(prediction, target, target_sq)`, where `target_sq`
is the mean squared norm of the compared targets over the whole data set (the scale of
the relative loss; the other losses ignore it).
"""

from __future__ import annotations

import abc
from typing import Callable, ClassVar

import equinox as eqx
import jax.numpy as jnp

__all__ = ["AbstractLoss", "RelativeLoss", "MeanSquaredLoss", "CallableLoss", "resolve_loss"]


class AbstractLoss(eqx.Module):
    """A training loss on batches: `loss(prediction, target, target_sq) -> scalar`."""

    #: whether the loss is a (scaled) sum of squares of the residuals, so that a damped
    #: least-squares solver minimises it
    sum_of_squares: eqx.AbstractClassVar[bool]

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """The name stored in checkpoints (`"relative"`, `"mse"`, a function's name)."""

    @abc.abstractmethod
    def __call__(self, pred, target, target_sq):
        """The loss of a batch of predictions against their targets."""

    @abc.abstractmethod
    def check_scale(self, target_sq: float) -> None:
        """Refuse data whose targets leave the loss undefined (`ValueError`)."""


class RelativeLoss(AbstractLoss):
    r"""$\|\hat Y - Y\|_F / (\sqrt{B}\,\bar y)$ of a minibatch of $B$ samples, with $\bar y^2$
    the mean squared target norm of the whole data set: $\|\hat Y - Y\|_F / \|Y\|_F$ on the
    full data set, and defined for a batch whose targets are all zero."""

    sum_of_squares: ClassVar[bool] = True

    @property
    def name(self) -> str:
        return "relative"

    def __call__(self, pred, target, target_sq):
        # ‖Ŷ − Y‖ / ‖Y‖ with ‖Y‖² estimated as B · (mean squared target norm of the data)
        denom = jnp.sqrt(target_sq.astype(pred.dtype) * pred.shape[0])
        return jnp.linalg.norm((pred - target).ravel()) / denom

    def check_scale(self, target_sq: float) -> None:
        if target_sq == 0:
            raise ValueError(
                "every target of the data is zero, so the relative loss ‖Ŷ − Y‖/‖Y‖ is "
                'undefined; use loss="mse"'
            )


class MeanSquaredLoss(AbstractLoss):
    r"""The mean of $(\hat Y - Y)^2$ over the batch."""

    sum_of_squares: ClassVar[bool] = True

    @property
    def name(self) -> str:
        return "mse"

    def __call__(self, pred, target, target_sq):
        return jnp.mean(jnp.square(pred - target))

    def check_scale(self, target_sq: float) -> None:
        pass


class CallableLoss(AbstractLoss):
    """A user's `fn(prediction, target) -> scalar` on batches."""

    fn: Callable = eqx.field(static=True)
    sum_of_squares: ClassVar[bool] = False

    @property
    def name(self) -> str:
        return getattr(self.fn, "__name__", "callable")

    def __call__(self, pred, target, target_sq):
        return self.fn(pred, target)

    def check_scale(self, target_sq: float) -> None:
        pass


#: The losses by the name `fit(loss=...)` accepts.
_LOSSES: dict[str, type[AbstractLoss]] = {"relative": RelativeLoss, "mse": MeanSquaredLoss}


def resolve_loss(loss) -> AbstractLoss:
    """The loss object for `"relative"`, `"mse"`, an `AbstractLoss` or a callable
    `loss(prediction, target)`.

    **Raises:** `ValueError` for any other value, naming the accepted names.
    """
    if isinstance(loss, AbstractLoss):
        return loss
    if callable(loss):
        return CallableLoss(loss)
    if isinstance(loss, str) and loss in _LOSSES:
        return _LOSSES[loss]()
    raise ValueError(f"unknown loss {loss!r}; expected one of {list(_LOSSES)} or a callable")
