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

import contextlib
import datetime
import glob
import hashlib
import inspect
import io as _io
import json
import math
import os
import pathlib
import secrets
import struct
import tempfile
import time
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._activations import activation_name, resolve_activation

__all__ = ["save", "load", "save_checkpoint", "load_checkpoint", "PersistenceError", "register"]

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


def encode_config(model) -> dict:
    """`{"class", "config", "dtype", "has_dtype_argument"}`: what a model file's header
    records of `model` (its constructor arguments, encoded for JSON)."""
    return _encode_config(model)


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
        want = np.dtype(leaf.dtype)
        if arr.dtype.kind == "V" and arr.dtype.itemsize == want.itemsize and want.kind == "V":
            # extension dtypes (bfloat16, float8 …) are stored by NumPy as raw bytes
            arr = arr.view(want)
        if arr.shape != tuple(leaf.shape) or arr.dtype != want:
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
    return write_atomic(path, body + digest)


def _jsonable(obj):
    """Strict JSON: non-finite floats (a diverged rollout) become `null`."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj


def write_json(path, obj) -> pathlib.Path:
    """Write `obj` as strict JSON (non-finite floats as `null`), atomically (`write_atomic`)."""
    text = json.dumps(_jsonable(obj), indent=2, allow_nan=False) + "\n"
    return write_atomic(path, text.encode())


def read_json(path, *, lists=()) -> dict:
    """The JSON object in `path`, whose fields `lists` are lists of numbers (or null) of
    one length (a history); `ValueError` naming the file for anything else (unreadable,
    not JSON, not an object, a field missing or of another form)."""
    try:
        obj = json.loads(pathlib.Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read {path}: {e}") from None
    if not isinstance(obj, dict):
        raise ValueError(f"cannot read {path}: expected a JSON object, got a {type(obj).__name__}")
    for name in lists:
        value = obj.get(name)
        if not (isinstance(value, list) and len(value) == len(obj[lists[0]]) and all(
                v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in value)):
            raise ValueError(f"cannot read {path}: expected {name!r} to be a list of numbers "
                             f"as long as {lists[0]!r}, got {value!r:.60}")
    return obj


RUN_FILES = ("run.json", "model.geomlearn", "history.json", "metrics.json", "report.png")


def run_folder(out=None, *, prefix: str, root="runs", force: bool = False,
               files=RUN_FILES) -> pathlib.Path:
    """A folder for the files of one run, created before anything is written into it.

    With `out=None`: `root/<prefix>-<time>-<4 hex digits>`, created exclusively — a new
    name is drawn until one does not exist, so parallel runs never share a folder. With a
    path `out`: created if missing; an existing file raises `NotADirectoryError`, a
    non-empty folder `FileExistsError` unless `force`, a folder in the place of one of
    `files` (what the run will write) `IsADirectoryError`. Without `force` the folder is
    claimed by creating `files[0]` exclusively (an empty placeholder the run overwrites),
    so of two runs started with one `out`, one fails instead of both writing into it.
    """
    if out is not None:
        out = pathlib.Path(out)
        if out.exists() and not out.is_dir():
            raise NotADirectoryError(f"--out {out} exists and is not a folder")
        if out.is_dir() and any(out.iterdir()) and not force:
            raise FileExistsError(f"--out {out} is not empty; pass --force to write into it")
        out.mkdir(parents=True, exist_ok=True)
        for name in files:  # a folder in a file's place would fail only after training
            if (out / name).is_dir():
                raise IsADirectoryError(f"--out {out}: {name} is a folder; expected a file or nothing")
        if not force:  # claim the folder: of two runs given one --out, one gets it
            try:
                os.close(os.open(out / files[0], os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
            except FileExistsError:
                raise FileExistsError(f"--out {out} is in use by another run") from None
        return out
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    pathlib.Path(root).mkdir(parents=True, exist_ok=True)
    while True:
        out = pathlib.Path(root) / f"{prefix}-{stamp}-{secrets.token_hex(2)}"
        try:
            out.mkdir()
            return out
        except FileExistsError:
            continue


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path, content: bytes) -> pathlib.Path:
    """Write `content` to `path` atomically: a uniquely named temporary file in the same
    folder, flushed to disk, then renamed over `path` (readers see the old or the new
    file, never a part; concurrent writers never share a temporary file). The file mode
    follows the umask, like any other file."""
    path = pathlib.Path(path)
    folder = path.parent if str(path.parent) else pathlib.Path(".")
    if not folder.is_dir():
        raise FileNotFoundError(f"cannot save to {str(path)!r}: folder {str(folder)!r} does not exist")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(content)
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


# -------------------------------------------------------------------- checkpoints


def check_writable(path) -> pathlib.Path:
    """`path` as a `Path`, after checking that a file can be written there: its folder
    exists and is writable, and `path` is not a folder. Raises `ValueError` naming the
    problem (so a training run fails before its first epoch, not after its last)."""
    path = pathlib.Path(path)
    folder = path.parent if str(path.parent) else pathlib.Path(".")
    if path.is_dir():
        raise ValueError(f"checkpoint {str(path)!r} is a folder; expected a file path")
    if not folder.is_dir():
        raise ValueError(
            f"cannot write the checkpoint {str(path)!r}: folder {str(folder)!r} does not exist"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"cannot write the checkpoint {str(path)!r}: folder {str(folder)!r} is not writable")
    return path


class CheckpointInUseError(RuntimeError):
    """Another training run (this process or another) holds the lock of a checkpoint."""


@contextlib.contextmanager
def checkpoint_lock(path):
    """Hold an exclusive lock on the checkpoint `path` for the duration of the block.

    The lock is `fcntl.flock` on `<path>.lock` (created, and removed on exit); the
    operating system releases it when its holder dies, so a killed run never blocks the
    next one. While it is held, temporary files `.<name>.*.tmp` that a killed writer of
    `path` left behind (older than the lock) are removed. `path=None` locks nothing.

    **Raises:** `CheckpointInUseError` when another `fit` holds the lock: two runs
    writing one checkpoint would silently overwrite each other's progress.
    """
    if path is None:
        yield None
        return
    import fcntl  # POSIX only, like the rest of the checkpoint machinery

    path = pathlib.Path(path)
    lock = path.with_name(path.name + ".lock")
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise CheckpointInUseError(
                f"the checkpoint {str(path)!r} is being written by another training run "
                f"(it holds {str(lock)!r}); wait for it to finish or choose another checkpoint"
            ) from None
        try:  # the file we locked may have been removed by the previous holder: retry
            if os.stat(lock).st_ino == os.fstat(fd).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        since = time.time()  # any temporary file of `path` from before is stale
        for stale in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
            with contextlib.suppress(OSError):
                if stale.stat().st_mtime <= since:
                    stale.unlink()
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)
        os.close(fd)


def checkpoint_header(model) -> dict:
    """The part of a checkpoint header that identifies the model (class, config, dtype)."""
    return _encode_config(model)


def fingerprint(*arrays) -> str:
    """A short SHA-256 fingerprint of arrays (shapes, dtypes and bytes): a resume checks
    that it trains on the same data."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.asarray(a)
        h.update(f"{a.shape}{a.dtype.str}".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def _is_typed_key(key) -> bool:
    return jax.dtypes.issubdtype(jnp.asarray(key).dtype, jax.dtypes.prng_key)


def raw_key(key):
    """The raw `uint32` data of a PRNG key (typed or raw), for a checkpoint."""
    if key is None:
        raise TypeError("key must be a JAX PRNG key (jax.random.key or PRNGKey), got None")
    return jax.random.key_data(key) if _is_typed_key(key) else jnp.asarray(key)


def restore_key(raw, like):
    """A key of the same kind as `like` (typed or raw) from its raw data."""
    if _is_typed_key(like):
        return jax.random.wrap_key_data(raw, impl=jax.random.key_impl(like))
    return raw


def save_checkpoint(path, model, state, *, epoch: int, history: dict, meta: dict) -> pathlib.Path:
    """Write a training checkpoint atomically: the model, an arbitrary pytree `state`
    (optimiser state, key …), the number of completed epochs, the history and `meta`
    (what a resume must agree with: sample count, batch size, task, loss, data
    fingerprint, trainer). `load` reads its model; `load_checkpoint` reads it all."""
    header = {
        "kind": "checkpoint",
        "format": "geomlearn",
        **_encode_config(model),
        **meta,
        "epoch": int(epoch),
        "history": history,
        "geomlearn_version": _package_version(),
    }
    return _write_container(path, header, {"model": _serialise(model), "state": _serialise(state)})


#: The fields of `meta` that a resume must reproduce exactly.
RESUME_FIELDS = ("n_samples", "batch_size", "task", "loss", "data_fingerprint", "trainer")


def load_checkpoint(path, model, state_like, *, expect: dict):
    """Read a checkpoint written by `save_checkpoint` for `model`.

    **Arguments:** `path`; `model` (its class, configuration and dtype must match the
    checkpoint's); `state_like` (a pytree of the saved state's structure); `expect`
    (the `meta` of the run that resumes: every field of `RESUME_FIELDS` it holds must
    equal the checkpoint's).

    **Returns:** `(model, state, header)`; `header["history"]` and `header["epoch"]`.

    **Raises:** `ValueError` naming the field that differs, `PersistenceError` for a
    damaged file.
    """
    path = pathlib.Path(path)
    header, sections = _read_container(path)
    if header.get("kind") != "checkpoint":
        raise ValueError(f"{path} is not a training checkpoint (it holds a {header.get('kind')})")
    encoded = _encode_config(model)
    for field in ("class", "config", "dtype"):
        if header.get(field) != encoded.get(field):
            raise ValueError(
                f"the checkpoint {path} was written for a different model: its "
                f"{field} is {header.get(field)!r}, the model's is {encoded.get(field)!r}"
            )
    for field in RESUME_FIELDS:
        if field in expect and field in header and header[field] != expect[field]:
            raise ValueError(
                f"cannot resume from {path}: it was trained with {field}="
                f"{header[field]!r}, this call has {field}={expect[field]!r}"
            )
    model = _deserialise(sections["model"], model, f"{path} (model)")
    state = _deserialise(sections["state"], state_like, f"{path} (optimiser state)")
    header = dict(header)
    header["history"] = {k: list(v) for k, v in header["history"].items()}
    header["epoch"] = int(header["epoch"])
    return model, state, header
