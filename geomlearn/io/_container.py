r"""The container of model files and checkpoints: magic, version, header, sections, checksum.

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
from .._version import __version__

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
    """Write header + sections atomically (temporary file in the same folder, rename).

    **Raises:** `OSError` of the same kind (same `errno`) when the file cannot be
    written — a full disk (`ENOSPC`), a file-size limit (`EFBIG`), a read-only place
    (`EROFS`, `EACCES`) — naming the file and saying that the previous one is intact."""
    header = dict(header)
    header["sections"] = [[name, len(blob)] for name, blob in sections.items()]
    header_bytes = json.dumps(header, sort_keys=True, allow_nan=True).encode("utf-8")
    body = b"".join(
        [_PREFIX.pack(MAGIC, FORMAT_VERSION, len(header_bytes)), header_bytes, *sections.values()]
    )
    digest = hashlib.sha256(body).digest()
    try:
        return write_atomic(pathlib.Path(path), body + digest)
    except OSError as e:
        if e.errno is None:
            raise
        # a full disk, a read-only place, a file-size limit: say so, and what is kept
        raise type(e)(e.errno, f"cannot write {str(path)!r}: {e.strerror}; the file that was "
                      "there (if any) is unchanged and no partial file is left") from None


def _checked_body(raw: bytes, name: str) -> tuple[bytes, int]:
    """The bytes before the checksum and the header length, once magic, version and
    checksum are right."""
    if len(raw) < _PREFIX.size + _DIGEST_SIZE:
        raise PersistenceError(f"{name} is not a geomlearn file (too short: {len(raw)} bytes)")
    magic, version, header_len = _PREFIX.unpack_from(raw, 0)
    if magic != MAGIC:
        raise PersistenceError(f"{name} is not a geomlearn file (bad magic bytes {magic!r})")
    if version > FORMAT_VERSION:
        raise PersistenceError(
            f"{name} has format version {version}, written by a newer geomlearn; this "
            f"geomlearn ({__version__}) reads format versions up to {FORMAT_VERSION}: "
            "upgrade geomlearn to load it"
        )
    if version < 1:
        raise PersistenceError(
            f"{name} has format version {version}, which no released geomlearn wrote; "
            "it is not a geomlearn file or it is corrupted"
        )
    body, digest = raw[:-_DIGEST_SIZE], raw[-_DIGEST_SIZE:]
    if hashlib.sha256(body).digest() != digest:
        raise PersistenceError(
            f"{name} is truncated or corrupted (its checksum does not match its contents)"
        )
    if header_len > len(body) - _PREFIX.size:
        raise PersistenceError(
            f"{name} is corrupted (its header length {header_len} exceeds the "
            f"{len(body) - _PREFIX.size} bytes that follow)"
        )
    return body, header_len


def _section_table(header, name: str) -> list[tuple[str, int]]:
    """The header's `sections` as `(name, size)` pairs: distinct names, sizes >= 0."""
    table = header.get("sections") if isinstance(header, dict) else None
    if not isinstance(table, list):
        raise PersistenceError(f"{name} has an unreadable header (no section table)")
    out = []
    for entry in table:
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                and type(entry[1]) is int and entry[1] >= 0):
            raise PersistenceError(f"{name} has an unreadable header (section entry {entry!r:.80})")
        out.append((entry[0], entry[1]))
    if len({n for n, _ in out}) != len(out):
        raise PersistenceError(f"{name} has an unreadable header (a section appears twice)")
    return out


def _parse_header(data: bytes, name: str) -> dict:
    """The JSON object of the header; `PersistenceError` for anything else (also for a
    header nested deeper than Python's recursion limit)."""
    try:
        header = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as e:
        raise PersistenceError(f"{name} has an unreadable header ({type(e).__name__}: {e!s:.200})") from None
    if not isinstance(header, dict):
        raise PersistenceError(
            f"{name} has an unreadable header (a JSON {type(header).__name__}, not an object)")
    return header


def read_container(path) -> tuple[dict, dict[str, bytes]]:
    """`(header, sections)` of the file `path`; `PersistenceError` for a file that is not
    a geomlearn file, has another format version, or is truncated or corrupted.

    The file is read once, and its size bounds everything after: the header length and
    the section sizes must add up to exactly the bytes present."""
    path = pathlib.Path(path)
    name = str(path)
    if not path.is_file():
        if not path.exists():
            raise FileNotFoundError(f"no such file: {name!r}")
        raise PersistenceError(f"{name} is not a regular file")
    body, header_len = _checked_body(path.read_bytes(), name)
    start = _PREFIX.size
    header = _parse_header(body[start : start + header_len], name)
    offset = start + header_len
    sections = {}
    for sec_name, size in _section_table(header, name):
        if offset + size > len(body):
            break
        sections[sec_name] = body[offset : offset + size]
        offset += size
    if offset != len(body) or len(sections) != len(header["sections"]):
        raise PersistenceError(f"{name} is corrupted (section sizes do not add up)")
    return header, sections


# ---------------------------------------------------------------------- arrays


def serialise(tree) -> bytes:
    """The array leaves of `tree` as `.npy` records (a section)."""
    buf = io.BytesIO()
    eqx.tree_serialise_leaves(buf, tree)
    return buf.getvalue()


def _record_header(f, what: str):
    """`(shape, fortran_order, dtype)` of the next `.npy` record, read without its data."""
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            return np.lib.format.read_array_header_1_0(f)
        if version in ((2, 0), (3, 0)):
            return np.lib.format.read_array_header_2_0(f)
    except Exception as e:  # NumPy raises ValueError, and others for a crafted header
        raise PersistenceError(f"{what}: cannot read an array record ({type(e).__name__}: {e!s:.200})") from None
    raise PersistenceError(f"{what}: cannot read an array record (.npy version {version})")


def _read_leaf(f, leaf, what: str):
    """The next record of `f`, checked to fit the array leaf `leaf` (other leaves pass
    through). Its declared shape and dtype are compared with the leaf's, and its size
    with the bytes left, before anything is allocated; the data are never unpickled."""
    if not isinstance(leaf, (jax.Array, jax.ShapeDtypeStruct, np.ndarray)):
        return leaf
    shape, fortran, dtype = _record_header(f, what)
    want = np.dtype(leaf.dtype)
    if (np.issubdtype(dtype, np.void) and not dtype.fields and want.isbuiltin == _EXTENSION_DTYPE
            and dtype.itemsize == want.itemsize):
        # NumPy stores a dtype it does not know (bfloat16, float8 …) as raw bytes
        dtype = want
    if tuple(shape) != tuple(leaf.shape) or dtype != want:
        raise PersistenceError(
            f"{what}: stored array of shape {tuple(shape)} and dtype {dtype} does not "
            f"fit the rebuilt model, which expects shape {tuple(leaf.shape)} and dtype {want}"
        )
    nbytes = int(np.prod(shape, dtype=np.int64)) * want.itemsize
    data = f.read(nbytes)
    if len(data) != nbytes:
        raise PersistenceError(
            f"{what}: an array record of {nbytes} bytes has only {len(data)} bytes left")
    arr = np.frombuffer(data, dtype=want).reshape(shape, order="F" if fortran else "C")
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
