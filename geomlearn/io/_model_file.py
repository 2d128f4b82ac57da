"""A model file: the model's class name, its encoded constructor arguments and its arrays.

`save` records `model.config()` (activations by name, tuples and lists tagged, a system
of `geomlearn.systems` by its class name and constructor arguments) in the header;
`load` rebuilds a skeleton `cls(**config, key=...)` with `equinox.filter_eval_shape` (no
parameters are initialised) and fills its array leaves from the file. The class is
looked up by name in the registry of `geomlearn.models._base`.
"""

from __future__ import annotations

import inspect
import os
import pathlib
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._activations import activation_name, resolve_activation
from .._version import __version__
from .. import systems
from ..models._base import AbstractModel, model_class
from ..systems import AbstractHamiltonianFromFunction, AbstractSystem
from ._migrations import file_layout, migrate, migration_skeleton
from ._container import PersistenceError, deserialise, read_container, serialise, write_container

__all__ = ["save", "load", "encode_config", "completed_config", "model_from"]


# ----------------------------------------------------------------- config values


def _encode_value(name: str, value: Any) -> Any:
    """`value` as JSON: numbers, strings, booleans and `None` as they are; tuples and lists
    tagged `{"__tuple__": [...]}`/`{"__list__": [...]}`; a named activation as
    `{"__activation__": name}`; a model (the one a wrapper such as `MultiStep` holds) as
    `{"__model__": {"class", "config", "dtype", "has_dtype_argument", "layout"}}`, its
    arrays being leaves of the wrapper's; a system of `geomlearn.systems` (the one a
    corrected integrator steps) as `{"__system__": {"class", "config"}}`."""
    if value is None or isinstance(value, (bool, str, int, float)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, AbstractModel):
        return {"__model__": encode_config(value)}
    if isinstance(value, AbstractSystem):
        return {"__system__": _encode_system(name, value)}
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


def _system_class(name):
    """The concrete system class of `geomlearn.systems` named `name`, or `None` (also for
    a system of a user's function, which a file cannot hold)."""
    cls = getattr(systems, name, None) if isinstance(name, str) and name in systems.__all__ else None
    ok = (isinstance(cls, type) and issubclass(cls, AbstractSystem) and not inspect.isabstract(cls)
          and not issubclass(cls, AbstractHamiltonianFromFunction))
    return cls if ok else None


def _encode_system(name: str, system) -> dict:
    """`{"class", "config"}` of a system of `geomlearn.systems`: its class name and its
    constructor arguments, read from its fields of the same names; `PersistenceError` for
    a system of a user's function (`from_hamiltonian`)."""
    cls = type(system)
    if isinstance(system, AbstractHamiltonianFromFunction):
        raise PersistenceError(
            f"cannot save constructor argument {name!r}: its system {system.name!r} was made "
            "from a Python function (geomlearn.systems.from_hamiltonian), and a model file "
            "stores only the systems of geomlearn.systems, by class name and arguments")
    if _system_class(cls.__name__) is not cls:
        raise PersistenceError(
            f"cannot save constructor argument {name!r}: expected a system of "
            f"geomlearn.systems (stored by class name), got {cls.__module__}.{cls.__name__}")
    config = {}
    for arg, p in inspect.signature(cls.__init__).parameters.items():
        if arg == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        try:
            value = getattr(system, arg)
        except AttributeError:
            raise PersistenceError(f"cannot save constructor argument {name!r}: the system "
                                   f"{cls.__name__} does not store its argument {arg!r}") from None
        config[arg] = _encode_value(f"{name}.{arg}", value)
    return {"class": cls.__name__, "config": config}


def _decode_system(record):
    """The system a saved `{"class", "config"}` describes (a class of `geomlearn.systems`
    only, built from its decoded constructor arguments)."""
    if not (isinstance(record, dict) and isinstance(record.get("config"), dict)):
        raise PersistenceError(f"expected a system description in the saved config, got {record!r:.80}")
    cls = _system_class(record.get("class"))
    if cls is None:
        raise PersistenceError(f"unknown system class {record.get('class')!r:.80} in the saved config; "
                               "expected a class of geomlearn.systems")
    config = {arg: _decode_value(v) for arg, v in record["config"].items()}
    try:
        return cls(**config)
    except (TypeError, ValueError) as e:
        raise PersistenceError(f"cannot rebuild the system {cls.__name__} from the saved "
                               f"configuration {config!r:.200}: {e!s:.200}") from None


def _decode_items(items, container):
    if not isinstance(items, list):
        raise PersistenceError(f"expected a list of values in the saved config, got {items!r:.80}")
    return container(_decode_value(v) for v in items)


def _decode_activation(name):
    if not isinstance(name, str):  # a callable is never read from a file: names only
        raise PersistenceError(f"expected an activation name in the saved config, got {name!r:.80}")
    return resolve_activation(name)


def _decode_model(header):
    """The skeleton of a model nested in a configuration (decoded like a file's header)."""
    if not isinstance(header, dict):
        raise PersistenceError(f"expected a model description in the saved config, got {header!r:.80}")
    return _skeleton(header)


# The tagged values of a saved config: tag -> the function that rebuilds the value.
_DECODERS = {
    "__activation__": _decode_activation,
    "__tuple__": lambda items: _decode_items(items, tuple),
    "__list__": lambda items: _decode_items(items, list),
    "__model__": _decode_model,
    "__system__": _decode_system,
}


