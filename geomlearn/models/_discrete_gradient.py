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

Where $|\Delta|^2 \le \varepsilon^{2/3}(1 + |x|^2)$ the correction term is dropped: its
quotient would then be dominated by rounding, and the balance it restores is of size
$|\Delta|^3$, below round-off.
"""

from __future__ import annotations

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
    "discrete_gradient",
    "forcing_named",
    "solve_step",
]

#: The most Newton iterations of one discrete-gradient step.
MAX_ITERATIONS = 50


class AbstractForcing(eqx.Module):
    """What the learned external force of a port-Hamiltonian network depends on (an
    option chosen once; no fields). `name` is the constructor's spelling; `carries_time`
    says whether the model's state carries the time as its last component."""

    name: eqx.AbstractClassVar[str | None]
    carries_time: eqx.AbstractClassVar[bool]

    def n_inputs(self, n2: int) -> int:
        """The number of inputs of the force network for a phase space of dimension
        `n2` (0: no force)."""
        return 0

    def inputs(self, x, t):
        """The inputs of the force network at the phase-space point `x` and time `t`."""
        raise NotImplementedError


class NoForcing(AbstractForcing):
    """No external force: $F = 0$ and the state is the phase-space point."""

    name: ClassVar[None] = None
    carries_time: ClassVar[bool] = False


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
    eps = jnp.finfo(x.dtype).eps
    small = dd <= eps ** (2.0 / 3.0) * (1.0 + x @ x)
    safe = jnp.where(small, jnp.ones_like(dd), dd)
    corr = jnp.where(small, jnp.zeros_like(dd), (energy(y) - energy(x) - g @ d) / safe)
    return g + corr * d


def _tangent_solve(g, y):
    jac = jax.jacfwd(g)(y)
    return jnp.linalg.solve(jac, y)


def _newton(residual, y0, *, scale):
    """Newton's iteration `y ← y − G'(y)⁻¹ G(y)` on `G = residual` (a `(d, d)` Jacobian
    by forward mode: `d = 2n` is small) down to the round-off floor (at most
    `MAX_ITERATIONS`); returns `y` and the last relative change. Unlike a fixed-point
    iteration it converges for a stiff learned field too.

    It stops when a change is at most `eps`, or when the changes stop decreasing at a
    level of at most `eps^(2/3)`: the rounding in the discrete gradient's quotient (of
    size `eps·|H| / |y − x|`) sets that floor for steps that barely move. The balance
    then holds to that rounding, which is what `energy_balance_residual` reports."""
    dtype = y0.dtype
    eps = jnp.asarray(jnp.finfo(dtype).eps, dtype)
    tiny = jnp.asarray(jnp.finfo(dtype).tiny, dtype)

    floor = eps ** (2.0 / 3.0)

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


def solve_step(averaged_field, x, h):
    r"""Solve $y = x + h\,\bar f(x, y)$ for `y` (`averaged_field(y)` is $\bar f(x, y)$,
    closing over `x`); returns `(y, converged)`."""
    def residual(y):
        return y - x - h * averaged_field(y)

    y0 = x + h * averaged_field(x)
    scale = lax.stop_gradient(jnp.max(jnp.abs(x)))
    solve = lambda g, y: _newton(g, y, scale=scale)
    y, last = lax.custom_root(residual, y0, solve, _tangent_solve, has_aux=True)
    converged = lax.stop_gradient(last) <= jnp.finfo(x.dtype).eps ** (2.0 / 3.0)
    return y, converged
