"""Shared jaxtyping aliases for the shapes that recur across geomlearn.

`Point` is one phase-space state `z = (q, p)` of shape `(d,)`; `Window` is a
sequence of states of shape `(T, d)`, row `t` the state at time `t` (see the
conventions in the design notes). `State` is either.
"""

from typing import Union

from jaxtyping import Array, Float, PRNGKeyArray

Point = Float[Array, " d"]
Window = Float[Array, "T d"]
State = Union[Point, Window]
Scalar = Float[Array, ""]
Matrix = Float[Array, "m m"]

__all__ = ["Array", "Float", "PRNGKeyArray", "Point", "Window", "State", "Scalar", "Matrix"]
