r"""The discrete-gradient step of port-Hamiltonian models and the forcing options.

**Gonzalez's discrete gradient** (O. Gonzalez, *Time integration and discrete
Hamiltonian systems*, J. Nonlinear Sci. 6, 1996) of an energy $H$ between $x$ and $y$ is

$$\bar\nabla H(x, y) = \nabla H(\bar x) + \frac{H(y) - H(x) - \nabla H(\bar x)^\top
  \Delta}{|\Delta|^2}\,\Delta, \qquad \bar x = \tfrac12(x + y),\ \Delta = y - x.$$

It satisfies $\bar\nabla H(x, y)^\top (y - x) = H(y) - H(x)$ exactly (an algebraic
identity, so up to round-off) and tends to $\nabla H(x)$ as $y \to x$. The step
$y = x + h\big[(\mathbb{J} - R(\bar x))\,\bar\nabla H(x, y) + F(\bar x, t + h/2)\big]$
then obeys the **discrete energy balance**
$H(y) - H(x) = -h\,\bar\nabla H^\top R\,\bar\nabla H + h\,\bar\nabla H^\top F$ for every
$H$, $R \succeq 0$ and $F$ (McLachlan, Quispel and Robidoux, *Geometric integration
using discrete gradients*, Phil. Trans. R. Soc. A 357, 1999). The implicit equation is
solved by Newton's method to the round-off floor; derivatives follow from the
implicit function theorem (`jax.lax.custom_root`), not from the iterations. Its
convergence test (`solve_step`) has an absolute floor and counts the rounding of either
branch of the quotient below, and it reads only the state's own values, so a state near
a learned equilibrium converges and its verdict is the same batched and alone.

The quotient's numerator $H(y) - H(x) - \nabla H(\bar x)^\top\Delta$ is $O(|\Delta|^3)$
but carries the rounding of the two energies, $\varepsilon(|H(x)| + |H(y)|)$: the
correction's error is $\varepsilon(|H(x)| + |H(y)|)/|\Delta|$ against its size
$O(|\Delta|^2)$. Where
$|\Delta|^2 \le \varepsilon^{2/3}\max\big(1 + |x|^2,\ (|H(x)| + |H(y)|)^{2/3}\big)$ the
correction term is therefore dropped: it would be dominated by rounding, and the balance
it restores is below round-off. The energy's scale matters: a learned energy may carry a
large constant (it changes no dynamics), and near an equilibrium, where $|\Delta|$ is
small, its rounding would otherwise swamp the gradient.
"""

from __future__ import annotations

import abc
from functools import partial
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax

__all__ = [
    "FORCING_NAMES",
    "MAX_ITERATIONS",
    "AbstractForcing",
    "NoForcing",
    "StateTimeForcing",
    "TimeForcing",
    "correction_cutoff",
    "discrete_gradient",
    "forcing_named",
    "rounding_level",
    "solve_step",
]

#: The most Newton iterations of one discrete-gradient step.
MAX_ITERATIONS = 50
#: How far above the estimated rounding level of the field Newton's changes may settle.
_SAFETY = 16.0


class AbstractForcing(eqx.Module):
    """What the learned external force of a port-Hamiltonian network depends on (an
    option chosen once; no fields). `name` is the constructor's spelling; `carries_time`
    says whether the model's state carries the time as its last component."""

    name: eqx.AbstractClassVar[str | None]
    carries_time: eqx.AbstractClassVar[bool]

    @abc.abstractmethod
    def n_inputs(self, n2: int) -> int:
        """The number of inputs of the force network for a phase space of dimension
        `n2` (0: no force)."""

    @abc.abstractmethod
    def inputs(self, x, t):
        """The inputs of the force network at the phase-space point `x` and time `t`."""


class NoForcing(AbstractForcing):
    """No external force: $F = 0$ and the state is the phase-space point."""

    name: ClassVar[None] = None
    carries_time: ClassVar[bool] = False

    def n_inputs(self, n2: int) -> int:
        return 0

    def inputs(self, x, t):
        return x[:0]


