r"""Dynamical systems that generate the trajectories geomlearn learns from.

A system is a small immutable `eqx.Module` (see `AbstractSystem` for its protocol):
`vector_field(z)` and `hamiltonian(z)` act on one state `(dim,)`, `invariants` names
what it conserves and `default_initial_conditions()` gives documented starting states.
Canonical states are laid out positions first, $z = (q_1, \dots, q_n, p_1, \dots, p_n)$.

The families: canonical systems of a few degrees of freedom (`canonical`), the free
rigid body (`rigid`), periodically driven systems in extended phase space (`driven`),
large lattices for model reduction (`lattices`), interacting particles (`particles`) and
damped or driven port-Hamiltonian systems (`port_hamiltonian`). Every class is constructible with no arguments. A system of
your own Hamiltonian function is `from_hamiltonian(H, dim)`.

```python
>>> import jax.numpy as jnp
>>> from geomlearn.systems import Pendulum
>>> Pendulum().vector_field(jnp.array([1.0, 0.0]))   # (dq/dt, dp/dt) = (p, -sin q)
Array([ 0.       , -0.84147096], dtype=float32)
```
"""

from ._base import (
    AbstractSystem as AbstractSystem,
    AbstractHamiltonianSystem as AbstractHamiltonianSystem,
    AbstractSeparableSystem as AbstractSeparableSystem,
)
from .canonical import (
    HarmonicOscillator as HarmonicOscillator,
    Pendulum as Pendulum,
    DoublePendulum as DoublePendulum,
    CoupledHarmonicOscillator as CoupledHarmonicOscillator,
    HenonHeiles as HenonHeiles,
    Kepler as Kepler,
    ThreeBody as ThreeBody,
)
from .rigid import RigidBody as RigidBody
from .driven import (
    ForcedOscillator as ForcedOscillator,
    ForcedRigidBody as ForcedRigidBody,
    ParametricPendulum as ParametricPendulum,
)
from .lattices import TodaLattice as TodaLattice, LinearWave as LinearWave, bump as bump
from .particles import LennardJonesCluster as LennardJonesCluster
from .port_hamiltonian import (
    AbstractPortHamiltonianSystem as AbstractPortHamiltonianSystem,
    DampedPendulum as DampedPendulum,
    Duffing as Duffing,
    ForcedMassSpring as ForcedMassSpring,
)
from ._custom import (
    from_hamiltonian as from_hamiltonian,
    AbstractHamiltonianFromFunction as AbstractHamiltonianFromFunction,
    HamiltonianFromFunction as HamiltonianFromFunction,
    SeparableHamiltonianFromFunction as SeparableHamiltonianFromFunction,
)

__all__ = [
    "AbstractSystem",
    "AbstractHamiltonianSystem",
    "AbstractSeparableSystem",
    "HarmonicOscillator",
    "Pendulum",
    "DoublePendulum",
    "CoupledHarmonicOscillator",
    "HenonHeiles",
    "Kepler",
    "ThreeBody",
    "RigidBody",
    "ParametricPendulum",
    "ForcedOscillator",
    "ForcedRigidBody",
    "TodaLattice",
    "LinearWave",
    "LennardJonesCluster",
    "AbstractPortHamiltonianSystem",
    "DampedPendulum",
    "Duffing",
    "ForcedMassSpring",
    "bump",
    "from_hamiltonian",
    "AbstractHamiltonianFromFunction",
    "HamiltonianFromFunction",
    "SeparableHamiltonianFromFunction",
]


def __getattr__(name: str):
    # the command-line names belong to the command line; an `ImportError` (not an
    # `AttributeError`) so that `from geomlearn.systems import SYSTEMS` shows it too
    if name in ("SYSTEMS", "resolve_system"):
        raise ImportError(f"geomlearn.systems.{name} moved to geomlearn.cli.{name} "
                          "(the command line's names of the systems)")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
