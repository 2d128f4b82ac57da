"""Layers: single-sample `eqx.Module`s that preserve (or deliberately do not preserve) structure."""

from . import attention, henon, lie_poisson, positional, resnet, ridge, sympnet, volume_preserving
from .attention import *  # noqa: F403
from .henon import *  # noqa: F403
from .lie_poisson import *  # noqa: F403
from .positional import *  # noqa: F403
from .resnet import *  # noqa: F403
from .ridge import *  # noqa: F403
from .sympnet import *  # noqa: F403
from .volume_preserving import *  # noqa: F403
from ._position_signal import (
    AbstractPositionSignal,
    Conjugate,
    InputTable,
    NoSignal,
    PositionAmplitude,
    PositionBias,
    PositionSplitAmplitude,
    ScaledTable,
)
from ._rotary import FixedRotary, Rotary
from ._vp_attention import AbstractWeighting, ArbitraryWeighting, SkewWeighting

__all__ = [
    *positional.__all__,
    *sympnet.__all__,
    *henon.__all__,
    *ridge.__all__,
    *lie_poisson.__all__,
    *resnet.__all__,
    *volume_preserving.__all__,
    *attention.__all__,
    # the options of the positional encoding and of the attention's weighting
    *(name for name, obj in list(globals().items()) if isinstance(obj, type)
      and issubclass(obj, (AbstractPositionSignal, AbstractWeighting))),
]