class TimeForcing(AbstractForcing):
    r"""A learned force of the time alone, $F_\theta(t) = (0, f_\theta(t))$."""

    name: ClassVar[str] = "time"
    carries_time: ClassVar[bool] = True

    def n_inputs(self, n2: int) -> int:
        return 1

    def inputs(self, x, t):
        return jnp.reshape(t, (1,)).astype(x.dtype)


class StateTimeForcing(AbstractForcing):
    r"""A learned force of the state and the time, $F_\theta(x, t) = (0, f_\theta(x, t))$."""

    name: ClassVar[str] = "state-time"
    carries_time: ClassVar[bool] = True

    def n_inputs(self, n2: int) -> int:
        return n2 + 1

    def inputs(self, x, t):
        return jnp.concatenate([x, jnp.reshape(t, (1,)).astype(x.dtype)])


_BY_NAME = {f.name: f for f in (NoForcing(), TimeForcing(), StateTimeForcing())}

#: The spellings of the forcing option.
FORCING_NAMES = tuple(_BY_NAME)


def forcing_named(forcing) -> AbstractForcing:
    """The forcing option `forcing` (an `AbstractForcing`, `None`, `"time"` or
    `"state-time"`); `ValueError` naming the known ones otherwise."""
    if isinstance(forcing, AbstractForcing):
        return forcing
    try:
        return _BY_NAME[forcing]
    except (KeyError, TypeError):
        raise ValueError(f"forcing must be one of {FORCING_NAMES}, got {forcing!r}") from None


def discrete_gradient(energy, x, y):
    r"""Gonzalez's discrete gradient $\bar\nabla H(x, y)$ of the scalar function `energy`
    (see the module documentation); `x`, `y` of one shape `(d,)`."""
    d = y - x
    g = jax.grad(energy)(0.5 * (x + y))
    dd = d @ d
    hx, hy = energy(x), energy(y)
    small = dd <= correction_cutoff(x, hx, hy)
    safe = jnp.where(small, jnp.ones_like(dd), dd)
    corr = jnp.where(small, jnp.zeros_like(dd), (hy - hx - g @ d) / safe)
    return g + corr * d


def correction_cutoff(x, hx, hy):
    r"""$\varepsilon^{2/3}\max\big(1 + |x|^2, (|H(x)| + |H(y)|)^{2/3}\big)$: the squared
    step below which the discrete gradient drops its correction term (module
    documentation); `hx`, `hy` the energies at the two points."""
    eps = jnp.finfo(x.dtype).eps
    scale = jnp.maximum(1.0 + x @ x, (jnp.abs(hx) + jnp.abs(hy)) ** (2.0 / 3.0))
    return eps ** (2.0 / 3.0) * lax.stop_gradient(scale)


def rounding_level(x, y, hx, hy, gradient_terms, matrix_norm):
    r"""The size of the rounding in the averaged field $(\mathbb{J} - R)\bar\nabla H$
    at `y` from `x`, for either branch of the discrete gradient: $\|\mathbb{J} - R\|\,
    \varepsilon\,\big(G + (|H(x)| + |H(y)|)/\max(|\Delta|, \sqrt{c})\big)$ where
    $|\Delta|^2 > c/16$, $c$ the `correction_cutoff`, and $\|\mathbb{J} - R\|\,
    \varepsilon\,G$ below, with $G$ the largest of `gradient_terms` (the size of the terms
    whose sum is $\nabla H(\bar x)$). The energies' term is the rounding of the kept
    correction, and near the cut-off also the size of the jump between the branches, which
    Newton's iterates may cross: it is counted within a factor 4 of the cut-off, not only
    above it. The floor below which Newton's changes are noise."""
    eps = jnp.finfo(x.dtype).eps
    d = y - x
    dd = d @ d
    cutoff = correction_cutoff(x, hx, hy)
    near = dd > cutoff / 16.0
    dist = jnp.sqrt(jnp.maximum(dd, cutoff))
    energies = jnp.where(near, (jnp.abs(hx) + jnp.abs(hy)) / dist, jnp.zeros_like(dd))
    return matrix_norm * eps * (jnp.max(jnp.abs(gradient_terms)) + energies)


