"""geomlearn: structure-preserving neural networks for dynamical systems, in JAX.

Networks that are exactly symplectic or exactly volume-preserving for every value of
their parameters, the tools to measure that (`geomlearn.geometry`), and what is needed
around them to learn integrators from phase-space trajectories.
"""

from . import geometry, layers, models
from .layers import PositionalEncoding, positional_encoding

__version__ = "0.1.0"

__all__ = [
    "geometry",
    "layers",
    "models",
    "PositionalEncoding",
    "positional_encoding",
]
