"""Models: feed-forward and transformer integrators, and Hamiltonian neural networks."""

from . import autoencoder, hnn, lagrangian, registry, resnet, ridge_sympnet, sympnet, transformer, volume_preserving
from ._base import (
    AbstractFeedForwardIntegrator,
    AbstractHamiltonianModel,
    AbstractModel,
    AbstractTransformerIntegrator,
    Task,
)
from .registry import MODELS, ModelSpec
from .hnn import *  # noqa: F403
from .lagrangian import *  # noqa: F403
from .resnet import *  # noqa: F403
from .ridge_sympnet import *  # noqa: F403
from .sympnet import *  # noqa: F403
from .transformer import *  # noqa: F403
from .volume_preserving import *  # noqa: F403
from .autoencoder import *  # noqa: F403

__all__ = [
    "Task",
    "AbstractModel",
    "AbstractFeedForwardIntegrator",
    "AbstractTransformerIntegrator",
    "AbstractHamiltonianModel",
    *sympnet.__all__,
    *ridge_sympnet.__all__,
    *lagrangian.__all__,
    *resnet.__all__,
    *hnn.__all__,
    *volume_preserving.__all__,
    *transformer.__all__,
    *autoencoder.__all__,
]