def _tangent_solve(g, y):
    jac = jax.jacfwd(g)(y)
    return jnp.linalg.solve(jac, y)


def _newton(residual, y0, *, x, level, scale):
    """Newton's iteration `y ← y − G'(y)⁻¹ G(y)` on `G = residual` (a `(d, d)` Jacobian
    by forward mode: `d = 2n` is small), at most `MAX_ITERATIONS`; returns `y` and the
    last change relative to the tolerance `_allowed` at the last iterate (`≤ 1`:
    converged). Unlike a fixed-point iteration it converges for a stiff learned field too.

    It stops at the round-off floor: a change of at most `eps·(|x| + |y|)`, or a change
    within the tolerance that no longer decreases (the rounding of the field, not the
    iteration, then sets its size). Every quantity is the state's own, so the verdict of
    one state never depends on the others of a batch (`vmap` runs the loop until all have
    stopped but freezes each state where its own test stops it)."""
    dtype = y0.dtype
    eps = jnp.asarray(jnp.finfo(dtype).eps, dtype)

    def keep_going(carry):
        y, it, new, old = carry
        at_round_off = new <= eps * (jnp.max(jnp.abs(x)) + jnp.max(jnp.abs(y)))
        settled = at_round_off | ((new >= old) & (new <= _allowed(x, y, level, scale)))
        return (it < MAX_ITERATIONS) & ~settled & jnp.isfinite(new)

    def body(carry):
        y, it, new, _ = carry
        dy = -jnp.linalg.solve(jax.jacfwd(residual)(y), residual(y))
        return y + dy, it + 1, jnp.max(jnp.abs(dy)), new

    start = (y0, jnp.asarray(0, jnp.int32), jnp.asarray(jnp.finfo(dtype).max, dtype),
             jnp.asarray(jnp.inf, dtype))
    y, _, last, _ = lax.while_loop(keep_going, body, start)
    return y, last / _allowed(x, y, level, scale)


def _allowed(x, y, level, scale):
    """The largest Newton change `solve_step` accepts at `y` (see there); `level` is
    `16·h·rounding(y0)`."""
    dtype = y.dtype
    eps = jnp.finfo(dtype).eps
    size = jnp.max(jnp.abs(x)) + jnp.max(jnp.abs(y)) + jnp.asarray(scale, dtype)
    floor = eps ** (2.0 / 3.0) * size + eps * jnp.max(jnp.abs(y - x)) + level
    return jnp.maximum(floor, jnp.finfo(dtype).tiny)


def solve_step(averaged_field, x, h, rounding=None, *, scale=1.0):
    r"""Solve $y = x + h\,\bar f(x, y)$ for `y` by Newton's method (`averaged_field(y)` is
    $\bar f(x, y)$, closing over `x`); returns `(y, converged)`.

    Newton's last change $\delta$ counts as converged when
    $$|\delta|_\infty \le \varepsilon^{2/3}\big(|x|_\infty + |y|_\infty + s\big)
      + \varepsilon\,|y - x|_\infty + 16\,h\,\rho(y_0),$$
    with $s$ = `scale` (the state's typical size; an absolute floor, so that a state
    near zero, e.g. near a learned equilibrium, is not judged against its own tiny size),
    $\varepsilon|y - x| = \varepsilon h|\bar f|$ the rounding of the field's value, and
    $\rho$ = `rounding` (e.g. `rounding_level`, which holds for both branches of the
    discrete gradient; omitted when `None`) the rounding in $\bar f(x, \cdot)$ at the
    first iterate $y_0 = x + h\bar f(x, x)$. The test reads only this state's values:
    batched and alone, a state gets the same verdict. `scale=0` without `rounding` is the
    relative test alone."""
    def residual(y):
        return y - x - h * averaged_field(y)

    y0 = x + h * averaged_field(x)
    level = jnp.zeros((), x.dtype) if rounding is None else _SAFETY * h * rounding(y0)
    solve = partial(_newton, x=lax.stop_gradient(x), level=lax.stop_gradient(level),
                    scale=scale)
    y, last = lax.custom_root(residual, y0, solve, _tangent_solve, has_aux=True)
    converged = lax.stop_gradient(last) <= 1
    return y, converged
