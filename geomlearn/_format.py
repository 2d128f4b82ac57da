"""Numbers and aligned text tables for the reports the command line prints."""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["fmt", "aligned_table"]


def fmt(x) -> str:
    """A number for a report: 3 significant digits, `n/a` for `None`."""
    if x is None:
        return "n/a"
    if isinstance(x, float):
        if x == 0.0 or not math.isfinite(x):
            return "0" if x == 0.0 else str(x)
        return f"{x:.3g}" if 1e-3 <= abs(x) < 1e5 else f"{x:.2e}"
    return str(x)


def aligned_table(title: str, rows: Iterable[tuple[str, str]]) -> str:
    """`title`, then one indented line per `(name, value)` row with the values aligned."""
    rows = list(rows)
    width = max((len(name) for name, _ in rows), default=0)
    return "\n".join([title] + [f"  {name:<{width}}  {value}" for name, value in rows])
