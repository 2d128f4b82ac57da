r"""Per-row steps of a window: the row-wise layers of a transformer integrator advanced by
the actual step of each row.

A window of an irregularly sampled trajectory has rows $z_t$ whose targets lie a
different time $\Delta t_t$ ahead. A row-wise layer with an increment,
$x_t \mapsto x_t + f(x_t)$, then takes the step of its row,
$$x_t \mapsto x_t + s_t\,f(x_t), \qquad s_t = \Delta t_t / \Delta t_{\text{ref}},$$
the step relative to the one the model is trained at ($s_t = 1$ on regular data: the
model as it is). For a SympNet gradient layer the increment $s_t \nabla V(x)$ is the
gradient of the potential $s_t V$, a symplectic shear for every $s_t$; for a triangular
shear the Jacobian $I + s_t\,\partial f$ stays unit triangular. Each row's map depends
on $s_t$, never on another row's state, so the window map keeps its structure for every
sequence of steps (time-adaptive SympNets: Janik and Benner, 2025). The attention layers,
which mix the rows, are not scaled: $Q \leftarrow Q + \operatorname{diag}(s)\nabla_P F(P)$
is not the gradient of a potential unless all $s_t$ are equal.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._typing import Array, Float
from ._position_signal import RowSlot, RowTerms

__all__ = ["check_steps", "with_row_steps"]


def check_steps(steps, T: int, who: str) -> Float[Array, " T"]:
    """`steps` as an array `(T,)` of real numbers; `ValueError` naming what was expected
    and what came for another shape, and (for concrete values, outside `jit`) for a step
    that is not finite and positive; `TypeError` for a non-real dtype."""
    steps = jnp.asarray(steps)
    if not (jnp.issubdtype(steps.dtype, jnp.floating) or jnp.issubdtype(steps.dtype, jnp.integer)):
        raise TypeError(f"{who}: steps must be real numbers, got dtype {steps.dtype}")
    if steps.shape != (T,):
        raise ValueError(
            f"{who}: steps must have shape ({T},), one per row of the window, got shape "
            f"{steps.shape}")
    if not isinstance(steps, jax.core.Tracer):
        values = np.asarray(steps, dtype=np.float64)
        bad = np.flatnonzero(~(np.isfinite(values) & (values > 0)))
        if bad.size:
            raise ValueError(
                f"{who}: steps must be finite and > 0 (each row's step relative to the "
                f"training step), got {float(values[bad[0]])} at row {int(bad[0])}")
    return steps


def with_row_steps(terms: tuple[RowTerms, ...], slots: tuple[RowSlot, ...],
                   steps) -> tuple[RowTerms, ...]:
    r"""The row terms of `slots` with every layer that has an increment (`slot.steps`)
    also advanced by `steps` `(T,)`: its step becomes $s_t$ times the signal's own
    (or $s_t$ where the signal gives none)."""
    return tuple(
        t._replace(step=steps if t.step is None else t.step * steps.astype(t.step.dtype))
        if s.steps else t
        for t, s in zip(terms, slots)
    )
