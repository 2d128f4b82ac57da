"""Your own Hamiltonian at the command line: `geomlearn train --data FILE --hamiltonian
MODULE:FUNCTION [--hamiltonian-separable]`.

`MODULE` is a path to a Python file (ending in `.py`) or the dotted name of a module
importable from the current folder or `sys.path`; `FUNCTION` names a function in it of
one state `(dim,)` (positions first, then momenta) to a scalar, written in `jax.numpy`.
The system (`geomlearn.systems.from_hamiltonian`) has the data's dimension and state
names and is checked at the first states of the held-out trajectories; with it the run
is compared with the classical integrators as on a built-in system. `run.json` records
the reference (a file's path made absolute), so that `geomlearn evaluate` imports it
again.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pathlib
import sys

import numpy as np

from ..systems import from_hamiltonian
from ._errors import CLIError

__all__ = ["hamiltonian_reference", "load_hamiltonian", "own_system", "check_model_holds_no_system"]


def _one_line(error: Exception) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


def _is_file(module: str) -> bool:
    return module.endswith(".py") or "/" in module or os.sep in module


def hamiltonian_reference(text: str | None, flag: str = "--hamiltonian",
                          example: str = "my_system.py:H") -> str | None:
    """`MODULE:FUNCTION` checked for its form, a file's path made absolute (`None` stays
    `None`); `ValueError` for a malformed reference (naming `flag`)."""
    if text is None:
        return None
    module, sep, function = str(text).rpartition(":")
    if not sep or not module or not all(part.isidentifier() for part in function.split(".")):
        raise ValueError(f"{flag} expects MODULE:FUNCTION (a module name or a .py file, "
                         f"and the function's name, e.g. {example}), got {text!r}")
    if _is_file(module):
        module = str(pathlib.Path(module).resolve())
    return f"{module}:{function}"


def _import(module: str, reference: str, flag: str):
    """The module `module`: a `.py` file executed as a module, or a module imported by
    name with the current folder on `sys.path` (errors name `flag reference`)."""
    try:
        if _is_file(module):
            path = pathlib.Path(module)
            if not path.is_file():
                raise CLIError(f"{flag} {reference}: no file {path}")
            name = f"_geomlearn_hamiltonian_{path.stem}"
            spec = importlib.util.spec_from_file_location(name, path)
            loaded = importlib.util.module_from_spec(spec)
            sys.modules[name] = loaded  # what a module's own classes look themselves up in
            try:
                spec.loader.exec_module(loaded)
            except BaseException:
                del sys.modules[name]
                raise
            return loaded
        added = os.getcwd() not in sys.path
        if added:
            sys.path.insert(0, os.getcwd())
        try:
            return importlib.import_module(module)
        finally:
            if added:
                sys.path.remove(os.getcwd())
    except CLIError:
        raise
    except ModuleNotFoundError as e:
        raise CLIError(f"{flag} {reference}: no module named {e.name!r} (give a module "
                       "importable from the current folder or sys.path, or a path to a .py "
                       "file)") from None
    except Exception as e:  # the user's module: any error while importing it
        raise CLIError(f"{flag} {reference}: cannot import {module}: "
                       f"{_one_line(e)}") from None


def load_hamiltonian(reference: str, flag: str = "--hamiltonian"):
    """The function `MODULE:FUNCTION` names; `CLIError` (one line, naming `flag`) for a
    module that cannot be imported or a name that is missing or not callable."""
    module, _, name = reference.rpartition(":")
    found = _import(module, reference, flag)
    for part in name.split("."):
        if not hasattr(found, part):
            raise CLIError(f"{flag} {reference}: {module} has no function {name!r}")
        found = getattr(found, part)
    if not callable(found):
        raise CLIError(f"{flag} {reference}: {name} is a {type(found).__name__}, not a "
                       "function")
    return found


def own_system(options, data, function=None):
    """The system of `--hamiltonian` for `data` (a `TrajectoryData`, whose first states it
    is checked at), or `None` without the flag; `function` is the loaded Hamiltonian
    (default: `load_hamiltonian`). `CLIError` naming the data's dimension when the
    Hamiltonian does not take their states or is not separable as claimed."""
    if options.hamiltonian is None:
        return None
    H = load_hamiltonian(options.hamiltonian) if function is None else function
    first = np.stack([np.asarray(z[0], np.float64) for z in data.trajectories])
    labels = data.labels if data.labels is not None and len(data.labels) == data.dim else None
    try:
        return from_hamiltonian(H, data.dim, separable=options.hamiltonian_separable,
                                labels=labels, initial_conditions=first,
                                name=options.hamiltonian.rpartition(":")[2])
    except (TypeError, ValueError) as e:
        names = f" ({', '.join(labels)})" if labels else ""
        raise CLIError(f"--hamiltonian {options.hamiltonian}: the data's states have {data.dim} "
                       f"components{names}: {str(e).strip().splitlines()[0]}") from None


def check_model_holds_no_system(spec, options) -> None:
    """`CLIError` for a model that would hold the user's system (a corrected integrator:
    its file could not store it) or whose evaluation integrates a reduced system (a
    model reduction: built-in systems only)."""
    if options.hamiltonian is None:
        return
    if spec.arguments.holds_system:
        raise CLIError(f"--model {spec.name} with --hamiltonian: the model would hold your "
                       "Hamiltonian, and a model file stores only the built-in systems; "
                       "train it in Python with geomlearn.systems.from_hamiltonian, or "
                       "choose another model")
    if spec.evaluation.needs_system:
        raise CLIError(f"--model {spec.name} with --hamiltonian: a model reduction trains "
                       "and is evaluated on a built-in system (--system) only")
