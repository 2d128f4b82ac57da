"""Training checkpoints: the model, the optimiser state, the epoch and the history.

A checkpoint is a container (`geomlearn.io._container`) with two sections, `model` and
`state`, whose header also records what a resume must agree with (`RESUME_FIELDS`).
`geomlearn.load` reads its model; `load_checkpoint` reads it all.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np

from .._version import __version__
from ._container import PersistenceError, deserialise, read_container, serialise, write_container
from ._migrations import migrate, migration_skeleton
from ._model_file import completed_config, encode_config

__all__ = [
    "save_checkpoint",
    "load_checkpoint",
    "RESUME_FIELDS",
    "CheckpointInUseError",
    "checkpoint_lock",
    "checkpoint_header",
    "fingerprint",
    "raw_key",
    "restore_key",
]

#: The fields of `meta` that a resume must reproduce exactly.
RESUME_FIELDS = ("n_samples", "batch_size", "task", "loss", "data_fingerprint", "trainer")


class CheckpointInUseError(RuntimeError):
    """Another training run (this process or another) holds the lock of a checkpoint."""


# --------------------------------------------------------------------------- lock


def _acquire(path: pathlib.Path, lock: pathlib.Path) -> int:
    """An open descriptor of `lock`, exclusively locked (the file that is there now)."""
    import fcntl  # POSIX only, like the rest of the checkpoint machinery; not needed to import

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
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


def _remove_stale_temporaries(path: pathlib.Path) -> None:
    since = time.time()  # any temporary file of `path` from before the lock is stale
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        with contextlib.suppress(OSError):
            if stale.stat().st_mtime <= since:
                stale.unlink()


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
    path = pathlib.Path(path)
    lock = path.with_name(path.name + ".lock")
    fd = _acquire(path, lock)
    try:
        _remove_stale_temporaries(path)
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)
        os.close(fd)


# --------------------------------------------------------------- what is checked


def checkpoint_header(model) -> dict:
    """The part of a checkpoint header that identifies the model (class, config, dtype)."""
    return encode_config(model)


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


# ------------------------------------------------------------------ save and load


def save_checkpoint(path, model, state, *, epoch: int, history: dict, meta: dict) -> pathlib.Path:
    """Write a training checkpoint atomically: the model, an arbitrary pytree `state`
    (optimiser state, key …), the number of completed epochs, the history and `meta`
    (what a resume must agree with: sample count, batch size, task, loss, data
    fingerprint, trainer). `load` reads its model; `load_checkpoint` reads it all."""
    header = {
        "kind": "checkpoint",
        "format": "geomlearn",
        **encode_config(model),
        **meta,
        "epoch": int(epoch),
        "history": history,
        "geomlearn_version": __version__,
    }
    return write_container(path, header, {"model": serialise(model), "state": serialise(state)})


def _is_checkpoint(header: dict, sections: dict) -> bool:
    """A checkpoint holds the optimiser state beside the model, and its epoch and history."""
    return "state" in sections and "model" in sections and "epoch" in header and "history" in header


def _check_agreement(path, header: dict, model, expect: dict) -> None:
    encoded = encode_config(model)
    # an argument the checkpoint does not record (it predates it) has its default
    header = {**header, "config": completed_config(header)}
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


def _history(header: dict, path) -> dict:
    history = header.get("history")
    if not isinstance(history, dict):
        raise PersistenceError(f"{path} has no readable training history")
    return {k: list(v) if isinstance(v, list) else v for k, v in history.items()}


def load_checkpoint(path, model, state_like=None, *, expect: dict | None = None):
    """Read a checkpoint written by `save_checkpoint` (by `geomlearn.fit(...,
    checkpoint=path)`) for `model`.

    **Arguments:**

    - `path`: the checkpoint file.
    - `model`: a model of the checkpoint's class, configuration and dtype (its
      parameter values do not matter; they are replaced by the saved ones).
    - `state_like`: a pytree of the structure of the saved training state, to read it
      back: for a checkpoint of `fit`, `(trainer_state, key)` with `trainer_state`
      the optimiser's (or solver's) `init` of the model's parameters and `key` the PRNG
      key passed to `fit`. `None` (the default) skips the state: the model, the epoch
      and the history are read, which is all that is needed to use or inspect the
      trained model (`geomlearn.load(path)` reads the model alone).
    - `expect`: the `meta` of a run that resumes; every field of `RESUME_FIELDS` it
      holds must equal the checkpoint's. `None`: nothing is compared beyond the model.

    **Returns:** `(model, state, header)` (`state` is `None` without `state_like`);
    `header["history"]` and `header["epoch"]`.

    **Raises:** `ValueError` naming the field that differs, `PersistenceError` for a
    damaged file.

    ```python
    model, _, header = gl.load_checkpoint("run.ckpt", gl.GSympNet(2, key=jax.random.PRNGKey(0)))
    header["epoch"], header["history"]["loss"][-1]
    ```
    """
    path = pathlib.Path(path)
    header, sections = read_container(path)
    if not _is_checkpoint(header, sections):
        raise ValueError(f"{path} is not a training checkpoint (it holds a {header.get('kind')})")
    _check_agreement(path, header, model, expect or {})
    like = migration_skeleton(model, header)
    model = migrate(deserialise(sections["model"], like, f"{path} (model)"))
    state = (None if state_like is None
             else deserialise(sections["state"], state_like, f"{path} (optimiser state)"))
    header = dict(header)
    header["history"] = _history(header, path)
    if type(header["epoch"]) is not int or header["epoch"] < 0:
        raise PersistenceError(f"{path} records no valid epoch count ({header['epoch']!r:.40})")
    return model, state, header
