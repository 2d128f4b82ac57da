"""geomlearn: structure-preserving neural networks for dynamical systems, in JAX.

Networks that are exactly symplectic or exactly volume-preserving for every value of
their parameters, the tools to measure that (`geomlearn.geometry`), and what is needed
around them to learn integrators from phase-space trajectories.
"""

from . import data, datasets, evaluation, geometry, integrators, io, layers, models, rollout, systems, training
from .data import *  # noqa: F403
from .evaluation import *  # noqa: F403
from .io import *  # noqa: F403
from .layers import *  # noqa: F403
from .models import *  # noqa: F403
from .rollout import *  # noqa: F403
from .training import *  # noqa: F403

__version__ = "0.1.0"

__all__ = [
    "geometry",
    "layers",
    "models",
    "systems",
    "integrators",
    "datasets",
    *layers.__all__,
    *models.__all__,
    *data.__all__,
    *training.__all__,
    *rollout.__all__,
    *evaluation.__all__,
    *io.__all__,
]
