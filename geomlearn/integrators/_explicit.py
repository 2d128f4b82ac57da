r"""Explicit Runge–Kutta methods for any system (not symplectic): the reference
baselines against which the structure-preserving methods are compared."""

from __future__ import annotations

from typing import ClassVar

import jax.numpy as jnp

from ._base import AbstractIntegrator

__all__ = ["Euler", "RK4"]


class Euler(AbstractIntegrator):
    r"""The explicit Euler method $z_{n+1} = z_n + h f(z_n)$ (order 1, not symplectic)."""

    name: ClassVar[str] = "euler"
    order: ClassVar[int] = 1
    symplectic: ClassVar[bool] = False

    def step(self, system, z, h):
        return z + h * system.vector_field(z), jnp.array(True)


class RK4(AbstractIntegrator):
    r"""The classical fourth-order Runge–Kutta method (not symplectic):
    $k_1 = f(z_n)$, $k_2 = f(z_n + \tfrac h2 k_1)$, $k_3 = f(z_n + \tfrac h2 k_2)$,
    $k_4 = f(z_n + h k_3)$, $z_{n+1} = z_n + \tfrac h6 (k_1 + 2k_2 + 2k_3 + k_4)$."""

    name: ClassVar[str] = "rk4"
    order: ClassVar[int] = 4
    symplectic: ClassVar[bool] = False

    def step(self, system, z, h):
        f = system.vector_field
        k1 = f(z)
        k2 = f(z + (0.5 * h) * k1)
        k3 = f(z + (0.5 * h) * k2)
        k4 = f(z + h * k3)
        return z + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4), jnp.array(True)
