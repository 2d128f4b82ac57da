"""The container of model files and checkpoints: magic, version, header, sections, checksum.

| bytes            | content                                                        |
|------------------|----------------------------------------------------------------|
| 8                | magic `b"GEOMLRN\0"`                                           |
| 4                | format version (`uint32`)                                      |
| 8                | header length `n` (`uint64`)                                   |
| `n`              | header: UTF-8 JSON (class, config, dtype, section sizes, …)    |
| …                | sections: the arrays as `.npy` records, in pytree-leaf order   |
| 32               | SHA-256 of everything above                                    |

All integers are little-endian. A section is a pytree's array leaves written with
`equinox.tree_serialise_leaves` and read back with `allow_pickle=False`, each record
checked against the shape and dtype of the leaf it fills.
"""

from __future__ import annotations

import hashlib
import io
import json
import pathlib
import struct

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._files import write_atomic

__all__ = [
    "MAGIC",
    "FORMAT_VERSION",
    "PersistenceError",
    "write_container",
    "read_container",
    "serialise",
    "deserialise",
]

MAGIC = b"GEOMLRN\x00"
FORMAT_VERSION = 1
_PREFIX = struct.Struct("<8sIQ")  # magic, version, header length
_DIGEST_SIZE = 32
# `numpy.dtype.isbuiltin` of a dtype that an extension registered (bfloat16, float8, …).
_EXTENSION_DTYPE = 2


class PersistenceError(ValueError):
    """A file could not be saved or loaded as a geomlearn model (the message says why)."""


# ------------------------------------------------------------------------ file


def write_container(path, header: dict, sections: dict[str, bytes]) -> pathlib.Path:
    """Write header + sections atomically (temporary file in the same folder, rename)."""
    header = dict(header)
    header["sections"] = [[name, len(blob)] for name, blob in sections.items()]
    header_bytes = json.dumps(header, sort_keys=True, allow_nan=True).encode("utf-8")
    body = b"".join(
        [_PREFIX.pack(MAGIC, FORMAT_VERSION, len(header_bytes)), header_bytes, *sections.values()]
    )
    digest = hashlib.sha256(body).digest()
    return write_atomic(pathlib.Path(path), body + digest)


def _checked_body(raw: bytes, name: str) -> tuple[bytes, int]:
    """The bytes before the checksum and the header length, once magic, version and
    checksum are right."""
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
    return body, header_len


def read_container(path) -> tuple[dict, dict[str, bytes]]:
    """`(header, sections)` of the file `path`; `PersistenceError` for a file that is not
    a geomlearn file, has another format version, or is truncated or corrupted."""
    path = pathlib.Path(path)
    name = str(path)
    body, header_len = _checked_body(path.read_bytes(), name)
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


# ---------------------------------------------------------------------- arrays


def serialise(tree) -> bytes:
    """The array leaves of `tree` as `.npy` records (a section)."""
    buf = io.BytesIO()
    eqx.tree_serialise_leaves(buf, tree)
    return buf.getvalue()


def _read_leaf(f, leaf, what: str):
    """The next record of `f`, checked to fit the array leaf `leaf` (other leaves pass through)."""
    if not isinstance(leaf, (jax.Array, jax.ShapeDtypeStruct, np.ndarray)):
        return leaf
    try:
        arr = np.load(f, allow_pickle=False)
    except Exception as e:
        raise PersistenceError(f"{what}: cannot read an array record ({e})") from None
    want = np.dtype(leaf.dtype)
    if (np.issubdtype(arr.dtype, np.void) and want.isbuiltin == _EXTENSION_DTYPE
            and arr.dtype.itemsize == want.itemsize):
        # NumPy stores a dtype it does not know (bfloat16, float8 …) as raw bytes
        arr = arr.view(want)
    if arr.shape != tuple(leaf.shape) or arr.dtype != want:
        raise PersistenceError(
            f"{what}: stored array of shape {arr.shape} and dtype {arr.dtype} does not "
            f"fit the rebuilt model, which expects shape {tuple(leaf.shape)} and dtype "
            f"{np.dtype(leaf.dtype)}"
        )
    return jnp.asarray(arr)


def deserialise(data: bytes, like, what: str):
    """Read `.npy` records into the array leaves of `like`, checking shape and dtype;
    `what` names the section in errors."""
    buf = io.BytesIO(data)
    try:
        out = eqx.tree_deserialise_leaves(buf, like, filter_spec=lambda f, leaf: _read_leaf(f, leaf, what))
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
