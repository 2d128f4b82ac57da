"""Reading files of an older layout: what a model class stored before it changed.

A model file records, per model (nested ones too), the **layout** of its arrays: the
number `file_layout(class_name)` at the time it was written (1 for a file that does not
record one, which is what every file written before layouts were recorded holds). A
class whose arrays change (a new parameter, a leaf removed or reshaped) gets the next
layout number here, and a migration from the previous one:

- `strip(skeleton, header)`: today's skeleton turned into the old layout, so that the
  file's records are read into it (e.g. a parameter the old files lack replaced by
  `None`); `header` is the file's record of the model (its `config` as saved);
- `fill(model)`: the model read that way brought to today's layout (the missing
  parameter at the value a fresh model starts from).

Migrations chain: a file of layout 1 of a class now at layout 3 goes through the
migrations from 1 and from 2. A file of a layout newer than this geomlearn knows fails
with a one-line error naming the layout and asking for an upgrade. See
`docs/persistence.md` for the compatibility rule these serve.

A transformer's `positional_encoding=True` meant another position signal in several
layouts; a file records today the resolved signal by name, never `True`, and the strips
rebuild an older file's `True` with the signal it meant then. The two signals only such
files hold (`PositionBiasEveryLayer`, `"bias-light"`; `WidePositionBiasEveryLayer`,
`"bias-every-layer"`) live here and are registered as retired placements, so that a file
that names them (such a model saved again) loads too; they are not shorthands.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from ..layers._position_signal import (
    N_POSITION_FEATURES,
    AbstractPositionBias,
    PositionAmplitude,
    PositionBias,
    PositionSplitAmplitude,
    register_retired_placement,
)
from ..models._base import AbstractModel
from ._container import PersistenceError

__all__ = [
    "file_layout",
    "migration_skeleton",
    "migrate",
    "MIGRATIONS",
    "LAYOUTS",
    "RETIRED_PLACEMENTS",
    "PositionBiasEveryLayer",
    "WidePositionBiasEveryLayer",
]


@dataclasses.dataclass(frozen=True)
class Migration:
    """How to read a class's files of one layout into today's (see the module docs)."""

    strip: Callable
    fill: Callable


def _lagrangian_strip(skeleton, header):
    return eqx.tree_at(lambda m: m.mass, skeleton, None)


def _lagrangian_fill(model):
    if model.mass is not None:
        return model
    dtype = model.weights[0].dtype
    return eqx.tree_at(lambda m: m.mass, model, jnp.eye(model.n, dtype=dtype),
                       is_leaf=lambda x: x is None)


# ---------------------------------------------------- position signals of earlier files


class PositionBiasEveryLayer(AbstractPositionBias):
    r"""`"bias-light"`, the meaning of `positional_encoding=True` of the symplectic and
    standard transformers in files of layout 2: two features $e_t$ in every row-wise
    layer, a shift of a gradient layer's argument. Kept so that those files load."""

    name: ClassVar[str] = "bias-light"
    features: ClassVar[int] = N_POSITION_FEATURES
    every_layer: ClassVar[bool] = True
    through_argument: ClassVar[bool] = True


class WidePositionBiasEveryLayer(AbstractPositionBias):
    r"""`"bias-every-layer"`, the meaning of `positional_encoding=True` (and `"bias"`) of
    the transformers in files of layout 1: eight features in every row-wise layer, a
    bias $G e_t$ of a gradient layer's pre-activation. Kept so that those files load."""

    name: ClassVar[str] = "bias-every-layer"
    features: ClassVar[int] = 8
    every_layer: ClassVar[bool] = True
    through_argument: ClassVar[bool] = False


#: The signals only files of earlier layouts record, by name.
RETIRED_PLACEMENTS = {
    s.name: register_retired_placement(s)
    for s in (PositionBiasEveryLayer(), WidePositionBiasEveryLayer())
}


def _saved_as(header):
    """What the file recorded as `positional_encoding` (`None` when absent)."""
    return (header.get("config") or {}).get("positional_encoding")


def _rebuilt_with(skeleton, signal):
    """`skeleton` rebuilt with `positional_encoding=signal` (its other arguments and
    its dtype unchanged)."""
    config = {**skeleton.config(), "positional_encoding": signal}
    config["dtype"] = next(leaf.dtype for leaf in jax.tree_util.tree_leaves(skeleton))
    return eqx.filter_eval_shape(lambda: type(skeleton)(**config, key=jax.random.PRNGKey(0)))


def _layerwise_position_strip(skeleton, header):
    """A transformer of layout 1 saved with `positional_encoding=True` or `"bias"` held
    the earlier design of the position bias, eight features in every row-wise layer: its
    skeleton is rebuilt with `WidePositionBiasEveryLayer()`, the same map."""
    saved = _saved_as(header)
    if saved is True or saved == "bias":
        return _rebuilt_with(skeleton, WidePositionBiasEveryLayer())
    return skeleton


