"""The base of the symplectic layer families (shears, Hénon layers, ridge flows)."""

from __future__ import annotations

import abc

import equinox as eqx

from .._typing import Array, Float

__all__ = ["AbstractSymplecticLayer"]


class AbstractSymplecticLayer(eqx.Module):
    r"""A map of phase space $\mathbb{R}^{\dim}$ that is symplectic for every parameter
    value and every step size `h`, with a closed-form inverse.

    Concrete layers implement `__call__(z, h=None)` and `inverse(z, h=None)`, with
    `inverse(layer(z, h), h) == z` for every `z` and `h`.
    """

    dim: eqx.AbstractVar[int]

    @abc.abstractmethod
    def __call__(self, z: Float[Array, " dim"], h=None) -> Float[Array, " dim"]:
        raise NotImplementedError

    @abc.abstractmethod
    def inverse(self, z: Float[Array, " dim"], h=None) -> Float[Array, " dim"]:
        raise NotImplementedError
