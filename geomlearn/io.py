r"""Saving and loading models: one self-describing file, no pickle.

`save(path, model)` writes **one file** that holds everything needed to rebuild the
model: its class name, its constructor arguments (`model.config()`, with the activation
stored by name), the format version, and its arrays. `load(path)` needs nothing else:

```python
import geomlearn as gl

gl.save("pendulum.geomlearn", model)
model = gl.load("pendulum.geomlearn")
```

**File layout** (format version 1), all integers little-endian:

| bytes            | content                                                        |
|------------------|----------------------------------------------------------------|
| 8                | magic `b"GEOMLRN\0"`                                           |
| 4                | format version (`uint32`)                                      |
| 8                | header length `n` (`uint64`)                                   |
| `n`              | header: UTF-8 JSON (class, config, dtype, section sizes, …)    |
| …                | sections: the arrays as `.npy` records, in pytree-leaf order   |
| 32               | SHA-256 of everything above                                    |

The arrays are written with `equinox.tree_serialise_leaves` (NumPy `.npy` records) and
read back with `allow_pickle=False`; every record is checked against the shape and dtype
of a skeleton rebuilt as `cls(**config, key=...)` (with `equinox.filter_eval_shape`, so
no parameters are initialised). The trailing checksum makes a truncated or corrupted
file fail loudly. Any problem — bad magic, wrong version, checksum mismatch, unknown
class, arrays that do not fit the skeleton, bytes left over — raises
`geomlearn.io.PersistenceError` (a `ValueError`) before anything is
returned, so there is never a half-loaded model. Files are written atomically: to a
temporary file in the same folder, flushed to disk, then renamed over the target.

Training checkpoints (`geomlearn.fit(..., checkpoint=path)`) use the same container with
a second section holding the optimiser state; `load` on a checkpoint returns its model.

Classes are found by name among `geomlearn.models`; a model class defined elsewhere can
be made loadable with `geomlearn.io.register`.
"""

from __future__ import annotations

import hashlib
import inspect
import io as _io
import json
import os
import pathlib
import struct
import tempfile
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._activations import activation_name, resolve_activation

__all__ = ["save", "load"]

MAGIC = b"GEOMLRN\x00"
FORMAT_VERSION = 1
_PREFIX = struct.Struct("<8sIQ")  # magic, version, header length
_DIGEST_SIZE = 32

_REGISTRY: dict[str, type] = {}


class PersistenceError(ValueError):
    """A file could not be saved or loaded as a geomlearn model (the message says why)."""


def register(cls: type) -> type:
    """Make a model class defined outside `geomlearn.models` loadable by `load`.

    The class must be a concrete subclass of `geomlearn.models.AbstractModel` that stores
    its constructor arguments in fields of the same name (see `AbstractModel.config`).
    Usable as a decorator; returns `cls`.
    """
    from .models._base import AbstractModel

    if not (isinstance(cls, type) and issubclass(cls, AbstractModel)):
        raise TypeError(f"register expects a subclass of AbstractModel, got {cls!r}")
    _REGISTRY[cls.__name__] = cls
    return cls


def _known_classes() -> dict[str, type]:
    from . import models
    from .models._base import AbstractModel

    out = {}
    for name in getattr(models, "__all__", []):
        obj = getattr(models, name, None)
        if (
            isinstance(obj, type)
            and issubclass(obj, AbstractModel)
            and not inspect.isabstract(obj)
            and not name.startswith("Abstract")
        ):
            out[name] = obj
    out.update(_REGISTRY)
    return out


def _model_class(name: str) -> type:
    classes = _known_classes()
    try:
        return classes[name]
    except KeyError:
        raise PersistenceError(
            f"unknown model class {name!r}; known classes: {sorted(classes)} "
            "(a class defined outside geomlearn.models must be registered with "
            "geomlearn.io.register before loading)"
        ) from None


# ----------------------------------------------------------------------------- config


def _encode_value(name: str, value: Any) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (tuple, list)):
        return {"__tuple__" if isinstance(value, tuple) else "__list__": [
            _encode_value(name, v) for v in value
        ]}
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


