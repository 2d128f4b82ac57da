"""Reading files of an older layout: what a model class stored before it changed.

A model file records, per model (nested ones too), the **layout** of its arrays: the
number `file_layout(class_name)` at the time it was written (1 for a file that does not
record one, which is what every file written before layouts were recorded holds). A
class whose arrays change (a new parameter, a leaf removed or reshaped) gets the next
layout number here, and a migration from the previous one:

- `strip(skeleton)`: today's skeleton turned into the old layout, so that the file's
  records are read into it (e.g. a parameter the old files lack replaced by `None`);
- `fill(model)`: the model read that way brought to today's layout (the missing
  parameter at the value a fresh model starts from).

Migrations chain: a file of layout 1 of a class now at layout 3 goes through the
migrations from 1 and from 2. A file of a layout newer than this geomlearn knows fails
with a one-line error naming the layout and asking for an upgrade. See
`docs/persistence.md` for the compatibility rule these serve.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import equinox as eqx
import jax.numpy as jnp

from ..models._base import AbstractModel
from ._container import PersistenceError

__all__ = ["file_layout", "migration_skeleton", "migrate", "MIGRATIONS"]


@dataclasses.dataclass(frozen=True)
class Migration:
    """How to read a class's files of one layout into today's (see the module docs)."""

    strip: Callable
    fill: Callable


def _lagrangian_strip(skeleton):
    return eqx.tree_at(lambda m: m.mass, skeleton, None)


def _lagrangian_fill(model):
    if model.mass is not None:
        return model
    dtype = model.weights[0].dtype
    return eqx.tree_at(lambda m: m.mass, model, jnp.eye(model.n, dtype=dtype),
                       is_leaf=lambda x: x is None)


#: The current layout of each class whose arrays have changed (others are at layout 1).
LAYOUTS = {
    # 2: the learned constant mass matrix `mass` (files of layout 1 have no `mass`; they
    # load with the identity, the value a new network starts from)
    "LagrangianNeuralNetwork": 2,
}

#: `(class name, layout) -> Migration` to the next layout.
MIGRATIONS = {
    ("LagrangianNeuralNetwork", 1): Migration(_lagrangian_strip, _lagrangian_fill),
}


def file_layout(class_name: str) -> int:
    """The layout a model of class `class_name` is written in today."""
    return LAYOUTS.get(class_name, 1)


def _stored_layout(header: dict) -> int:
    layout = header.get("layout", 1)
    if type(layout) is not int or layout < 1:
        raise PersistenceError(f"the saved layout {layout!r:.40} is not an integer >= 1")
    return layout


def migration_skeleton(skeleton, header: dict):
    """`skeleton` (today's layout of `header["class"]`) in the layout the file recorded."""
    name, stored = header["class"], _stored_layout(header)
    current = file_layout(name)
    if stored > current:
        raise PersistenceError(
            f"the saved {name} has layout {stored}, written by a newer geomlearn (this one "
            f"reads layouts up to {current}): upgrade geomlearn to load it"
        )
    for layout in range(current - 1, stored - 1, -1):
        skeleton = MIGRATIONS[(name, layout)].strip(skeleton)
    return skeleton


def migrate(model):
    """`model`, read in an older layout, brought to today's (nested models first)."""
    for field in dataclasses.fields(model):
        value = getattr(model, field.name, None)
        if isinstance(value, AbstractModel):
            new = migrate(value)
            if new is not value:
                model = eqx.tree_at(lambda m, n=field.name: getattr(m, n), model, new)
    name = type(model).__name__
    for layout in range(1, file_layout(name)):
        model = MIGRATIONS[(name, layout)].fill(model)
    return model
