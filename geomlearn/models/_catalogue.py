"""The model classes by name: the one table in which a saved model's class is looked up.

A model file records its class by name (`type(model).__name__`); loading it asks
`model_class(name)`. The table holds every concrete model class of `geomlearn.models`
and the classes added with `register` (a model family defined outside the package).
"""

from __future__ import annotations

import inspect

from . import (
    autoencoder,
    conformal,
    hnn,
    lagrangian,
    lie_poisson,
    multistep,
    port_hamiltonian,
    resnet,
    ridge_sympnet,
    sympnet,
    transformer,
    volume_preserving,
)
from ._base import AbstractModel

__all__ = ["register", "model_class", "model_classes"]

# The modules whose `__all__` lists the model families of `geomlearn.models`.
_FAMILIES = (sympnet, ridge_sympnet, lie_poisson, lagrangian, resnet, hnn, volume_preserving, transformer, autoencoder,
             multistep, conformal, port_hamiltonian)


def _is_concrete_model(name: str, obj) -> bool:
    return (isinstance(obj, type) and issubclass(obj, AbstractModel)
            and not inspect.isabstract(obj) and not name.startswith("Abstract"))


_CLASSES: dict[str, type] = {
    name: getattr(module, name)
    for module in _FAMILIES
    for name in module.__all__
    if _is_concrete_model(name, getattr(module, name))
}


def register(cls: type) -> type:
    """Make a model class defined outside `geomlearn.models` loadable by `load`.

    The class must be a concrete subclass of `geomlearn.models.AbstractModel` that stores
    its constructor arguments in fields of the same name (see `AbstractModel.config`).
    It is found by its class name, which then means this class (also over a class of
    `geomlearn.models` of the same name). Usable as a decorator; returns `cls`.
    """
    if not (isinstance(cls, type) and issubclass(cls, AbstractModel)):
        raise TypeError(f"register expects a subclass of AbstractModel, got {cls!r}")
    _CLASSES[cls.__name__] = cls
    return cls


def model_class(name: str) -> type:
    """The model class saved under `name`; `ValueError` naming the known classes otherwise."""
    try:
        return _CLASSES[name]
    except KeyError:
        raise ValueError(
            f"unknown model class {name!r}; known classes: {sorted(_CLASSES)} "
            "(a class defined outside geomlearn.models must be registered with "
            "geomlearn.io.register before loading)"
        ) from None


def model_classes() -> dict[str, type]:
    """A copy of the table: class name to model class."""
    return dict(_CLASSES)
