r"""Which columns of a trajectory file make the state, and in which order: read by name.

A file's state is canonical, $z = (q, p)$ with the positions first (DESIGN.md), or, for
an odd dimension, its columns in file order with no $q/p$ split. `column_layout` decides
from the column names (every column but `trajectory` and `t`), by one rule:

1. **Named.** `q_columns` and `p_columns` give the state in that order; nothing is
   guessed and every other column is ignored.
2. **Pairs by name** (any case): `q<s>` ↔ `p<s>` (`q1`/`p1`, `q`/`p`); any other name
   `x` ↔ `px`, `p_x`, `vx`, `v_x`, `xdot` or `x_dot`; a clock `t`, `tau`, `time` ↔ `E`
   (an extended phase space).
3. **Invariants are not state.** An unpaired column named like a conserved quantity —
   `E`, `H`, `L`, `Lx`, `Ly`, `Lz`, `energy…`, `hamiltonian…`, `casimir…`, `jacobi…`,
   `angular_momentum…`, `Ekin`, `Epot`, `Etot` — is left out, with a `ColumnWarning`.
4. **Every column paired:** q = the positions in file order, p = their partners. A file
   in another order (interleaved `x, vx, y, vy`; momenta first `p1, p2, q1, q2`) is
   reordered, with a `ColumnWarning`.
5. **No column paired:** when exactly half the columns look like momenta (`p`, `p1`,
   `p_x`, `px`, `v1`, `vx`, `v_x`, `…dot`), they are p and the others q, each in file
   order (`θ1, θ2, p1, p2`); when none does, the file order is kept (the names do not
   say).
6. **Some paired:** the file order is kept when it agrees with every pair (position
   $i$ ↔ momentum $i + n$ of a state of dimension $2n$; any order for an odd dimension).

Anything else — columns without a partner among paired ones in another order, momenta
that are not half of an even state, a name given twice, a position with two momenta or a
name that is both — raises a one-line `ValueError` asking for `q_columns`/`p_columns`.
"""

from __future__ import annotations

import dataclasses
import re
import warnings

__all__ = ["ColumnLayout", "ColumnWarning", "column_layout", "column_list", "warn_layout",
           "NOT_STATE"]

#: Columns of a CSV file that are never state components.
NOT_STATE = ("trajectory", "t")

_INVARIANT = re.compile(
    r"(e|h|l|l_?[xyz]|energy\w*|hamiltonian\w*|casimir\w*|jacobi\w*|lagrangian\w*|"
    r"angular_?momentum\w*|invariant\w*|e_?(kin|pot|tot)\w*|(kinetic|potential|total)_?energy)")
_MOMENTUM = re.compile(r"p(\d+|_\w+|[^\W\d_]\d*)?|v(\d+|_\w+|[^\W\d_]\d*)|\w+?_?dot")
_CLOCKS = ("t", "tau", "time")
_ASK = ("name the state columns, positions then momenta, with q_columns and p_columns "
        "(command line: --q-columns ... --p-columns ...)")


class ColumnWarning(UserWarning):
    """A file's state columns were reordered by name, or columns that look like invariants
    were left out of the state (`TrajectoryData.read`)."""


@dataclasses.dataclass(frozen=True)
class ColumnLayout:
    """The state of a file: `indices` (of the header's columns, in state order) and their
    `columns` names, `n_q` positions (`None`: no q/p split), `how` they were chosen
    (`"named"`, `"by name"` or `"by position"`), whether that `reordered` the file's
    `file_order`, and the columns `left_out` as invariants."""

    indices: tuple[int, ...]
    columns: tuple[str, ...]
    n_q: int | None
    how: str
    reordered: bool = False
    left_out: tuple[str, ...] = ()
    file_order: tuple[str, ...] = ()

    def split(self) -> str:
        """`q = (x, y), p = (px, py)`, or `state (a, b, c), no q/p split`."""
        if self.n_q is None:
            return f"state ({', '.join(self.columns)}), no q/p split"
        q, p = self.columns[:self.n_q], self.columns[self.n_q:]
        return f"q = ({', '.join(q)}), p = ({', '.join(p)})"

    def describe(self) -> str:
        """`split()` and how the columns were chosen, in one line."""
        why = {"named": "as named", "by name": "by name"}.get(self.how)
        if self.n_q is None and not self.reordered:
            return self.split()
        if self.reordered:
            why = f"reordered by name from {', '.join(self.file_order)}"
        elif self.how == "by position":
            why = "in file order: the names do not say which are positions"
        return self.split() + (f" ({why})" if why else "")


def column_list(value, what: str):
    """`value` (a list of names or one comma-separated string) as a list, or `None`;
    `ValueError` when it names a column twice."""
    if value is None:
        return None
    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    value = [str(v).strip() for v in value]
    if len(set(value)) != len(value):
        raise ValueError(f"{what} names a column twice: {value}")
    return value


def _named(header, q, p, where) -> ColumnLayout:
    if q and p and len(q) != len(p):
        raise ValueError(f"q_columns and p_columns must name equally many columns (a "
                         f"canonical state (q, p)), got {len(q)} and {len(p)}")
    for name in q + p:
        if name not in header:
            raise ValueError(f"{where}missing column {name!r}; the header has "
                             f"{', '.join(header)}")
    indices = tuple(header.index(name) for name in q + p)
    return ColumnLayout(indices, tuple(q + p), len(q) if p else None, "named")


