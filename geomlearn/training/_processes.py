"""`fit` across the processes of a `jax.distributed` job: agreement, consensus, one writer.

Before the first epoch the processes all-gather a 31-bit digest of each argument that
must agree, and every process raises the same `ValueError` naming those that differ.
Before each compiled call they agree (one all-gather of three integers) on the group
size and on stopping, so that none is left waiting in a collective alone.

With `fit(..., per_process=True)` each process holds only its own samples; one all-gather
of a `ShardSummary` per process (`exchange_shards`: sizes, first non-finite sample, the
sums of squared target norms, a digest of the samples) replaces the checks that would
otherwise read the whole data on the host, and every process draws the same conclusions
from the same gathered numbers: the same `ValueError`, or the same `Shards`.
"""

from __future__ import annotations

import dataclasses
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
        "val_data": (inputs.val_fingerprint if inputs.per_process else
                     None if xv is None else gio.fingerprint(to_host(xv), to_host(yv))),
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


# ------------------------------------------------------------- per-process samples


@dataclasses.dataclass(frozen=True)
class ShardSummary:
    """What one process's own samples contribute to the checks of a per-process `fit`.

    `bad`, `bad_val`: `(first sample with a non-finite input or -1, how many)`;
    `bad_target`, `bad_val_target`: whether a compared target is not finite; `sq`,
    `val_sq`: sums over the samples of the squared compared target norms; `fingerprint`,
    `val_fingerprint`: 8 bytes of `geomlearn.io.fingerprint` of the samples; `n_val` is
    -1 without validation data; `shapes` a digest of the sample shapes and dtypes.
    """

    n: int
    n_val: int
    shapes: int
    bad: tuple[int, int]
    bad_val: tuple[int, int]
    bad_target: bool
    bad_val_target: bool
    devices: int
    fingerprint: bytes
    val_fingerprint: bytes
    sq: float
    val_sq: float

    def pack(self) -> np.ndarray:
        """19 `int32`: a flag (1: this process got this far), the integers, the 16 bytes
        of the fingerprints and the two float64 sums, bit for bit."""
        ints = [1, self.n, self.n_val, self.shapes, *self.bad, *self.bad_val,
                int(self.bad_target), int(self.bad_val_target), self.devices]
        return np.concatenate([
            np.asarray(ints, np.int64).astype(np.int32),
            np.frombuffer(self.fingerprint + self.val_fingerprint, np.int32),
            np.asarray([self.sq, self.val_sq], np.float64).view(np.int32)])

    @classmethod
    def unpack(cls, w: np.ndarray) -> ShardSummary:
        w = np.ascontiguousarray(w, np.int32)
        i = [int(v) for v in w[:11]]
        fp = w[11:15].tobytes()
        sq, val_sq = (float(v) for v in w[15:19].view(np.float64))
        return cls(i[1], i[2], i[3], (i[4], i[5]), (i[6], i[7]), bool(i[8]), bool(i[9]),
                   i[10], fp[:8], fp[8:], sq, val_sq)


SUMMARY_WORDS = 19


@dataclasses.dataclass(frozen=True)
class Shards:
    """The data of a per-process `fit`, agreed: the samples of each process, their total
    `M`, the relative loss's scales (global sum / global count of the squared target
    norms) and the fingerprints combining every process's digest, in process order."""

    sizes: tuple[int, ...]
    M: int
    target_sq: float
    val_sq: float | None
    fingerprint: str
    val_fingerprint: str | None


def _combined(parts: list[bytes]) -> str:
    return hashlib.sha256(b"".join(parts)).hexdigest()[:16]


def exchange_shards(mine: ShardSummary | None) -> Shards | None:
    """All-gather every process's `ShardSummary` and check them; `mine=None`: this process
    failed before (it takes part, marked failed, gets `None` and raises its own error).

    **Raises:** on every process the same `ValueError` when a process failed, the
    sample shapes differ, a process holds a non-finite input or target (naming the
    processes and their first such sample, in their own numbering), or the processes
    hold different numbers of samples (naming them per process).
    """
    words = np.zeros(SUMMARY_WORDS, np.int32) if mine is None else mine.pack()
    every = np.asarray(multihost_utils.process_allgather(words)).reshape(-1, SUMMARY_WORDS)
    down = [i for i in range(every.shape[0]) if not every[i, 0]]
    if mine is None:
        return None
    if down:
        raise ValueError(
            f"fit failed before training on process(es) {down} of {every.shape[0]} (see the "
            "error there: its arguments or its own data were rejected); stopped here too, "
            "since the processes train only together")
    shards = [ShardSummary.unpack(w) for w in every]
    _check_shards(shards)
    M = sum(s.n for s in shards)
    has_val = shards[0].n_val >= 0
    M_val = sum(s.n_val for s in shards)
    return Shards(
        sizes=tuple(s.n for s in shards), M=M, target_sq=sum(s.sq for s in shards) / M,
        val_sq=sum(s.val_sq for s in shards) / M_val if has_val else None,
        fingerprint=_combined([s.fingerprint for s in shards]),
        val_fingerprint=_combined([s.val_fingerprint for s in shards]) if has_val else None)


def _which(shards, bad) -> list[int]:
    return [i for i, s in enumerate(shards) if bad(s)]


def _check_shards(shards: list[ShardSummary]) -> None:
    """The checks of `exchange_shards`, decided from the gathered summaries alone."""
    k = len(shards)
    odd = _which(shards, lambda s: s.shapes != shards[0].shapes)
    if odd:
        raise ValueError(f"with per_process=True every process must hold samples of the same "
                         f"shape and dtype; process(es) {odd} differ from process 0")
    for what, field, size in (("data", "bad", "n"), ("val_data", "bad_val", "n_val")):
        where = _which(shards, lambda s, f=field: getattr(s, f)[0] >= 0)
        if where:
            parts = "; ".join(f"process {i}: sample {getattr(shards[i], field)[0]} of its "
                              f"{getattr(shards[i], size)} "
                              f"({getattr(shards[i], field)[1]} not finite)" for i in where)
            raise ValueError(f"{what} has a non-finite input (NaN or inf) on process(es) "
                             f"{where} of {k} ({parts}, counted in each process's own "
                             "samples); expected finite inputs")
    for what, field in (("data", "bad_target"), ("val_data", "bad_val_target")):
        where = _which(shards, lambda s, f=field: getattr(s, f))
        if where:
            raise ValueError(f"{what} contains a non-finite target (NaN or inf) on "
                             f"process(es) {where} of {k}")
    if len({s.n_val >= 0 for s in shards}) > 1:
        raise ValueError("with per_process=True either every process passes val_data or "
                         f"none does; process(es) {_which(shards, lambda s: s.n_val >= 0)} do")
    for what, field in (("training", "n"), ("validation", "n_val")):
        sizes = [getattr(s, field) for s in shards]
        if len(set(sizes)) > 1:
            raise ValueError(
                f"with per_process=True every process must hold the same number of "
                f"{what} samples; processes 0…{k - 1} hold {sizes}. Give each process an "
                "equal share: TrajectoryData.shard(i, k) splits trajectories of equal "
                "length evenly when k divides their number; otherwise drop the surplus "
                "samples (or trajectories) so that the counts agree")
    uneven = _which(shards, lambda s: s.n % s.devices)
    if uneven:
        raise ValueError(f"process(es) {uneven} hold {[shards[i].n for i in uneven]} samples, "
                         "not a multiple of their numbers of devices "
                         f"{[shards[i].devices for i in uneven]}")
