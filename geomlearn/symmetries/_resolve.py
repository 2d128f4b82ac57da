"""A symmetry from its text form (`spec`), as model files and the command line write it."""

from __future__ import annotations

from ._base import AbstractSymmetry
from ._groups import Rotation, Rotation3, Translation
from ._particles import Particles, Permutation

__all__ = ["resolve_symmetry"]

_SPEC_HELP = ("symmetry must be None, a symmetry object or a string 'translation:AXES[/D]', "
              "'rotation:I,J[/D]', 'rotation3', 'particles:N/K' or "
              "'permutation:I,J;K,L[/D]' (D: coordinates per particle)")


def _integers(text: str, separator: str = ",") -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(separator)) if text.strip() else ()


def _parse(text: str) -> AbstractSymmetry:
    """The symmetry whose `spec` is `text`."""
    kind, _, rest = text.strip().lower().partition(":")
    rest, _, block = rest.partition("/")
    try:
        d = int(block) if block.strip() else None
        if kind == Permutation.kind and rest.strip():
            groups = tuple(_integers(g) for g in rest.split(";"))
            return Permutation(groups, particle_dim=1 if d is None else d)
        indices = _integers(rest)
    except ValueError:
        raise ValueError(f"{_SPEC_HELP}, got {text!r}") from None
    if kind == Rotation3.kind and not indices and d is None:
        return Rotation3()
    if kind == Translation.kind and indices:
        return Translation(axes=indices, particle_dim=d)
    if kind == Rotation.kind and len(indices) == 2:
        return Rotation(plane=indices, particle_dim=d)
    if kind == Particles.kind and len(indices) == 1 and d is not None:
        return Particles(indices[0], d)
    raise ValueError(f"{_SPEC_HELP}, got {text!r}")


def resolve_symmetry(value, n: int | None = None) -> AbstractSymmetry | None:
    """The symmetry `value` means, resolved once, and checked against `n` configuration
    coordinates when given.

    `value`: `None` (no symmetry), a symmetry object, or its `spec` string
    (`"translation:0,1"`, `"translation:0/1"` for particles on a line,
    `"rotation:0,1"`, `"rotation:0,1/3"`, `"rotation3"`, `"particles:13/3"`,
    `"permutation:0,1;2,3/3"`). `ValueError` for a string of another form or a symmetry
    that does not fit `n`; `TypeError` for anything else."""
    if value is None:
        return None
    if isinstance(value, str):
        value = _parse(value)
    if not isinstance(value, AbstractSymmetry):
        raise TypeError(f"{_SPEC_HELP}, got {value!r} ({type(value).__name__})")
    if n is not None:
        value.check(n)
    return value
