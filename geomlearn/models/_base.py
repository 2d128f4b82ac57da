"""Abstract bases shared by every geomlearn model.

Every public model is a final subclass of one of

- `AbstractFeedForwardIntegrator`: `z_{t+1} = model(z_t, h=None)` on one point `(d,)`;
- `AbstractTransformerIntegrator`: `model(Z)` maps a window `(T, d)` to a window of the
  same shape whose last `pw` rows are the prediction;
- `AbstractHamiltonianModel`: a learned scalar `H_θ(z)` and its field `J∇H_θ`.

Two conventions make models persistable and listable without per-class code:

- `structure` (a class variable) names what the model preserves for every parameter
  value: `"symplectic"`, `"volume"` or `"none"`.
- Every constructor argument except `key` and `dtype` is stored in a field of the same
  name (sizes and flags are static fields), so `model.config()` recovers the arguments
  and `geomlearn.load` can rebuild the skeleton before reading the arrays.
"""

from __future__ import annotations

import abc
import inspect
from typing import ClassVar

import equinox as eqx
import jax

__all__ = [
    "AbstractModel",
    "AbstractFeedForwardIntegrator",
    "AbstractTransformerIntegrator",
    "AbstractHamiltonianModel",
]

STRUCTURES = ("symplectic", "volume", "none")


class AbstractModel(eqx.Module):
    """Base of all geomlearn models (see the module docstring for the conventions)."""

    structure: ClassVar[str] = "none"

    dim: eqx.AbstractVar[int]

    def config(self) -> dict:
        """The constructor arguments of this model (without `key`), read from its fields.

        `dtype` is the dtype of the parameters (`None` for a model without any).
        """
        params = inspect.signature(type(self).__init__).parameters
        out = {}
        for name, p in params.items():
            if name in ("self", "key") or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            if name == "dtype":
                continue
            if not hasattr(self, name):
                raise AttributeError(
                    f"{type(self).__name__} does not store its constructor argument {name!r}"
                )
            out[name] = getattr(self, name)
        if "dtype" in params:
            leaves = [
                leaf for leaf in jax.tree_util.tree_leaves(self) if eqx.is_inexact_array(leaf)
            ]
            out["dtype"] = leaves[0].dtype if leaves else None
        return out


class AbstractFeedForwardIntegrator(AbstractModel):
    """A one-step map `z_{t+1} = model(z_t, h)` on points of shape `(dim,)`.

    `h` is an optional step size (a scalar) that scales each layer's update (Jin et al.'s
    extended SympNets for irregularly sampled data); `h=None` means no scaling.
    """

    @abc.abstractmethod
    def __call__(self, z: jax.Array, h: jax.Array | float | None = None) -> jax.Array:
        raise NotImplementedError


class AbstractTransformerIntegrator(AbstractModel):
    """A window map `(T, dim) -> (T, dim)`.

    `seq_length` is the one window length the model accepts, or `None` when any `T` works.
    """

    seq_length: eqx.AbstractVar[int | None]

    @abc.abstractmethod
    def __call__(self, Z: jax.Array) -> jax.Array:
        raise NotImplementedError


class AbstractHamiltonianModel(AbstractModel):
    """A learned Hamiltonian `H_θ(z)` with vector field `J ∇H_θ(z)`."""

    @abc.abstractmethod
    def hamiltonian(self, z: jax.Array) -> jax.Array:
        raise NotImplementedError

    @abc.abstractmethod
    def vector_field(self, z: jax.Array) -> jax.Array:
        raise NotImplementedError
