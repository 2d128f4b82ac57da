"""Models: feed-forward and transformer integrators, and Hamiltonian neural networks.

This module only re-exports names. The list of model families is the registry of
`geomlearn.models._base`, which every concrete model class joins when it is defined.
`AbstractPointModel` (the base of models whose state is one point) and the sample forms
of a `Task` (`AbstractSamples`, `Pairs`, `Windows`, …) are importable from here for
authors of new model families; they are not re-exported at the top level.
"""

from ._base import AbstractModel as AbstractModel
from ._integrators import (
    AbstractFeedForwardIntegrator as AbstractFeedForwardIntegrator,
    AbstractHamiltonianModel as AbstractHamiltonianModel,
    AbstractPointModel as AbstractPointModel,
    AbstractTransformerIntegrator as AbstractTransformerIntegrator,
)
from ._task import (
    AbstractSamples as AbstractSamples,
    Accelerations as Accelerations,
    MidpointPairs as MidpointPairs,
    Pairs as Pairs,
    Snapshots as Snapshots,
    StepResiduals as StepResiduals,
    Task as Task,
    TimedPairs as TimedPairs,
    TimedWindows as TimedWindows,
    VectorFieldSamples as VectorFieldSamples,
    Windows as Windows,
)
from .conformal import ConformalSympNet as ConformalSympNet
from .corrected import CorrectedIntegrator as CorrectedIntegrator
from .hnn import HamiltonianNeuralNetwork as HamiltonianNeuralNetwork
from .lagrangian import LagrangianNeuralNetwork as LagrangianNeuralNetwork
from .lie_poisson import LiePoissonNet as LiePoissonNet
from .multistep import MultiStep as MultiStep
from .pair_sympnet import PairSympNet as PairSympNet
from .port_hamiltonian import PortHamiltonianNN as PortHamiltonianNN
from .resnet import ResNet as ResNet
from .ridge_sympnet import PSympNet as PSympNet, RSympNet as RSympNet
from .symplectic_transformer import (
    AbstractSymplecticTransformer as AbstractSymplecticTransformer,
    LinearSymplecticTransformer as LinearSymplecticTransformer,
    SymplecticTransformer as SymplecticTransformer,
)
from .sympnet import GSympNet as GSympNet, HenonNet as HenonNet, LASympNet as LASympNet
from .transformer import Transformer as Transformer
from .volume_preserving import (
    VolumePreservingFeedForward as VolumePreservingFeedForward,
    VolumePreservingTransformer as VolumePreservingTransformer,
)

__all__ = [
    "Task",
    "AbstractModel",
    "AbstractFeedForwardIntegrator",
    "AbstractTransformerIntegrator",
    "AbstractHamiltonianModel",
    "GSympNet",
    "LASympNet",
    "HenonNet",
    "PairSympNet",
    "PSympNet",
    "RSympNet",
    "LiePoissonNet",
    "LagrangianNeuralNetwork",
    "ResNet",
    "HamiltonianNeuralNetwork",
    "VolumePreservingFeedForward",
    "VolumePreservingTransformer",
    "Transformer",
    "AbstractSymplecticTransformer",
    "LinearSymplecticTransformer",
    "SymplecticTransformer",
    "MultiStep",
    "ConformalSympNet",
    "PortHamiltonianNN",
    "CorrectedIntegrator",
]

# The symplectic autoencoder and the integrators of reduced codes live with the other
# reductions, in `geomlearn.reduction`, which sits above this package.
_MOVED_TO_REDUCTION = frozenset(
    {"LiftedIntegrator", "PSDLayer", "ReducedIntegrator", "SymplecticAutoencoder",
     "initialize_from_psd"}
)


def __getattr__(name: str):
    # an `ImportError` (not an `AttributeError`) so that `from geomlearn.models import X`
    # shows the message too
    if name in _MOVED_TO_REDUCTION:
        raise ImportError(f"geomlearn.models.{name} moved to geomlearn.reduction.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
