"""Files written so that a reader never sees a part of one: atomic writes, strict JSON.

Shared by the model files and checkpoints (`geomlearn.io`), the command line's run
folders (`geomlearn.cli`) and the benchmarks' result files.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import tempfile

__all__ = ["write_atomic", "write_json", "read_json", "check_writable"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _folder(path: pathlib.Path) -> pathlib.Path:
    return path.parent if str(path.parent) else pathlib.Path(".")


def write_atomic(path, content: bytes) -> pathlib.Path:
    """Write `content` to `path` atomically: a uniquely named temporary file in the same
    folder, flushed to disk, then renamed over `path` (readers see the old or the new
    file, never a part; concurrent writers never share a temporary file). The file mode
    follows the umask, like any other file."""
    path = pathlib.Path(path)
    folder = _folder(path)
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


def _is_history(value, obj: dict, first: str) -> bool:
    """Whether `value` is a list of numbers (or null) as long as `obj[first]`."""
    return isinstance(value, list) and len(value) == len(obj[first]) and all(
        v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in value)


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
        if not _is_history(value, obj, lists[0]):
            raise ValueError(f"cannot read {path}: expected {name!r} to be a list of numbers "
                             f"as long as {lists[0]!r}, got {value!r:.60}")
    return obj


def check_writable(path, *, what: str = "checkpoint") -> pathlib.Path:
    """`path` as a `Path`, after checking that a file can be written there: its folder
    exists and is writable, and `path` is not a folder. Raises `ValueError` naming the
    problem (so a training run fails before its first epoch, not after its last); `what`
    names the file in the message."""
    path = pathlib.Path(path)
    folder = _folder(path)
    if path.is_dir():
        raise ValueError(f"{what} {str(path)!r} is a folder; expected a file path")
    if not folder.is_dir():
        raise ValueError(
            f"cannot write the {what} {str(path)!r}: folder {str(folder)!r} does not exist"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"cannot write the {what} {str(path)!r}: folder {str(folder)!r} is not writable")
    return path
