"""A model file: the model's class name, its encoded constructor arguments and its arrays.

`save` records `model.config()` (activations by name, tuples and lists tagged) in the
header; `load` rebuilds a skeleton `cls(**config, key=...)` with
`equinox.filter_eval_shape` (no parameters are initialised) and fills its array leaves
from the file. The class is looked up by name in `geomlearn.models._catalogue`.
"""

from __future__ import annotations

import inspect
import os
import pathlib
from typing import Any

import equinox as eqx
import jax
import numpy as np

from .._activations import activation_name, resolve_activation
from .._version import __version__
from ..models._base import AbstractModel
from ..models._catalogue import model_class
from ._container import PersistenceError, deserialise, read_container, serialise, write_container

__all__ = ["save", "load", "encode_config", "model_from"]


# ----------------------------------------------------------------- config values


def _encode_value(name: str, value: Any) -> Any:
    """`value` as JSON: numbers, strings, booleans and `None` as they are; tuples and lists
    tagged `{"__tuple__": [...]}`/`{"__list__": [...]}`; a named activation as
    `{"__activation__": name}`."""
    if value is None or isinstance(value, (bool, str, int, float)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (tuple, list)):
        tag = "__tuple__" if isinstance(value, tuple) else "__list__"
        return {tag: [_encode_value(name, v) for v in value]}
    if callable(value):
        try:
            return {"__activation__": activation_name(value)}
        except ValueError as e:
            raise PersistenceError(f"cannot save constructor argument {name!r}: {e}") from None
    raise PersistenceError(
        f"cannot save constructor argument {name}={value!r} of type {type(value).__name__}; "
        "only numbers, strings, booleans, None, tuples/lists of these and named "
        "activations can be stored"
    )


def _decode_items(items, container):
    return container(_decode_value(v) for v in items)


# The tagged values of a saved config: tag -> the function that rebuilds the value.
_DECODERS = {
    "__activation__": resolve_activation,
    "__tuple__": lambda items: _decode_items(items, tuple),
    "__list__": lambda items: _decode_items(items, list),
}


def _decode_value(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    decode = _DECODERS.get(next(iter(value))) if len(value) == 1 else None
    if decode is None:
        raise PersistenceError(f"unrecognised value in the saved config: {value!r}")
    return decode(*value.values())


def encode_config(model) -> dict:
    """`{"class", "config", "dtype", "has_dtype_argument"}`: what a model file's header
    records of `model` (its constructor arguments, encoded for JSON)."""
    if not isinstance(model, AbstractModel):
        raise TypeError(
            f"expected a geomlearn model (a subclass of AbstractModel), got {type(model).__name__}"
        )
    config = dict(model.config())
    dtype = config.pop("dtype", None)
    encoded = {name: _encode_value(name, value) for name, value in config.items()}
    return {
        "class": type(model).__name__,
        "config": encoded,
        "dtype": None if dtype is None else np.dtype(dtype).name,
        "has_dtype_argument": "dtype" in inspect.signature(type(model).__init__).parameters,
    }


# ---------------------------------------------------------------------- skeleton


def _decoded_config(header: dict) -> dict:
    try:
        config = {name: _decode_value(v) for name, v in header["config"].items()}
    except (ValueError, TypeError) as e:
        raise PersistenceError(f"cannot decode the saved configuration: {e}") from None
    if header.get("dtype") == "float64" and not jax.config.jax_enable_x64:
        raise PersistenceError(
            f"the saved {header['class']} has float64 parameters, but 64-bit floats are "
            "disabled in JAX; enable them with jax.config.update('jax_enable_x64', True) "
            "before loading"
        )
    if header.get("has_dtype_argument"):
        config["dtype"] = None if header.get("dtype") is None else np.dtype(header["dtype"])
    return config


def _skeleton(header: dict):
    """The model described by `header` with `ShapeDtypeStruct` leaves (no initialisation)."""
    try:
        cls = model_class(header["class"])
    except ValueError as e:
        raise PersistenceError(str(e)) from None
    config = _decoded_config(header)
    try:
        return eqx.filter_eval_shape(lambda: cls(**config, key=jax.random.PRNGKey(0)))
    except Exception as e:  # a config the class no longer accepts
        raise PersistenceError(
            f"cannot rebuild {header['class']} from the saved configuration {config}: "
            f"{type(e).__name__}: {e}"
        ) from None


def model_from(header: dict, sections: dict[str, bytes], name: str):
    """The model of a container read from the file `name`."""
    if "model" not in sections:
        raise PersistenceError(f"{name} holds no model")
    skeleton = _skeleton(header)
    return deserialise(sections["model"], skeleton, f"{name} ({header['class']})")


# ------------------------------------------------------------------------ public


def save(path: str | os.PathLike, model) -> pathlib.Path:
    """Save a model to one self-describing file (atomically).

    **Arguments:**

    - `path`: the file to write (its folder must exist); an existing file is replaced
      only once the new one is completely written.
    - `model`: a geomlearn model (a subclass of `geomlearn.models.AbstractModel`). A
      callable activation must be one of the named activations
      (`geomlearn._activations.ACTIVATIONS`), since the name is what is stored.

    **Returns:** the path written, as a `pathlib.Path`.

    **Raises:** `PersistenceError` when a constructor argument cannot be stored (an
    unnamed activation, an arbitrary object).

    ```python
    model = gl.GSympNet(2, key=jax.random.PRNGKey(0))
    gl.save("model.geomlearn", model)
    ```
    """
    header = {"kind": "model", "format": "geomlearn", **encode_config(model)}
    header["geomlearn_version"] = __version__
    return write_container(path, header, {"model": serialise(model)})


def load(path: str | os.PathLike):
    """Load a model saved by `geomlearn.save` (or the model of a checkpoint).

    **Arguments:**

    - `path`: the file.

    **Returns:** the model, equal leaf for leaf (bit for bit) to the saved one.

    **Raises:** `PersistenceError` (a `ValueError`) for a file that is not a geomlearn
    file, is truncated or corrupted, has another format version, names an unknown class
    or holds arrays that do not fit the class; `FileNotFoundError` if it does not exist.

    ```python
    model = gl.load("model.geomlearn")
    ```
    """
    header, sections = read_container(path)
    return model_from(header, sections, str(path))
