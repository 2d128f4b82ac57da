"""`fit` across the processes of a `jax.distributed` job: agreement, consensus, one writer.

Before the first epoch the processes all-gather a 31-bit digest of each argument that
must agree, and every process raises the same `ValueError` naming those that differ.
Before each compiled call they agree (one all-gather of three integers) on the group
size and on stopping, so that none is left waiting in a collective alone.
"""

from __future__ import annotations

import hashlib
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils

from .. import io as gio


def to_host(a):
    """A NumPy copy of a JAX array this process holds completely (else `a` unchanged)."""
    if isinstance(a, jax.Array) and a.is_fully_addressable \
            and not jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
        return np.asarray(a)
    return a


def local(tree):
    """The process-local copy of replicated global arrays (every process holds all of a
    replicated array; its first local shard is the whole array)."""
    def one(a):
        if isinstance(a, jax.Array) and not a.is_fully_addressable:
            return a.addressable_data(0)
        return a
    return jax.tree_util.tree_map(one, tree)


def digest(value) -> int:
    """A 31-bit digest of `value` (its `repr`, or the bytes of arrays) for comparing
    arguments across processes."""
    h = hashlib.sha256()
    if isinstance(value, (np.ndarray, jax.Array)):
        h.update(gio.fingerprint(value).encode())
    else:
        h.update(repr(value).encode())
    return int.from_bytes(h.digest()[:4], "little") & 0x7FFFFFFF


#: The arguments every process of a multi-process `fit` must have the same (in this order).
AGREED = ("key", "epochs", "batch_size", "number of samples", "sample shape", "data",
          "val_data", "task", "loss", "trainer", "model", "checkpoint", "checkpoint_every",
          "resume point (epochs done)", "callback given", "time_budget given")


def failed_before_training() -> None:
    """Across processes, a process whose arguments were rejected (or whose checkpoint
    could not be read or locked) still takes part in the agreement all-gather, marked
    failed, so that the others raise too instead of waiting for it; then it re-raises."""
    if jax.process_count() > 1:
        check_agreement(None)


def check_agreement(fields: dict[str, Any] | None) -> None:
    """Across processes: `ValueError` naming every argument that is not the same on all
    of them (an all-gather of one small digest per argument, `AGREED`). Every process
    receives the same digests, so every process raises the same error: none is left
    waiting. `fields=None`: this process failed before training (it raises its own error
    after this returns; the others raise naming it)."""
    names = list(AGREED)
    failed = fields is None
    digests = [0] * len(names) if failed else [digest(fields[n]) for n in names]
    mine = np.asarray([int(failed), *digests], dtype=np.int32)
    every = np.asarray(multihost_utils.process_allgather(mine)).reshape(-1, len(names) + 1)
    down = [i for i in range(every.shape[0]) if every[i, 0]]
    if failed:
        return
    if down:
        raise ValueError(
            f"fit failed before training on process(es) {down} of {every.shape[0]} (see the "
            "error there: an argument or the checkpoint was rejected); stopped here too, "
            "since the processes train only together"
        )
    every = every[:, 1:]
    differ = [j for j in range(len(names)) if not (every[:, j] == every[0, j]).all()]
    if differ:
        me = jax.process_index()
        parts = []
        for j in differ:
            others = [i for i in range(every.shape[0]) if every[i, j] != every[0, j]]
            value = fields[names[j]]
            if isinstance(value, (np.ndarray, jax.Array)):
                value = np.asarray(value).tolist()
            text = repr(value) if len(repr(value)) <= 80 else "(not shown)"
            parts.append(f"{names[j]} (processes {others} differ from process 0; "
                         f"process {me} has {text})")
        raise ValueError(
            f"fit runs on {every.shape[0]} processes, which must all call it with the same "
            f"arguments (and data); these differ: {'; '.join(parts)}"
        )


def consensus(stop: bool, interrupted: bool, count: int) -> tuple[bool, bool, int]:
    """Across processes, before each compiled call: stop if any process wants to (a
    callback, the time budget, Ctrl-C), and run the smallest of the proposed group sizes,
    so that every process runs the same epochs and none waits in a collective alone."""
    mine = np.asarray([int(stop), int(interrupted), int(count)], dtype=np.int32)
    every = np.asarray(multihost_utils.process_allgather(mine)).reshape(-1, 3)
    return bool(every[:, 0].any()), bool(every[:, 1].any()), int(every[:, 2].min())


def finished_together(multi: bool) -> None:
    """Across processes, `fit` returns on none before process 0 has written the final
    checkpoint, so that a following `fit(..., resume=True)` on any process reads it."""
    if multi:
        multihost_utils.sync_global_devices("geomlearn.fit: finished")


def agreement_fields(inputs, model, params, raw_key, done, callback) -> dict:
    """What every process of a multi-process `fit` must have the same: the arguments that
    decide the epochs run (sizes, epochs, resume point, key) and the values trained
    (model, data). Compared by `check_agreement` before the first epoch."""
    x, y, _, xv, yv, _ = inputs.data
    leaves = [np.asarray(to_host(a)) for a in jax.tree_util.tree_leaves(params)]
    return {
        "key": np.asarray(to_host(raw_key)),
        "epochs": inputs.epochs,
        "batch_size": inputs.run.B,
        "number of samples": inputs.run.M,
        "sample shape": (tuple(x.shape[1:]), tuple(y.shape[1:])),
        "data": inputs.meta["data_fingerprint"],
        "val_data": None if xv is None else gio.fingerprint(to_host(xv), to_host(yv)),
        "task": inputs.meta["task"],
        "loss": inputs.meta["loss"],
        "trainer": inputs.meta["trainer"],
        "model": (type(model).__name__, gio.fingerprint(*leaves) if leaves else ""),
        "checkpoint": None if inputs.checkpoint is None else str(inputs.checkpoint),
        "checkpoint_every": inputs.checkpoint_every,
        "resume point (epochs done)": done,
        "callback given": callback is not None,
        "time_budget given": inputs.time_budget is not None,
    }
