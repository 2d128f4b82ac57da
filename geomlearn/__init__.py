"""geomlearn: structure-preserving neural networks for dynamical systems, in JAX.

Networks that are exactly symplectic or exactly volume-preserving for every value of
their parameters, the tools to measure that (`geomlearn.geometry`), and what is needed
around them to learn integrators from phase-space trajectories.
"""

from importlib import metadata as _metadata

from . import data, datasets, evaluation, geometry, integrators, io, layers, models, rollout, systems, training
from . import manifolds, reduction
from .data import *  # noqa: F403
from .evaluation import *  # noqa: F403
from .io import *  # noqa: F403
from .layers import *  # noqa: F403
from .models import *  # noqa: F403
from .rollout import *  # noqa: F403
from .training import *  # noqa: F403
from .second_order import GaussNewton, LevenbergMarquardt
from .models.multistep import MultiStep

try:
    __version__ = _metadata.version("geomlearn")
except _metadata.PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "geometry",
    "layers",
    "models",
    "systems",
    "integrators",
    "datasets",
    "manifolds",
    "reduction",
    *layers.__all__,
    *models.__all__,
    *data.__all__,
    *training.__all__,
    "LevenbergMarquardt",
    "GaussNewton",
    "MultiStep",
    *rollout.__all__,
    *evaluation.__all__,
    *io.__all__,
]
