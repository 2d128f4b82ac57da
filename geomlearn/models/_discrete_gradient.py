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
implicit function theorem (`jax.lax.custom_root`), not from the iterations.

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
#: How far above the estimated rounding level Newton's changes may settle.
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
    at `y` from `x`: $\|\mathbb{J} - R\|\,\varepsilon\,\big(G + (|H(x)| +
    |H(y)|)/|\Delta|\big)$ where the correction term is kept ($|\Delta|^2$ above
    `correction_cutoff`), $\|\mathbb{J} - R\|\,\varepsilon\,G$ where it is dropped,
    with $G$ the largest of `gradient_terms` (the size of the terms whose sum is
    $\nabla H(\bar x)$): the floor below which Newton's changes are noise."""
    eps = jnp.finfo(x.dtype).eps
    d = y - x
    dd = d @ d
    kept = dd > correction_cutoff(x, hx, hy)
    dist = jnp.sqrt(jnp.where(kept, dd, jnp.ones_like(dd)))
    energies = jnp.where(kept, (jnp.abs(hx) + jnp.abs(hy)) / dist, jnp.zeros_like(dd))
    return matrix_norm * eps * (jnp.max(jnp.abs(gradient_terms)) + energies)


def _tangent_solve(g, y):
    jac = jax.jacfwd(g)(y)
    return jnp.linalg.solve(jac, y)


def _newton(residual, y0, *, scale, floor):
    """Newton's iteration `y ← y − G'(y)⁻¹ G(y)` on `G = residual` (a `(d, d)` Jacobian
    by forward mode: `d = 2n` is small) down to the round-off floor (at most
    `MAX_ITERATIONS`); returns `y` and the last relative change. Unlike a fixed-point
    iteration it converges for a stiff learned field too.

    It stops when a change is at most `eps`, or when the changes stop decreasing at a
    level of at most `floor` (`eps^(2/3)`, or the rounding level `solve_step` is given):
    the rounding in the discrete gradient's quotient (of size `eps·|H| / |y − x|`) sets
    that floor for steps that barely move. The balance then holds to that rounding,
    which is what `energy_balance_residual` reports."""
    dtype = y0.dtype
    eps = jnp.asarray(jnp.finfo(dtype).eps, dtype)
    tiny = jnp.asarray(jnp.finfo(dtype).tiny, dtype)

    def keep_going(carry):
        _, it, new, old = carry
        settled = (new <= eps) | ((new >= old) & (new <= floor))
        return (it < MAX_ITERATIONS) & ~settled & jnp.isfinite(new)

    def body(carry):
        y, it, new, _ = carry
        dy = -jnp.linalg.solve(jax.jacfwd(residual)(y), residual(y))
        y = y + dy
        change = jnp.max(jnp.abs(dy)) / (scale + jnp.max(jnp.abs(y)) + tiny)
        return y, it + 1, change, new

    start = (y0, jnp.asarray(0, jnp.int32), jnp.asarray(jnp.finfo(dtype).max, dtype),
             jnp.asarray(jnp.inf, dtype))
    y, _, last, _ = lax.while_loop(keep_going, body, start)
    return y, last


def solve_step(averaged_field, x, h, rounding=None):
    r"""Solve $y = x + h\,\bar f(x, y)$ for `y` (`averaged_field(y)` is $\bar f(x, y)$,
    closing over `x`); returns `(y, converged)`.

    `rounding(y)`, if given, is the size of the rounding in $\bar f(x, y)$ (e.g.
    `rounding_level`): Newton's changes then settle, and count as converged, down to
    the level $h \cdot$ `rounding(y0)` it causes in `y` (relative), as well as to
    $\varepsilon^{2/3}$."""
    def residual(y):
        return y - x - h * averaged_field(y)

    y0 = x + h * averaged_field(x)
    scale = lax.stop_gradient(jnp.max(jnp.abs(x)))
    floor = jnp.asarray(jnp.finfo(x.dtype).eps ** (2.0 / 3.0), x.dtype)
    if rounding is not None:
        size = scale + jnp.max(jnp.abs(y0)) + jnp.finfo(x.dtype).tiny
        floor = jnp.maximum(floor, lax.stop_gradient(_SAFETY * h * rounding(y0) / size))
    solve = lambda g, y: _newton(g, y, scale=scale, floor=floor)
    y, last = lax.custom_root(residual, y0, solve, _tangent_solve, has_aux=True)
    converged = lax.stop_gradient(last) <= floor
    return y, converged