def _decode_value(value: Any) -> Any:
    if isinstance(value, list):
        raise PersistenceError(f"untagged list in the saved config: {value!r:.80}")
    if not isinstance(value, dict):
        return value
    decode = _DECODERS.get(next(iter(value))) if len(value) == 1 else None
    if decode is None:
        raise PersistenceError(f"unrecognised value in the saved config: {value!r:.80}")
    return decode(*value.values())


def encode_config(model) -> dict:
    """`{"class", "config", "dtype", "has_dtype_argument", "layout"}`: what a model file's
    header records of `model` (its constructor arguments, encoded for JSON, and the
    layout of its arrays, `file_layout`)."""
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
        "layout": file_layout(type(model).__name__),
    }


def _completed_value(value):
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get("__model__"), dict):
        nested = value["__model__"]
        return {"__model__": {**nested, "config": completed_config(nested)}}
    return value


def completed_config(header: dict):
    """The encoded configuration a file's `header` records, with the encoded default of
    every constructor argument it does not record (a file written before the argument
    existed, which loads with that default), nested models too: what a model rebuilt
    from the file reports. A header of an unknown class is returned as recorded."""
    config = header.get("config")
    try:
        cls = model_class(header.get("class"))
    except (ValueError, TypeError):
        return config
    if not isinstance(config, dict):
        return config
    out = {name: _completed_value(v) for name, v in config.items()}
    for name, p in inspect.signature(cls.__init__).parameters.items():
        if (name in out or name in ("self", "key", "dtype") or p.default is p.empty
                or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)):
            continue
        try:
            out[name] = _encode_value(name, p.default)
        except PersistenceError:  # a default that is not stored by value
            continue
    return out


# ---------------------------------------------------------------------- skeleton


def _check_sizes(value, limit: int, where: str = "config") -> None:
    """Every integer of a saved configuration (nested ones too) is at most `limit`, the
    size of the file in bytes: a file of `B` bytes cannot hold a model with a dimension,
    width, layer count or length above `B`, and a larger number would only make the
    skeleton slow or large to build."""
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int):
        if abs(value) > limit:
            raise PersistenceError(
                f"the saved {where} holds the integer {value}, larger than the file "
                f"({limit} bytes) could describe")
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_sizes(v, limit, f"{where}.{k}")
    elif isinstance(value, list):
        for v in value:
            _check_sizes(v, limit, where)


def _float_dtype(name):
    if name is None:
        return None
    try:
        dtype = jnp.dtype(name)
    except TypeError:
        dtype = None
    if not isinstance(name, str) or dtype is None or not jnp.issubdtype(dtype, jnp.inexact):
        raise PersistenceError(f"the saved dtype {name!r:.40} is not a floating-point dtype")
    return dtype


def _decoded_config(header: dict) -> dict:
    if not isinstance(header.get("config"), dict):
        raise PersistenceError(f"the saved configuration is not an object: {header.get('config')!r:.80}")
    try:
        config = {name: _decode_value(v) for name, v in header["config"].items()}
    except PersistenceError:
        raise
    except (ValueError, TypeError) as e:
        raise PersistenceError(f"cannot decode the saved configuration: {e}") from None
    dtype = _float_dtype(header.get("dtype"))
    if dtype == np.float64 and not jax.config.jax_enable_x64:
        raise PersistenceError(
            f"the saved {header['class']} has float64 parameters, but 64-bit floats are "
            "disabled in JAX; enable them with jax.config.update('jax_enable_x64', True) "
            "before loading"
        )
    if header.get("has_dtype_argument") is True:
        config["dtype"] = dtype
    return config


def _skeleton(header: dict):
    """The model described by `header` with `ShapeDtypeStruct` leaves (no initialisation),
    in the layout of the file (`migration_skeleton`)."""
    name = header.get("class")
    if not isinstance(name, str):
        raise PersistenceError(f"the saved class name is not a string: {name!r:.80}")
    try:
        cls = model_class(name)
    except ValueError as e:
        raise PersistenceError(str(e)) from None
    config = _decoded_config(header)
    if "key" in inspect.signature(cls.__init__).parameters:
        config["key"] = jax.random.PRNGKey(0)
    try:
        skeleton = eqx.filter_eval_shape(lambda: cls(**config))
    except Exception as e:  # a config the class no longer accepts
        config.pop("key", None)
        raise PersistenceError(
            f"cannot rebuild {name} from the saved configuration {config!r:.300}: "
            f"{type(e).__name__}: {e!s:.300}"
        ) from None
    return migration_skeleton(skeleton, header)


def model_from(header: dict, sections: dict[str, bytes], name: str, *, size: int | None = None):
    """The model of a container read from the file `name` (of `size` bytes, the bound on
    the integers of its configuration)."""
    if "model" not in sections:
        raise PersistenceError(f"{name} holds no model")
    size = sum(len(s) for s in sections.values()) if size is None else size
    try:
        _check_sizes(header.get("config"), size)
        skeleton = _skeleton(header)
    except RecursionError:
        raise PersistenceError(f"{name}: the saved configuration is nested too deeply") from None
    model = deserialise(sections["model"], skeleton, f"{name} ({header['class']})")
    return migrate(model)


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
    return model_from(header, sections, str(path), size=os.path.getsize(path))
