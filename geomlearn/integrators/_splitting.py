r"""Explicit symplectic splitting methods for separable systems $H = T(p) + V(q)$.

They use $\nabla T$ and $\nabla V$ of an `AbstractSeparableSystem`. Symplectic Euler is
the variant $p_{n+1} = p_n - h\nabla V(q_n)$, $q_{n+1} = q_n + h\nabla T(p_{n+1})$;
Störmer–Verlet is kick–drift–kick (velocity Verlet). The higher orders are Yoshida's
triple-jump compositions of Störmer–Verlet: weights $\gamma_1 = \gamma_3 = 1/(2 -
2^{1/(p+1)})$, $\gamma_2 = 1 - 2\gamma_1$ raise a symmetric method of order $p$ to order
$p + 2$; `Yoshida4` applies it once ($p = 2$), `Yoshida6` applies it to `Yoshida4`
($p = 4$, nine Störmer–Verlet steps) (H. Yoshida, *Construction of higher order
symplectic integrators*, Phys. Lett. A 150, 1990).
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ._base import AbstractSeparableIntegrator

__all__ = [
    "AbstractComposition",
    "SymplecticEuler",
    "StormerVerlet",
    "Yoshida4",
    "Yoshida6",
]


def _split(z):
    n = z.shape[0] // 2
    return z[:n], z[n:]


def _triple_jump(order: int) -> tuple[float, float, float]:
    """Weights that raise a symmetric method of order `order` to order `order + 2`."""
    root = 2.0 ** (1.0 / (order + 1))
    outer = 1.0 / (2.0 - root)
    return (outer, 1.0 - 2.0 * outer, outer)


_YOSHIDA4 = np.array(_triple_jump(2))
_YOSHIDA6 = np.outer(np.array(_triple_jump(4)), _YOSHIDA4).reshape(-1)


def _verlet(system, q, p, h):
    p = p - (0.5 * h) * system.grad_potential(q)
    q = q + h * system.grad_kinetic(p)
    p = p - (0.5 * h) * system.grad_potential(q)
    return q, p


class SymplecticEuler(AbstractSeparableIntegrator):
    r"""Symplectic Euler: $p_{n+1} = p_n - h\nabla V(q_n)$,
    $q_{n+1} = q_n + h\nabla T(p_{n+1})$ (order 1)."""

    name: ClassVar[str] = "symplectic_euler"
    order: ClassVar[int] = 1
    symplectic: ClassVar[bool] = True

    def step(self, system, z, h):
        q, p = _split(z)
        p = p - h * system.grad_potential(q)
        q = q + h * system.grad_kinetic(p)
        return jnp.concatenate([q, p]), jnp.array(True)


class AbstractComposition(AbstractSeparableIntegrator):
    r"""A composition $\Phi_{\gamma_k h} \circ \dots \circ \Phi_{\gamma_1 h}$ of
    Störmer–Verlet steps with the weights `weights` (class variable, summing to 1)."""

    symplectic: ClassVar[bool] = True
    weights: eqx.AbstractClassVar[np.ndarray]

    def step(self, system, z, h):
        q, p = _split(z)
        for w in self.weights:  # a fixed, short composition: unrolled at trace time
            q, p = _verlet(system, q, p, jnp.asarray(w, dtype=z.dtype) * h)
        return jnp.concatenate([q, p]), jnp.array(True)


class StormerVerlet(AbstractComposition):
    r"""Störmer–Verlet, kick–drift–kick: $p_{n+1/2} = p_n - \tfrac h2\nabla V(q_n)$,
    $q_{n+1} = q_n + h\nabla T(p_{n+1/2})$, $p_{n+1} = p_{n+1/2} - \tfrac h2\nabla
    V(q_{n+1})$ (order 2, symmetric)."""

    name: ClassVar[str] = "stormer_verlet"
    order: ClassVar[int] = 2
    weights: ClassVar[np.ndarray] = np.array([1.0])


class Yoshida4(AbstractComposition):
    r"""The triple jump of Störmer–Verlet with $\gamma_1 = \gamma_3 = 1/(2 - 2^{1/3})$,
    $\gamma_2 = 1 - 2\gamma_1$ (order 4)."""

    name: ClassVar[str] = "yoshida4"
    order: ClassVar[int] = 4
    weights: ClassVar[np.ndarray] = _YOSHIDA4


class Yoshida6(AbstractComposition):
    r"""The triple jump of `Yoshida4` with $2^{1/5}$: nine Störmer–Verlet steps
    (order 6)."""

    name: ClassVar[str] = "yoshida6"
    order: ClassVar[int] = 6
    weights: ClassVar[np.ndarray] = _YOSHIDA6
