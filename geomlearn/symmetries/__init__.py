r"""Continuous symmetries kept exactly by symplectic networks (Noether's theorem).

A symmetry is an option object passed as `symmetry=` to `GSympNet`, `HenonNet`,
`HamiltonianNeuralNetwork` and `CorrectedIntegrator` (or as its `spec` string): every
potential of the network (the learned Hamiltonian) then depends on the state only
through the symmetry's invariant features, so the network commutes with the group and
conserves its momentum map for every parameter value (a Hamiltonian network's
implicit-midpoint step too: it keeps quadratic first integrals).

| object | group | momentum map |
|---|---|---|
| `Translation(axes, particle_dim=None)` | shifts along `axes` | total momentum along them |
| `Rotation(plane=(i, j), particle_dim=None)` | rotations in one plane | angular momentum in it |
| `Rotation3()` | rotations of 3-D particles | the angular-momentum vector |
| `Permutation(groups, particle_dim=1)` | relabellings of identical particles | none (a finite group) |
| `Particles(n_particles, spatial_dim)` | translations, rotations, relabellings | total and angular momentum |
"""

from ._base import AbstractSymmetry, invariant_gradient
from ._groups import Rotation, Rotation3, Translation
from ._particles import Particles, Permutation
from ._resolve import resolve_symmetry

__all__ = [
    "AbstractSymmetry",
    "Translation",
    "Rotation",
    "Rotation3",
    "Permutation",
    "Particles",
    "resolve_symmetry",
    "invariant_gradient",
]
