r"""Which systems a model can train on: the `compatibility` policy of a `ModelSpec`.

A policy answers `incompatibility(cls, space)`: why a model of class `cls` cannot be
trained on `space`, or `None`. `space` is a built-in system (`geomlearn.systems`) or what
the command line knows of other states — a data file's, or a driven system's rows without
its clock (`geomlearn.cli._own_data.DataFile`: `dim`, `canonical`, `labels`, no
dynamics). Checks that need the dynamics apply to systems only. `needs_canonical` (a
class variable) says whether the model needs an even-dimensional canonical phase space
$z = (q, p)$; the command line then refuses an odd-dimensional file in its own words.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from ..integrators import StormerVerlet
from ..systems import AbstractPortHamiltonianSystem, AbstractSystem
from ._policy import AbstractPolicy

__all__ = ["AbstractCompatibility", "Unconstrained", "Canonical", "UnitMassCanonical",
           "LiePoissonSO3", "EvenDimensional", "EvenOrDriven", "KnownSeparable"]


class AbstractCompatibility(AbstractPolicy):
    """Which systems (or data) a model can train on."""

    needs_canonical: ClassVar[bool]

    @abc.abstractmethod
    def incompatibility(self, cls: type, space) -> str | None:
        """Why a model of class `cls` cannot be trained on `space` (a system or a
        `DataFile`), or `None`."""


@dataclasses.dataclass(frozen=True)
class Unconstrained(AbstractCompatibility):
    """Any phase space, any dimension (unconstrained and volume-preserving models)."""

    needs_canonical: ClassVar[bool] = False

    def incompatibility(self, cls, space):
        return None


def _not_canonical(cls: type, space) -> str | None:
    """Why `space` is no even-dimensional canonical phase space for `cls`, or `None`."""
    if space.canonical and not space.dim % 2:
        return None
    return (
        f"{cls.__name__} needs a canonical phase space z = (q, p) of even "
        f"dimension 2n; {type(space).__name__} is {space.dim}-dimensional and "
        f"{'not canonical' if not space.canonical else 'odd-dimensional'} (it "
        "preserves volume, not a symplectic form). Use a volume-preserving model "
        "(vp-feedforward, vp-transformer) or an unconstrained one (resnet, transformer)."
    )


@dataclasses.dataclass(frozen=True)
class Canonical(AbstractCompatibility):
    """A canonical phase space $z = (q, p)$ of even dimension $2n$ (symplectic models)."""

    needs_canonical: ClassVar[bool] = True

    def incompatibility(self, cls, space):
        return _not_canonical(cls, space)


@dataclasses.dataclass(frozen=True)
class UnitMassCanonical(AbstractCompatibility):
    r"""A canonical phase space whose momenta are the velocities, $p = \dot q$.

    A Lagrangian network reads the states as $(q, \dot q)$, and the command line's data
    are the system's canonical $(q, p)$. They agree only where $\dot q = \partial
    H/\partial p = p$ (unit masses, kinetic energy $|p|^2/2$), checked on perturbed
    default initial conditions of a system (a data file has no dynamics to check).
    """

    needs_canonical: ClassVar[bool] = True

    def incompatibility(self, cls, space):
        why = _not_canonical(cls, space)
        if why or not isinstance(space, AbstractSystem) or _momenta_are_velocities(space):
            return why
        return (
            f"{cls.__name__} learns from states (q, q̇), but {type(space).__name__}'s "
            "data are canonical (q, p) with p ≠ q̇ (its kinetic energy is not |p|²/2), so "
            "it would fit the wrong dynamics. Use a system with unit masses (pendulum, "
            "harmonic_oscillator, henon_heiles, kepler, ...), or convert the momenta to "
            "velocities (q̇ = ∂H/∂p) and train in Python."
        )


def _momenta_are_velocities(system) -> bool:
    r"""Whether $\partial H/\partial p = p$ for `system`, at its first default initial
    conditions perturbed by 0.1·N(0, 1) (float64 when enabled, else float32 tolerances)."""
    z0 = np.asarray(system.default_initial_conditions())[:4]
    z = jnp.asarray(z0 + 0.1 * np.random.default_rng(0).standard_normal(z0.shape).astype(z0.dtype))
    n = system.dim // 2
    # one compiled program per system (`geomlearn list` asks every system; eagerly, every
    # operation of every vector field compiled on its own took seconds)
    qdot = np.asarray(jax.jit(jax.vmap(system.vector_field))(z))[:, :n]
    return bool(np.allclose(qdot, np.asarray(z)[:, n:], rtol=1e-5, atol=1e-6))


@dataclasses.dataclass(frozen=True)
class LiePoissonSO3(AbstractCompatibility):
    r"""The dual $\mathfrak{so}(3)^* \cong \mathbb{R}^3$: a three-dimensional state, a
    rigid body's angular momentum (not the $(q, p, t)$ of a damped or driven system)."""

    needs_canonical: ClassVar[bool] = False

    def incompatibility(self, cls, space):
        if isinstance(space, AbstractPortHamiltonianSystem):
            return (f"{cls.__name__} is a Lie–Poisson map of so(3)*; "
                    f"{type(space).__name__}'s states are (q, p, t) of a damped or driven system")
        if space.dim != 3:
            return (
                f"{cls.__name__} is a Lie–Poisson map of so(3)* = R^3 (a rigid body's "
                f"angular momentum); {type(space).__name__} is {space.dim}-dimensional")
        return None


@dataclasses.dataclass(frozen=True)
class EvenDimensional(AbstractCompatibility):
    """Any phase space $z = (q, p)$ of even dimension, conservative or damped
    (conformally symplectic models)."""

    needs_canonical: ClassVar[bool] = False

    def incompatibility(self, cls, space):
        if space.dim % 2:
            return (f"{cls.__name__} needs a phase space z = (q, p) of even dimension; "
                    f"{type(space).__name__} is {space.dim}-dimensional")
        return None


@dataclasses.dataclass(frozen=True)
class EvenOrDriven(AbstractCompatibility):
    """An even-dimensional phase space, or the odd-dimensional states $(q, p, t)$ of a
    driven port-Hamiltonian system, the time last (port-Hamiltonian models)."""

    needs_canonical: ClassVar[bool] = False

    def incompatibility(self, cls, space):
        driven = isinstance(space, AbstractPortHamiltonianSystem) and space.driven
        if space.dim % 2 and not driven:
            return (f"{cls.__name__} reads an odd-dimensional state as (q, p, t), a driven "
                    f"system's; {type(space).__name__} is not driven")
        return None


@dataclasses.dataclass(frozen=True)
class KnownSeparable(AbstractCompatibility):
    r"""A built-in canonical, autonomous system with a separable Hamiltonian
    $H = T(p) + V(q)$: a model that takes the system's own classical step (Störmer–Verlet)
    between learned corrections. A data file brings no equations, and a driven system's
    rows without their clock no autonomous Hamiltonian."""

    needs_canonical: ClassVar[bool] = True

    def incompatibility(self, cls, space):
        why = _not_canonical(cls, space)
        if why:
            return why
        if not isinstance(space, AbstractSystem) or space.driven:
            return (f"{cls.__name__} takes the classical step of a known autonomous Hamiltonian "
                    f"system, and {type(space).__name__} brings none; use --system with a "
                    "built-in canonical system (see `geomlearn list`)")
        try:
            StormerVerlet().check_system(space)
        except ValueError as e:
            return f"{cls.__name__} steps with Störmer–Verlet: {e}"
        return None