def _true_was(signal) -> Callable:
    """The strip for a layout in which `positional_encoding=True` meant `signal`: a file
    saved with `True` is read into a skeleton rebuilt with `signal`, the same map (the
    loaded model reports its name in its `config()`). Decided on the file's own record,
    so that the strips of several layouts chain: a linear symplectic transformer of
    layout 2 saved with `True` passes `"amplitude"` and `"bias"` on its way to
    `"bias-light"`."""

    def strip(skeleton, header):
        return _rebuilt_with(skeleton, signal) if _saved_as(header) is True else skeleton

    strip.__name__ = f"_true_was_{type(signal).__name__}"
    return strip


def _unchanged(model):
    return model


def _autoencoder_strip(skeleton, header=None):
    return eqx.tree_at(lambda m: (m.reference, m.loss_weights), skeleton, (None, None))


def _autoencoder_fill(model):
    if model.reference is not None:
        return model
    dtype = next(x.dtype for x in jax.tree_util.tree_leaves(model) if eqx.is_inexact_array(x))
    return eqx.tree_at(lambda m: (m.reference, m.loss_weights), model,
                       (jnp.zeros(model.full_dim, dtype), jnp.ones(2, dtype)),
                       is_leaf=lambda x: x is None)


def _reduced_integrator_strip(skeleton, header):
    return eqx.tree_at(lambda m: m.autoencoder, skeleton,
                       _autoencoder_strip(skeleton.autoencoder))


#: The current layout of each class whose arrays or configuration changed (others: 1).
LAYOUTS = {
    # 2: the learned constant mass matrix `mass` (files of layout 1 have no `mass`; they
    # load with the identity, the value a new network starts from)
    "LagrangianNeuralNetwork": 2,
    # 2: files of layout 1 with `positional_encoding=True` or `"bias"` held eight
    # features in every row-wise layer and load as `"bias-every-layer"`
    # 3: files of layout 2 with `True` held `"bias-light"` and load as it
    # 4: the configuration records the resolved signal, never `True`; files of layout 3
    # with `True` held `"amplitude"` and load as it
    "SymplecticTransformer": 4,
    # 3: files of layout 2 with `True` held `"bias-light"`; 4: of layout 3, `"bias"`;
    # 5: the resolved signal, never `True`; files of layout 4 with `True` held
    # `"amplitude"`
    "LinearSymplecticTransformer": 5,
    # 2 and 3: as for the symplectic transformer; 4: the resolved signal, never `True`;
    # files of layout 3 with `True` held `"amplitude"`
    "Transformer": 4,
    # 2: files of layout 1 with `True` held `"bias"` (once per unit) and load as it;
    # 3: the resolved signal, never `True`; files of layout 2 with `True` held
    # `"split-amplitude"`
    "VolumePreservingTransformer": 3,
    # 2: the reference state `reference` and the loss weights `loss_weights` of the
    # symplectic autoencoder (files of layout 1 have neither; they load with zero and
    # ones, which is what an autoencoder of layout 1 computed)
    "SymplecticAutoencoder": 2,
    "ReducedIntegrator": 2,
}

_SYMPLECTIC_AND_STANDARD = ("SymplecticTransformer", "LinearSymplecticTransformer", "Transformer")

#: `(class name, layout) -> Migration` to the next layout.
MIGRATIONS = {
    ("LagrangianNeuralNetwork", 1): Migration(_lagrangian_strip, _lagrangian_fill),
    **{(name, 1): Migration(_layerwise_position_strip, _unchanged)
       for name in _SYMPLECTIC_AND_STANDARD},
    **{(name, 2): Migration(_true_was(PositionBiasEveryLayer()), _unchanged)
       for name in _SYMPLECTIC_AND_STANDARD},
    ("LinearSymplecticTransformer", 3): Migration(_true_was(PositionBias()), _unchanged),
    ("VolumePreservingTransformer", 1): Migration(_true_was(PositionBias()), _unchanged),
    # the last meaning `True` had in a file: since then files record the resolved signal
    ("SymplecticTransformer", 3): Migration(_true_was(PositionAmplitude()), _unchanged),
    ("LinearSymplecticTransformer", 4): Migration(_true_was(PositionAmplitude()), _unchanged),
    ("Transformer", 3): Migration(_true_was(PositionAmplitude()), _unchanged),
    ("VolumePreservingTransformer", 2): Migration(_true_was(PositionSplitAmplitude()),
                                                  _unchanged),
    ("SymplecticAutoencoder", 1): Migration(_autoencoder_strip, _autoencoder_fill),
    ("ReducedIntegrator", 1): Migration(_reduced_integrator_strip, _unchanged),
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
        skeleton = MIGRATIONS[(name, layout)].strip(skeleton, header)
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
