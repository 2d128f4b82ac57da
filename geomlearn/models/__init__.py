"""Models: feed-forward and transformer integrators, and Hamiltonian neural networks."""

from . import hnn, resnet, sympnet, transformer, volume_preserving
from ._base import (
    AbstractFeedForwardIntegrator,
    AbstractHamiltonianModel,
    AbstractModel,
    AbstractTransformerIntegrator,
)
from .hnn import *  # noqa: F403
from .resnet import *  # noqa: F403
from .sympnet import *  # noqa: F403
from .transformer import *  # noqa: F403
from .volume_preserving import *  # noqa: F403

__all__ = [
    "AbstractModel",
    "AbstractFeedForwardIntegrator",
    "AbstractTransformerIntegrator",
    "AbstractHamiltonianModel",
    *sympnet.__all__,
    *resnet.__all__,
    *hnn.__all__,
    *volume_preserving.__all__,
    *transformer.__all__,
]
