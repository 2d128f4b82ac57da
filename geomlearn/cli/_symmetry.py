"""`geomlearn train --symmetry SPEC`: a symmetry of `geomlearn.symmetries` that the model
keeps exactly, parsed once, checked against the model family before anything is
written (its dimension: `ModelSpec.build_for`), and listed by `geomlearn list`.

The families that take a symmetry are those whose constructor takes `symmetry=`
(`takes_symmetry`); `--model-option symmetry=SPEC` is the same option.
"""

from __future__ import annotations

import inspect
import re

from ..symmetries import (Particles, Permutation, Rotation, Rotation3, Translation,
                          resolve_symmetry)
from ._errors import CLIError
from ._registry import MODELS

__all__ = ["FORMS", "symmetry_argument", "symmetry_option", "takes_symmetry",
           "symmetry_families", "symmetry_lines"]

#: `(form, class, what the symmetry moves, what it conserves)`, one per symmetry class.
FORMS = (
    ("translation:AXES[/D]", Translation, "shifts along the position axes AXES (e.g. "
     "translation:0, translation:0,1)", "the total momentum along them"),
    ("rotation:I,J[/D]", Rotation, "rotations in the plane of positions I and J (e.g. "
     "rotation:0,1 of (x, y, z))", "the angular momentum in that plane (L_z)"),
    ("rotation3", Rotation3, "rotations of particles in 3-D (x1 y1 z1 x2 ...)",
     "the angular-momentum vector"),
    ("particles:N/K", Particles, "shifts, rotations and relabellings of N identical "
     "particles of K coordinates", "the total and the angular momentum"),
    ("permutation:I,J;K,L[/D]", Permutation, "relabellings of identical particles within "
     "each group", "nothing (a finite group): the map commutes with relabelling"),
)
#: The forms of `FORMS` as a pattern (whitespace removed, lower case): which message.
_FORM = re.compile(rf"(?:{Translation.kind}:\d+(?:,\d+)*|{Rotation.kind}:\d+,\d+"
                   rf"|{Permutation.kind}:\d+(?:,\d+)*(?:;\d+(?:,\d+)*)*)(?:/\d+)?"
                   rf"|{Particles.kind}:\d+/\d+|{Rotation3.kind}")
_EXPECTED = (f"{', '.join(form for form, *_ in FORMS[:-1])} or {FORMS[-1][0]} (/D: particles "
             "of D coordinates each; see geomlearn list)")


def symmetry_argument(t) -> None:
    """`--symmetry SPEC` of `geomlearn train`."""
    t.add_argument("--symmetry", default=None, metavar="SPEC",
                   help="a symmetry the model keeps exactly, so that its momentum map is "
                        "conserved: translation:AXES[/D], rotation:I,J[/D] (e.g. rotation:0,1 "
                        f"for L_z), rotation3, particles:N/K or permutation:I,J;K,L[/D] (see `geomlearn list`; models: "
                        f"{', '.join(symmetry_families())})")


def takes_symmetry(spec, kind: type | None = None) -> bool:
    """Whether the model family of `spec` takes `symmetry=` (its constructor does) — a
    symmetry of class `kind` where given (a finite group, `Permutation`, only where the
    class does not say `finite_symmetries = False`)."""
    if "symmetry" not in inspect.signature(spec.cls.__init__).parameters:
        return False
    return kind is not Permutation or getattr(spec.cls, "finite_symmetries", True)


def symmetry_families(kind: type | None = None) -> list[str]:
    """The command-line names of the model families that take a symmetry (of `kind`)."""
    return [name for name, spec in MODELS.items() if takes_symmetry(spec, kind)]


def _canonical(text) -> str:
    """The canonical spec of `text` (any that `resolve_symmetry` reads); `CLIError` saying
    why a text of one of the `FORMS` names no symmetry (indices repeated, beyond `D`), or
    naming the forms for any other text."""
    try:
        return resolve_symmetry(text).spec
    except (TypeError, ValueError) as e:
        if isinstance(text, str) and _FORM.fullmatch("".join(text.split()).lower()):
            raise CLIError(f"--symmetry {text!r}: {e}") from None
    raise CLIError(f"--symmetry expects {_EXPECTED}, got {text!r}")


def symmetry_option(spec, text, model_options: dict) -> tuple[str | None, dict]:
    """`(symmetry, model_options)`: the canonical spec of `--symmetry` `text` (or of
    `--model-option symmetry=...`, taken out of `model_options`), or `None`; `CLIError`
    for a malformed spec, one given twice, or a model family `spec` that takes none."""
    if "symmetry" in model_options:
        if text is not None:
            raise CLIError("the symmetry is given twice (--symmetry and --model-option "
                           "symmetry=); give it once")
        text = model_options["symmetry"]
        model_options = {k: v for k, v in model_options.items() if k != "symmetry"}
    if text is None:
        return None, model_options
    symmetry = _canonical(text)
    if not takes_symmetry(spec):
        raise CLIError(f"--symmetry applies to {', '.join(symmetry_families())} (the models "
                       f"whose constructor takes symmetry=), not {spec.name}")
    return symmetry, model_options


def symmetry_lines() -> list[str]:
    """The lines of `geomlearn list` on the symmetries, one per form."""
    lines = ["symmetries (--symmetry SPEC; kept exactly, the momentum map conserved):"]
    for form, kind, moves, conserves in FORMS:
        families = ", ".join(symmetry_families(kind)) or "none"
        lines.append(f"  {form:<22} {moves}: conserves {conserves}; models: {families}")
    return lines
