"""Run folders: the files one `geomlearn train` writes, reading them back, and what a
finished run says about itself (`learned`, `how_it_ended`)."""

from __future__ import annotations

import datetime
import math
import os
import pathlib
import secrets

from .._files import read_json
from .._format import fmt
from ..io import PersistenceError, encode_config, load
from ._errors import CLIError, user

__all__ = ["RUN_FILES", "MODEL_FILE", "NOT_TRAINED", "run_folder", "read_run_json", "load_run",
           "learned", "how_it_ended"]

MODEL_FILE = "model.geomlearn"
RUN_FILES = ("run.json", MODEL_FILE, "history.json", "metrics.json", "report.png")
#: The exit status of `geomlearn train` (and `evaluate`) for a model that did not learn.
NOT_TRAINED = 4
#: `learned`: the final loss must lie below these shares of the identity map's loss and of
#: the loss before training.
IDENTITY_SHARE, FIRST_SHARE = 0.5, 0.9
#: `how_it_ended`: the loss is still falling when it fell by more than this share over
#: the last `RECENT` share of the iterations.
STILL_FALLING, RECENT = 0.01, 0.1


def _claim(out: pathlib.Path, *, force: bool, files) -> pathlib.Path:
    """The folder `out`, created if missing, after checking that the run can write `files`
    there (and, without `force`, claiming it by creating `files[0]` exclusively)."""
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
        return _claim(pathlib.Path(out), force=force, files=files)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    pathlib.Path(root).mkdir(parents=True, exist_ok=True)
    while True:
        out = pathlib.Path(root) / f"{prefix}-{stamp}-{secrets.token_hex(2)}"
        try:
            out.mkdir()
            return out
        except FileExistsError:
            continue


def read_run_json(path: pathlib.Path, **checks) -> dict:
    """The JSON object in `path` (`geomlearn._files.read_json`), or a `CLIError` naming the file."""
    return user(read_json, path, **checks)


def load_run(directory: str, *, need_run: bool):
    """`(folder, model, run)` of a folder written by `geomlearn train` (or of a model
    file, whose `run.json` beside it is optional unless `need_run`); `CLIError` when the
    files are missing, unreadable, or do not agree with each other."""
    path = pathlib.Path(directory)
    model_file = path / MODEL_FILE if path.is_dir() else path
    if not model_file.is_file():
        raise CLIError(f"no {MODEL_FILE} in {directory!r} (expected a folder written by geomlearn train)")
    run_file = model_file.parent / "run.json"
    run = read_run_json(run_file) if run_file.exists() else None
    if need_run and run is None:
        raise CLIError(f"no run.json in {str(model_file.parent)!r}: cannot tell which data to evaluate on")
    try:
        model = load(model_file)
    except PersistenceError as e:
        raise CLIError(str(e)) from None
    if run is not None and "model_class" in run:
        encoded, recorded = encode_config(model), run.get("model_config") or {}
        if encoded["class"] != run["model_class"] or any(  # keys run.json records must agree
                encoded["config"].get(k) != v for k, v in recorded.items()):
            raise CLIError(f"{model_file} holds a {encoded['class']} that does not match run.json "
                           f"({run['model_class']} with {run.get('model_config')})")
    return model_file.parent, model, run


def _compared_loss(history: dict) -> tuple[str, list]:
    """`(name, losses)`: the validation losses when the run had validation data, else the
    training losses."""
    val = history.get("val_loss") or []
    if val and val[-1] is not None:
        return "validation", val
    return "training", history.get("loss") or []


def learned(history: dict, *, start: float | None, identity: float | None,
            unit: str = "iterations") -> str | None:
    r"""Why a run has not learned, or `None` when it has.

    **The rule.** Let $L$ be the run's final loss (validation, or training without
    validation data), $L_0$ the same loss of the model before training (`start`; `None`:
    the loss after the first of its `unit`) and $L_{\mathrm{id}}$ the identity map's
    (the prediction $z_{t+1} = z_t$) on the same samples with the same loss (`None`
    where the model predicts no later state). The run has learned when
    $L < 0.5\,L_{\mathrm{id}}$ (skipped without $L_{\mathrm{id}}$) and
    $L < 0.9\,L_0$: a model that does not halve the do-nothing predictor's error, or
    that training moved by less than a tenth, is not a result; nor is a run in which no
    iteration ran.

    **Returns:** the reason in words, or `None`.
    """
    name, losses = _compared_loss(history)
    if not losses:
        return f"no {unit[:-1]} ran"
    final = losses[-1]
    if identity is not None and not final < IDENTITY_SHARE * identity:
        return (f"the {name} loss {fmt(final)} is not below {IDENTITY_SHARE:g} × the identity "
                f"map's {fmt(identity)} (the prediction z_(t+1) = z_t)")
    first, when = (losses[0], f"after the first {unit[:-1]}") if start is None else (start, "before training")
    if not final < FIRST_SHARE * first:
        return (f"the {name} loss {fmt(final)} is not below {FIRST_SHARE:g} × its value {when} "
                f"({fmt(first)}): training hardly moved it")
    return None


def how_it_ended(history: dict, *, epochs, time_budget, unit: str) -> tuple[str, dict]:
    r"""How a run ended, in words and as `metrics.json` entries.

    **The rule.** The budget is at most `epochs` `unit` and at most `time_budget`
    seconds, whichever comes first; it ended the run when `history["stop_reason"]` is
    `"epochs"` or `"budget"`. The loss was *still falling* when the training loss fell by
    more than 1 % over the last 10 % of the `unit` ($L_{n-k}$ against $L_n$,
    $k = \lceil n/10 \rceil$); unknown after a single one.

    **Returns:** `(text, entries)`; `entries`: `budget_ended_run`,
    `loss_still_falling` (`None`: unknown) and `loss_recent_decrease` (the relative fall
    over those last `unit`, `None`: unknown).
    """
    reason, losses = history.get("stop_reason"), history.get("loss") or []
    ended = {"epochs": f"the limit of {epochs} {unit[:-1] if epochs == 1 else unit}",
             "budget": f"the time limit of {fmt(time_budget)} s",
             "stalled": "a stall (no step lowered the loss, at the largest damping)",
             "converged": "convergence (the loss at round-off)",
             "callback": "its plan"}.get(reason, str(reason))
    fall = None
    if len(losses) > 1:
        before = losses[-1 - math.ceil(len(losses) * RECENT)]
        fall = (before - losses[-1]) / before if before > 0 else 0.0
    falling = None if fall is None else bool(fall > STILL_FALLING)
    by_budget = reason in ("epochs", "budget")
    text = f"stopped by {ended}"
    if fall is not None:
        moved = f"fell {fall:.1%}" if fall >= 0 else f"rose {-fall:.1%}"
        text += (f"; the loss {'was still falling' if falling else 'had levelled off'}: it "
                 f"{moved} over the last {RECENT:.0%} of the {unit}")
    return text, {"budget_ended_run": by_budget, "loss_still_falling": falling,
                  "loss_recent_decrease": fall}
