"""Models: feed-forward and transformer integrators, and Hamiltonian neural networks."""

from ._base import (
    AbstractFeedForwardIntegrator,
    AbstractHamiltonianModel,
    AbstractModel,
    AbstractTransformerIntegrator,
)

__all__ = [
    "AbstractModel",
    "AbstractFeedForwardIntegrator",
    "AbstractTransformerIntegrator",
    "AbstractHamiltonianModel",
]