def _partners(name: str) -> set[str]:
    """The names a momentum of the position `name` (lower case) can have."""
    if name.startswith("q"):
        return {"p" + name[1:]}
    forms = {f"p{name}", f"p_{name}", f"v{name}", f"v_{name}", f"{name}dot", f"{name}_dot"}
    return forms | {"e"} if name in _CLOCKS else forms


def _pairs(names, lower, where) -> dict[int, int]:
    """`{position: momentum}` (indices of `names`) by the names; `ValueError` when a name
    is given twice, has two momenta, or is both a position and a momentum."""
    index: dict[str, int] = {}
    for i, name in enumerate(lower):
        if name in index:
            j = index[name]
            raise ValueError(f"{where}the column {names[i]!r} is given twice; expected one "
                             "column per state component" if names[i] == names[j] else
                             f"{where}the columns {names[j]!r} and {names[i]!r} differ only "
                             f"in case; {_ASK}")
        index[name] = i
    pairs: dict[int, int] = {}
    for i, name in enumerate(lower):
        if not name:  # an unnamed column pairs with nothing
            continue
        found = sorted(index[m] for m in _partners(name) if m in index and index[m] != i)
        if len(found) > 1:
            raise ValueError(f"{where}cannot tell which column is the momentum of "
                             f"{names[i]!r}: {', '.join(names[j] for j in found)}; "
                             f"{_ASK}")
        if found:
            pairs[i] = found[0]
    claimed = list(pairs.values())
    twice = next((j for j in claimed if claimed.count(j) > 1 or j in pairs), None)
    if twice is not None:
        raise ValueError(f"{where}the column {names[twice]!r} pairs with more than one "
                         f"column by name; {_ASK}")
    return pairs


def _by_name(names, where) -> tuple[list[int], int | None, str, list[int]]:
    """`(order, n_q, how, left_out)` of the state columns `names` (rules 2-6)."""
    lower = [n.strip().lower() for n in names]
    pairs = _pairs(names, lower, where)
    paired = set(pairs) | set(pairs.values())
    left_out = [i for i in range(len(names)) if i not in paired and _INVARIANT.fullmatch(lower[i])]
    kept = [i for i in range(len(names)) if i not in left_out]
    rest = [i for i in kept if i not in paired]
    d = len(kept)
    n_q = d // 2 if d % 2 == 0 and d else None
    if not pairs:
        momenta = [i for i in rest if _MOMENTUM.fullmatch(lower[i])]
        if not momenta or n_q is None:
            return kept, n_q, "by position", left_out
        if len(momenta) != n_q:
            raise ValueError(f"{where}the columns {', '.join(names[i] for i in momenta)} look "
                             f"like momenta but are not half of the {d} state columns "
                             f"({', '.join(names[i] for i in kept)}); {_ASK}")
        return [i for i in rest if i not in momenta] + momenta, n_q, "by name", left_out
    if not rest:
        positions = sorted(pairs)
        return positions + [pairs[i] for i in positions], n_q, "by name", left_out
    agrees = n_q is None or all(kept.index(j) == kept.index(i) + n_q for i, j in pairs.items())
    if not agrees:
        raise ValueError(f"{where}cannot tell positions from momenta by name: "
                         f"{', '.join(names[i] for i in rest)} pair with no other column, "
                         f"and the file order {', '.join(names[i] for i in kept)} does not "
                         f"put each position {n_q} columns before its momentum; {_ASK}")
    return kept, n_q, "by name", left_out


def column_layout(header, q_columns=None, p_columns=None, *, where: str = "",
                  skip=NOT_STATE) -> ColumnLayout:
    """The state columns of a file with the column names `header` (those in `skip` are not
    state): `q_columns` then `p_columns` when given (both, or neither; `p_columns=()`
    for a state without momenta), otherwise chosen by name (the module's rule).

    **Raises:** `ValueError` (one line, starting with `where`) for a missing column,
    names that do not say which columns are positions, or one of the two lists alone.
    """
    header = [str(h).strip() for h in header]
    q = column_list(q_columns, "q_columns")
    p = column_list(p_columns, "p_columns")
    if (q is None) != (p is None):
        raise ValueError("give both q_columns and p_columns (p_columns=() for a state "
                         "without momenta), or neither")
    if q is not None:
        return _named(header, q, p, where)
    candidates = [i for i, h in enumerate(header) if h not in skip]
    names = [header[i] for i in candidates]
    order, n_q, how, left_out = _by_name(names, where)
    kept = [i for i in range(len(names)) if i not in left_out]
    return ColumnLayout(tuple(candidates[i] for i in order), tuple(names[i] for i in order),
                        n_q, how, reordered=order != kept,
                        left_out=tuple(names[i] for i in left_out),
                        file_order=tuple(names[i] for i in kept))


def warn_layout(layout: ColumnLayout, where: str, *, stacklevel: int = 2) -> None:
    """A `ColumnWarning` for columns reordered by name and for columns left out."""
    if layout.reordered:
        warnings.warn(f"{where}state columns reordered by name: {layout.describe()}",
                      ColumnWarning, stacklevel=stacklevel)
    if layout.left_out:
        warnings.warn(f"{where}the columns {', '.join(layout.left_out)} look like invariants, "
                      "not state components: left out of the state (name them in q_columns/"
                      "p_columns to use them)", ColumnWarning, stacklevel=stacklevel)
