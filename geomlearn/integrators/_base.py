r"""The integrator protocol: one step of a one-step method, and what the method is.

An integrator is a small final `eqx.Module` without fields whose class variables say
what kind of method it is (as Diffrax's solvers carry their `order`), and whose `step`
advances one state by one step. The driver (`geomlearn.integrators.integrate`) asks the
object, never its name.
"""

from __future__ import annotations

import abc
from typing import ClassVar

import equinox as eqx
from jaxtyping import Array, Bool

from .._typing import Point
from ..systems import AbstractSeparableSystem, AbstractSystem

__all__ = ["AbstractIntegrator", "AbstractSeparableIntegrator", "AbstractImplicitIntegrator"]


class AbstractIntegrator(eqx.Module):
    r"""A one-step method $z_{n+1} = \Phi_h(z_n)$ for $\dot z = f(z)$.

    **Class variables:**

    - `name`: the method's name as `integrate(..., method=name)` accepts it.
    - `order`: the classical order $p$ (global error $O(h^p)$).
    - `symplectic`: whether $\Phi_h$ is a symplectic map for every canonical
      Hamiltonian system.
    - `implicit`: whether a step solves stage equations (by a bounded, checked
      fixed-point iteration).
    - `separable`: whether the method needs a separable system $H = T(p) + V(q)$.
    """

    name: eqx.AbstractClassVar[str]
    order: eqx.AbstractClassVar[int]
    symplectic: eqx.AbstractClassVar[bool]
    implicit: ClassVar[bool] = False
    separable: ClassVar[bool] = False

    @abc.abstractmethod
    def step(self, system, z: Point, h) -> tuple[Point, Bool[Array, ""]]:
        """One step of size `h` from the single state `z` of `system`.

        **Returns:** `(z_next, converged)`: the next state (same shape and dtype as `z`)
        and whether the step's stage solve converged (always `True` for an explicit
        method).
        """

    def check_system(self, system: AbstractSystem) -> None:
        """Raise `ValueError` when this method cannot integrate `system` (a separable
        method and a system that is not separable)."""
        if self.separable and not (
            system.separable and isinstance(system, AbstractSeparableSystem)
        ):
            raise ValueError(
                f"method {self.name!r} needs a separable canonical system H = T(p) + V(q); "
                f"{type(system).__name__} is not separable — use 'implicit_midpoint', "
                f"'gauss_legendre4' or 'gauss_legendre6'"
            )


class AbstractSeparableIntegrator(AbstractIntegrator):
    r"""An explicit splitting method for a separable system $H = T(p) + V(q)$ that uses
    $\nabla T$ and $\nabla V$ (`AbstractSeparableSystem.grad_kinetic`,
    `grad_potential`)."""

    separable: ClassVar[bool] = True


class AbstractImplicitIntegrator(AbstractIntegrator):
    r"""An implicit method whose stage equations involve only the vector field $f$, so
    that it can also step a bare vector field (`solve`; `geomlearn.integrators.implicit_step`)."""

    implicit: ClassVar[bool] = True

    @abc.abstractmethod
    def solve(self, vector_field, z: Point, h) -> tuple[Point, Bool[Array, ""]]:
        """One step of size `h` of $\\dot z = $ `vector_field(z)` from `z`:
        `(z_next, converged)`."""

    def step(self, system, z: Point, h) -> tuple[Point, Bool[Array, ""]]:
        return self.solve(system.vector_field, z, h)
