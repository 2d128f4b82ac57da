r"""The protocol of a transformer integrator's position signal: the row-wise layers as a
signal sees them (`RowSlot`), what enters them (`RowTerms`) and the abstract signal
(`AbstractPositionSignal`). The placements build on it:
`geomlearn.layers._position_signal` (the tables and the gains, and the registry of
shorthands) and `geomlearn.layers._rotary` (the rotations).
"""

from __future__ import annotations

import abc
from typing import ClassVar, NamedTuple

import equinox as eqx

__all__ = ["AbstractPositionSignal", "RowSlot", "RowTerms", "no_terms"]


class RowSlot(NamedTuple):
    """One row-wise layer of a transformer integrator, as a position signal sees it.

    - `unit`: the unit the layer belongs to (a signal placed once per unit takes the
      first slot of each unit that can take it);
    - `width`: the rows of a bias of its pre-activation;
    - `argument`: the size of the argument a shift moves (`None`: the layer has no
      argument distinct from its input, and a shift is a bias);
    - `biased`: whether it can take a bias; `steps`: whether it has an increment a step
      can scale;
    - `lower`: `True`/`False` for a lower/upper triangular layer, `None` without halves.
    """

    unit: int
    width: int
    argument: int | None = None
    biased: bool = True
    steps: bool = True
    lower: bool | None = None


class RowTerms(NamedTuple):
    r"""What enters one row-wise layer on the rows of a window (`None`: nothing): a
    `shift` `(T, argument)` of its argument, a `bias` `(T, width)` of its
    pre-activation, a `step` `(T,)` scaling its increment; in the gains' dtype."""

    shift: object = None
    bias: object = None
    step: object = None

    def empty(self) -> bool:
        """Whether nothing enters the layer (it runs as it is)."""
        return self.shift is None and self.bias is None and self.step is None


def no_terms(slots) -> tuple[RowTerms, ...]:
    """Nothing enters any of the row-wise layers `slots` (an empty `RowTerms` each)."""
    return tuple(RowTerms() for _ in slots)


class AbstractPositionSignal(eqx.Module):
    """Where the position signal enters a transformer integrator (module documentation).

    Final signals have no fields (hashable, equal by class; stored as a static field of
    the model); the parts they build, a table, rotation frequencies or gains, are the
    model's fields. `name` is what the model's configuration records (`None`: no
    signal); `starts_plain` whether a new model with the signal is the model without it
    (zero gains), so that it can be warm-started from a model trained without it."""

    name: eqx.AbstractClassVar[str | None]
    starts_plain: ClassVar[bool] = True

    @abc.abstractmethod
    def encoder(self, dim: int) -> eqx.Module | None:
        """The module `encode` and `decode` read, stored as the model's `encoder` field:
        the parameterless table a translation adds, the frequencies of a rotation, or
        `None` (the window enters and leaves the map as it is)."""

    @abc.abstractmethod
    def init(self, slots: tuple[RowSlot, ...], dtype):
        """Zero gains for the row-wise layers `slots`, a tuple of arrays, or `None` for a
        signal without gains."""

    @abc.abstractmethod
    def row_terms(self, gains, slots: tuple[RowSlot, ...], T: int,
                  times=None) -> tuple[RowTerms, ...]:
        """What enters each slot on the `T` rows of a window, from `init`'s gains (at
        the rows' real `times` `(T,)` when given, else at the row indices)."""

    @abc.abstractmethod
    def encode(self, encoder, Z, times=None):
        """The window in front of the model's map (the translation, if any)."""

    @abc.abstractmethod
    def decode(self, encoder, Y, times=None):
        """The window behind the model's map (the translation back, if any)."""

    @abc.abstractmethod
    def undo_encode(self, encoder, Z, times=None):
        """The inverse of `encode`."""

    @abc.abstractmethod
    def undo_decode(self, encoder, Y, times=None):
        """The inverse of `decode`."""
