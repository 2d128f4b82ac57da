"""geomlearn: structure-preserving neural networks for dynamical systems, in JAX.

Networks that are exactly symplectic or exactly volume-preserving for every value of
their parameters, the tools to measure that (`geomlearn.geometry`), and what is needed
around them to learn integrators from phase-space trajectories.

This module is the façade: it re-exports the public names of the subpackages, which are
layered so that imports only point down (see the architecture page of the docs):
leaf helpers → geometry, structures, manifolds, systems, integrators, data, datasets,
second_order → layers → models → rollout, evaluation, training, io → plotting → cli; the
reduction package (`geomlearn.reduction`) keeps its modules together across those layers.
"""

from . import (
    cotangent_lift as cotangent_lift,
    data as data,
    datasets as datasets,
    evaluation as evaluation,
    geometry as geometry,
    integrators as integrators,
    io as io,
    layers as layers,
    manifolds as manifolds,
    models as models,
    reduction as reduction,
    rollout as rollout,
    second_order as second_order,
    structures as structures,
    symmetries as symmetries,
    systems as systems,
    training as training,
)
from ._version import __version__ as __version__
from .data import TrajectoryData as TrajectoryData
from .evaluation import (
    Evaluation as Evaluation,
    ImmersionCheck as ImmersionCheck,
    LongHorizon as LongHorizon,
    ReductionEvaluation as ReductionEvaluation,
    StructureCheck as StructureCheck,
    WorkPrecision as WorkPrecision,
    check_immersion as check_immersion,
    check_structure as check_structure,
    evaluate as evaluate,
    evaluate_reduction as evaluate_reduction,
    work_precision as work_precision,
)
from .io import (
    PersistenceError as PersistenceError,
    load as load,
    load_checkpoint as load_checkpoint,
    register as register,
    save as save,
    save_checkpoint as save_checkpoint,
)
from .layers import (
    ActivationLayerP as ActivationLayerP,
    ActivationLayerQ as ActivationLayerQ,
    GradientLayerP as GradientLayerP,
    GradientLayerQ as GradientLayerQ,
    HenonLayer as HenonLayer,
    LinearLayerP as LinearLayerP,
    LiePoissonRidgeLayer as LiePoissonRidgeLayer,
    LinearLayerQ as LinearLayerQ,
    LinearSymplecticAttentionP as LinearSymplecticAttentionP,
    LinearSymplecticAttentionQ as LinearSymplecticAttentionQ,
    MultiHeadAttention as MultiHeadAttention,
    NeuralRidgeLayer as NeuralRidgeLayer,
    PolynomialRidgeLayer as PolynomialRidgeLayer,
    PositionalEncoding as PositionalEncoding,
    ResNetLayer as ResNetLayer,
    SymplecticAttentionP as SymplecticAttentionP,
    SymplecticAttentionQ as SymplecticAttentionQ,
    VolumePreservingAttention as VolumePreservingAttention,
    VolumePreservingLowerLayer as VolumePreservingLowerLayer,
    VolumePreservingUpperLayer as VolumePreservingUpperLayer,
    positional_encoding as positional_encoding,
)
from .layers import (  # the options of the positional encoding and the attention weighting
    AbstractPositionSignal as AbstractPositionSignal,
    AbstractWeighting as AbstractWeighting,
    ArbitraryWeighting as ArbitraryWeighting,
    Conjugate as Conjugate,
    FixedRotary as FixedRotary,
    InputTable as InputTable,
    NoSignal as NoSignal,
    PositionAmplitude as PositionAmplitude,
    PositionBias as PositionBias,
    PositionSplitAmplitude as PositionSplitAmplitude,
    Rotary as Rotary,
    ScaledTable as ScaledTable,
    SkewWeighting as SkewWeighting,
)
from .models._discrete_gradient import (  # the forcing options of PortHamiltonianNN
    AbstractForcing as AbstractForcing,
    NoForcing as NoForcing,
    StateTimeForcing as StateTimeForcing,
    TimeForcing as TimeForcing,
)
from ._progress import (  # fit(progress=...)
    AbstractProgress as AbstractProgress,
    NoProgress as NoProgress,
    TqdmProgress as TqdmProgress,
)
from .models import (
    AbstractFeedForwardIntegrator as AbstractFeedForwardIntegrator,
    AbstractHamiltonianModel as AbstractHamiltonianModel,
    AbstractModel as AbstractModel,
    AbstractSymplecticTransformer as AbstractSymplecticTransformer,
    AbstractTransformerIntegrator as AbstractTransformerIntegrator,
    ConformalSympNet as ConformalSympNet,
    CorrectedIntegrator as CorrectedIntegrator,
    GSympNet as GSympNet,
    HamiltonianNeuralNetwork as HamiltonianNeuralNetwork,
    HenonNet as HenonNet,
    LagrangianNeuralNetwork as LagrangianNeuralNetwork,
    LASympNet as LASympNet,
    LiePoissonNet as LiePoissonNet,
    LinearSymplecticTransformer as LinearSymplecticTransformer,
    MultiStep as MultiStep,
    PairSympNet as PairSympNet,
    PortHamiltonianNN as PortHamiltonianNN,
    PSympNet as PSympNet,
    ResNet as ResNet,
    RSympNet as RSympNet,
    SymplecticTransformer as SymplecticTransformer,
    Task as Task,
    Transformer as Transformer,
    VolumePreservingFeedForward as VolumePreservingFeedForward,
    VolumePreservingTransformer as VolumePreservingTransformer,
)
from .reduction import (
    LiftedIntegrator as LiftedIntegrator,
    ManifoldCotangentLift as ManifoldCotangentLift,
    PSDLayer as PSDLayer,
    ReducedIntegrator as ReducedIntegrator,
    SymplecticAutoencoder as SymplecticAutoencoder,
    initialize_from_psd as initialize_from_psd,
    manifold_cotangent_lift as manifold_cotangent_lift,
)
from .rollout import iterate as iterate
from .second_order import (
    AbstractDampedLeastSquares as AbstractDampedLeastSquares,
    GaussNewton as GaussNewton,
    LevenbergMarquardt as LevenbergMarquardt,
)
from .training import (
    AbstractLoss as AbstractLoss,
    MeanSquaredLoss as MeanSquaredLoss,
    NonFiniteLossError as NonFiniteLossError,
    RelativeLoss as RelativeLoss,
    TrainingInterrupted as TrainingInterrupted,
    default_optimizer as default_optimizer,
    fit as fit,
)
from .cli import choose_trainer as choose_trainer  # the command line's policy, kept here too

_SUBPACKAGES = ["geometry", "structures", "symmetries", "layers", "models", "systems",
                "integrators", "datasets", "manifolds", "reduction", "cotangent_lift"]

__all__ = _SUBPACKAGES + sorted(
    name for name in dir() if not name.startswith("_") and name not in _SUBPACKAGES
    and name not in {"cli", "data", "evaluation", "io", "rollout", "second_order", "training"}
)
