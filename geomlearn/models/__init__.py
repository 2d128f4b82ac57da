"""Models: feed-forward and transformer integrators, and Hamiltonian neural networks.

`AbstractPointModel` (the base of models whose state is one point) and the sample forms
of a `Task` (`AbstractSamples`, `Pairs`, `Windows`, …) are importable from here for
authors of new model families; they are not re-exported at the top level.
"""

from . import (
    autoencoder,
    hnn,
    lagrangian,
    lie_poisson,
    resnet,
    ridge_sympnet,
    sympnet,
    transformer,
    volume_preserving,
)
from ._base import AbstractModel
from ._integrators import (
    AbstractFeedForwardIntegrator,
    AbstractHamiltonianModel,
    AbstractPointModel,
    AbstractTransformerIntegrator,
)
from ._task import (
    AbstractSamples,
    Accelerations,
    MidpointPairs,
    Pairs,
    Snapshots,
    StepResiduals,
    Task,
    VectorFieldSamples,
    Windows,
)
from .autoencoder import *  # noqa: F403
from .conformal import ConformalSympNet
from .hnn import *  # noqa: F403
from .lagrangian import *  # noqa: F403
from .lie_poisson import *  # noqa: F403
from .multistep import MultiStep
from .port_hamiltonian import PortHamiltonianNN
from .resnet import *  # noqa: F403
from .ridge_sympnet import *  # noqa: F403
from .sympnet import *  # noqa: F403
from .transformer import *  # noqa: F403
from .volume_preserving import *  # noqa: F403

__all__ = [
    "Task",
    "AbstractModel",
    "AbstractFeedForwardIntegrator",
    "AbstractTransformerIntegrator",
    "AbstractHamiltonianModel",
    *sympnet.__all__,
    *ridge_sympnet.__all__,
    *lie_poisson.__all__,
    *lagrangian.__all__,
    *resnet.__all__,
    *hnn.__all__,
    *volume_preserving.__all__,
    *transformer.__all__,
    *autoencoder.__all__,
    "MultiStep",
    "ConformalSympNet",
    "PortHamiltonianNN",
]
