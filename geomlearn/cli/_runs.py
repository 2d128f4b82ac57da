"""Run folders: the files one `geomlearn train` writes, and reading them back."""

from __future__ import annotations

import datetime
import os
import pathlib
import secrets

from .._files import read_json
from ..io import PersistenceError, encode_config, load
from ._errors import CLIError, user

__all__ = ["RUN_FILES", "MODEL_FILE", "run_folder", "read_run_json", "load_run"]

MODEL_FILE = "model.geomlearn"
RUN_FILES = ("run.json", MODEL_FILE, "history.json", "metrics.json", "report.png")


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