def _decode_value(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__activation__"}:
            return resolve_activation(value["__activation__"])
        if set(value) == {"__tuple__"}:
            return tuple(_decode_value(v) for v in value["__tuple__"])
        if set(value) == {"__list__"}:
            return [_decode_value(v) for v in value["__list__"]]
        raise PersistenceError(f"unrecognised value in the saved config: {value!r}")
    return value


def _encode_config(model) -> dict:
    from .models._base import AbstractModel

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


def _skeleton(header: dict):
    """The model described by `header` with `ShapeDtypeStruct` leaves (no initialisation)."""
    cls = _model_class(header["class"])
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
    try:
        return eqx.filter_eval_shape(lambda: cls(**config, key=jax.random.PRNGKey(0)))
    except Exception as e:  # a config the class no longer accepts
        raise PersistenceError(
            f"cannot rebuild {header['class']} from the saved configuration {config}: "
            f"{type(e).__name__}: {e}"
        ) from None


# ------------------------------------------------------------------------ arrays


def _serialise(tree) -> bytes:
    buf = _io.BytesIO()
    eqx.tree_serialise_leaves(buf, tree)
    return buf.getvalue()


def _deserialise(data: bytes, like, what: str):
    """Read `.npy` records into the array leaves of `like`, checking shape and dtype."""
    buf = _io.BytesIO(data)
    def read(f, leaf):
        if not isinstance(leaf, (jax.Array, jax.ShapeDtypeStruct, np.ndarray)):
            return leaf
        try:
            arr = np.load(f, allow_pickle=False)
        except Exception as e:
            raise PersistenceError(f"{what}: cannot read an array record ({e})") from None
        if arr.shape != tuple(leaf.shape) or arr.dtype != np.dtype(leaf.dtype):
            raise PersistenceError(
                f"{what}: stored array of shape {arr.shape} and dtype {arr.dtype} does not "
                f"fit the rebuilt model, which expects shape {tuple(leaf.shape)} and dtype "
                f"{np.dtype(leaf.dtype)}"
            )
        return jnp.asarray(arr)

    try:
        out = eqx.tree_deserialise_leaves(buf, like, filter_spec=read)
    except Exception as e:  # equinox wraps errors raised while reading a leaf
        cause = e
        while cause is not None and not isinstance(cause, PersistenceError):
            cause = cause.__cause__ or cause.__context__
        if cause is not None:
            raise PersistenceError(str(cause)) from None
        raise PersistenceError(f"{what}: cannot read the arrays ({type(e).__name__}: {e})") from None
    if buf.tell() != len(data):
        raise PersistenceError(
            f"{what}: {len(data) - buf.tell()} bytes left over after reading every array"
        )
    return out


# --------------------------------------------------------------------- container


def _write_container(path, header: dict, sections: dict[str, bytes]) -> pathlib.Path:
    """Write header + sections atomically (temporary file in the same folder, rename)."""
    path = pathlib.Path(path)
    header = dict(header)
    header["sections"] = [[name, len(blob)] for name, blob in sections.items()]
    header_bytes = json.dumps(header, sort_keys=True, allow_nan=True).encode("utf-8")
    body = b"".join(
        [_PREFIX.pack(MAGIC, FORMAT_VERSION, len(header_bytes)), header_bytes, *sections.values()]
    )
    digest = hashlib.sha256(body).digest()
    folder = path.parent if str(path.parent) else pathlib.Path(".")
    if not folder.is_dir():
        raise FileNotFoundError(f"cannot save to {str(path)!r}: folder {str(folder)!r} does not exist")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(body)
            f.write(digest)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def _read_container(path) -> tuple[dict, dict[str, bytes]]:
    path = pathlib.Path(path)
    raw = path.read_bytes()
    name = str(path)
    if len(raw) < _PREFIX.size + _DIGEST_SIZE:
        raise PersistenceError(f"{name} is not a geomlearn file (too short: {len(raw)} bytes)")
    magic, version, header_len = _PREFIX.unpack_from(raw, 0)
    if magic != MAGIC:
        raise PersistenceError(f"{name} is not a geomlearn file (bad magic bytes {magic!r})")
    if version != FORMAT_VERSION:
        raise PersistenceError(
            f"{name} has format version {version}; this geomlearn reads version {FORMAT_VERSION}"
        )
    body, digest = raw[:-_DIGEST_SIZE], raw[-_DIGEST_SIZE:]
    if hashlib.sha256(body).digest() != digest:
        raise PersistenceError(
            f"{name} is truncated or corrupted (its checksum does not match its contents)"
        )
    start = _PREFIX.size
    try:
        header = json.loads(body[start : start + header_len].decode("utf-8"))
        offset = start + header_len
        sections = {}
        for sec_name, size in header["sections"]:
            sections[sec_name] = body[offset : offset + size]
            offset += size
    except (ValueError, KeyError, TypeError) as e:
        raise PersistenceError(f"{name} has an unreadable header ({e})") from None
    if offset != len(body):
        raise PersistenceError(f"{name} is corrupted (section sizes do not add up)")
    return header, sections


def _model_from(header: dict, sections: dict[str, bytes], name: str):
    if "model" not in sections:
        raise PersistenceError(f"{name} holds no model")
    skeleton = _skeleton(header)
    return _deserialise(sections["model"], skeleton, f"{name} ({header['class']})")


# ----------------------------------------------------------------------- public


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
    header = {"kind": "model", "format": "geomlearn", **_encode_config(model)}
    header["geomlearn_version"] = _package_version()
    return _write_container(path, header, {"model": _serialise(model)})


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
    header, sections = _read_container(path)
    return _model_from(header, sections, str(path))


def _package_version() -> str:
    from . import __version__

    return __version__
