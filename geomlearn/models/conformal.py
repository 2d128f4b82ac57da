r"""Conformally symplectic networks: learned integrators of linearly damped Hamiltonian
systems whose every step contracts the symplectic form by exactly the same factor.

A Hamiltonian system with linear friction, $\dot q = \partial_p H$,
$\dot p = -\partial_q H - \gamma p$, has a **conformally symplectic** flow: its
Jacobian satisfies $D\varphi_t^\top \mathbb{J} D\varphi_t = e^{-\gamma t}\mathbb{J}$
(McLachlan and Perlmutter, *Conformal Hamiltonian systems*, J. Geom. Phys. 39, 2001).
Phase-space areas shrink at the one rate $\gamma$ everywhere, and the flow splits
exactly into a symplectic part and the damping $D_t(q, p) = (q, e^{-\gamma t} p)$
(Bhatt, Floyd and Moore, *Second order conformal symplectic schemes for damped
Hamiltonian systems*, J. Sci. Comput. 66, 2016). A conservative network cannot
represent such a map; `ConformalSympNet` composes the damping with a SympNet. Every
conformally symplectic map of factor $c$ is $D \circ S$ with $S$ symplectic, so the
network is as expressive for damped systems as the G-SympNet is for conservative ones;
the splitting $D_{\tau/2} S D_{\tau/2}$ (Strang) makes $S$ approximate the flow of the
conservative part to second order. The command line sets `dt` from the data.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._activations import resolve_activation
from .._nn import check_point
from .._typing import Array, Float, PRNGKeyArray
from .._validation import check_even, check_int, check_stored_dt, float_dtype, step_size
from ..geometry import (
    conformal_symplecticity_residual,
    jacobian,
    symplecticity_residual,
    volume_residual,
)
from ..layers.sympnet import GradientLayerP, GradientLayerQ
from ._integrators import AbstractFeedForwardIntegrator, AbstractMapCheck, model_map_description
from ._stack import alternate

__all__ = ["INITIAL_DAMPING", "ConformalCheck", "ConformalSympNet"]

#: The damping rate a `ConformalSympNet` with learned damping starts from.
INITIAL_DAMPING = 0.05


def _softplus_inverse(y: float) -> float:
    return math.log(math.expm1(y))


def _check_damping(damping):
    """`None` for a learned rate, else the given rate as a float `≥ 0`."""
    if isinstance(damping, str):
        if damping.strip().lower() != "learned":
            raise ValueError(f"damping must be 'learned' or a number >= 0, got {damping!r}")
        return None
    if isinstance(damping, bool) or not isinstance(damping, (int, float)):
        raise TypeError(f"damping must be 'learned' or a number >= 0, got {damping!r}")
    if not (math.isfinite(damping) and damping >= 0):
        raise ValueError(f"a given damping must be a finite number >= 0, got {damping!r}")
    return float(damping)


class ConformalCheck(AbstractMapCheck):
    r"""The check of a conformally symplectic map with the model's own factor
    $c$ (`model.conformal_factor`), `ConformalSympNet.map_check`."""

    def residuals(self, model, points) -> dict:
        r"""`{"conformal_symplecticity", "symplecticity", "volume", "condition"}`, each the
        maximum over `points`: the conformal residual with the model's own factor $c$
        (claimed), the plain symplecticity and volume residuals (not claimed: they are
        $|1 - c|$ and $|1 - c^n|$ for an exact map) and the Jacobian's condition number."""
        c = model.conformal_factor(dtype=points.dtype)

        def one(z):
            return {"conformal_symplecticity": conformal_symplecticity_residual(model, z, c),
                    "symplecticity": symplecticity_residual(model, z),
                    "volume": volume_residual(model, z),
                    "condition": jnp.linalg.cond(jacobian(model, z))}

        values = jax.jit(jax.vmap(one))(points)
        return {k: float(np.max(np.asarray(v, np.float64))) for k, v in values.items()}

    def describe(self, model) -> str:
        gamma = float(model.damping_rate(jnp.float64 if jax.config.jax_enable_x64 else None))
        tau = 1.0 if model.dt is None else model.dt
        return (f"{model_map_description(model)} = D ∘ S ∘ D, conformally symplectic "
                f"with factor c = exp(-γ·dt) = {math.exp(-gamma * tau):.6g} "
                f"(γ = {gamma:.6g}, dt = {tau:g})")


class ConformalSympNet(AbstractFeedForwardIntegrator):
    r"""A conformally symplectic network: a G-SympNet between two half damping steps,

    $$\Phi_\theta = D_{\tau/2} \circ S_\theta \circ D_{\tau/2}, \qquad
      D_s(q, p) = (q,\ e^{-\gamma s} p),$$

    with $S_\theta$ a composition of `n_layers` gradient layers
    ([`GradientLayerQ`][geomlearn.layers.GradientLayerQ],
    [`GradientLayerP`][geomlearn.layers.GradientLayerP], alternating; symplectic for
    every parameter value) and $\tau$ the time step of one application. Since
    $DD_s^\top \mathbb{J}\,DD_s = e^{-\gamma s}\mathbb{J}$ and $S_\theta$ is symplectic,

    $$D\Phi_\theta(z)^\top\, \mathbb{J}\, D\Phi_\theta(z) = e^{-\gamma\tau}\,\mathbb{J}
      \quad\text{for every } z \text{ and every parameter value,}$$

    the identity the structure `"conformal-symplectic"` claims and `geomlearn check`
    tests (with the factor $c = e^{-\gamma\tau}$ named in its report).

    **The damping rate** $\gamma \ge 0$ is learned, $\gamma = \operatorname{softplus}
    (\rho)$ with one trainable scalar $\rho$ (starting at $\gamma$ = `INITIAL_DAMPING`),
    or given and fixed. It is in units of the inverse of `dt`: `damping_rate()` is
    $\gamma$, `conformal_factor()` is $c$.

    **Arguments:**

    - `dim`: the phase-space dimension `2n` (even); `key`: a JAX PRNG key (keyword-only).
    - `n_layers`: the number of gradient layers `≥ 1`; `width`: their hidden width `≥ 1`.
    - `damping`: `"learned"` (default) or a rate $\gamma \ge 0$.
    - `dt`: the time step $\tau$ of one application in the units of $\gamma$; `None`
      (default) means $\tau = 1$ ($\gamma$ per step). A call with a step size `h` uses
      $\tau = h$ and scales the layers by `h` (as the extended SympNets).
    - `activation`: a callable or a name (default `jnp.tanh`); `dtype`: the parameter dtype.

    **Call:** `model(z, h=None)` on one point `(dim,)`; returns its shape and dtype.

    ```python
    model = ConformalSympNet(2, n_layers=4, width=16, key=jax.random.PRNGKey(0), dt=0.1)
    z1 = model(jnp.array([1.0, 0.0]))
    model.damping_rate(), model.conformal_factor()
    ```
    """

    structure: ClassVar[str] = "conformal-symplectic"
    map_check: ClassVar[AbstractMapCheck] = ConformalCheck()

    layers: tuple[GradientLayerQ | GradientLayerP, ...]
    raw_damping: Float[Array, ""] | None
    dim: int = eqx.field(static=True)
    n_layers: int = eqx.field(static=True)
    width: int = eqx.field(static=True)
    damping: str | float = eqx.field(static=True)
    dt: float | None = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)

    def __init__(self, dim: int, *, n_layers: int, width: int, key: PRNGKeyArray,
                 damping: str | float = "learned", dt: float | None = None,
                 activation: Callable | str = jnp.tanh, dtype=None):
        self.dim = check_even("dim", dim)
        self.n_layers = check_int("n_layers", n_layers, minimum=1)
        self.width = check_int("width", width, minimum=1)
        given = _check_damping(damping)
        self.damping = "learned" if given is None else given
        self.dt = check_stored_dt(dt)
        resolve_activation(activation)
        self.activation = activation
        dtype = float_dtype(dtype)
        keys = jax.random.split(key, self.n_layers)
        self.layers = tuple(
            alternate(GradientLayerQ, GradientLayerP, i, True)(
                self.dim, self.width, activation, key=k, dtype=dtype)
            for i, k in enumerate(keys))
        self.raw_damping = (jnp.asarray(_softplus_inverse(INITIAL_DAMPING), dtype)
                            if given is None else None)

    def with_dt(self, dt: float | None) -> ConformalSympNet:
        """A copy whose one application is the time step `dt` (see `dt`)."""
        new = copy.copy(self)
        object.__setattr__(new, "dt", check_stored_dt(dt))
        return new

    def damping_rate(self, dtype=None) -> Float[Array, ""]:
        r"""The damping rate $\gamma \ge 0$ (per unit of `dt`)."""
        if self.raw_damping is None:
            return jnp.asarray(self.damping, float_dtype(dtype))
        raw = self.raw_damping if dtype is None else self.raw_damping.astype(dtype)
        return jax.nn.softplus(raw)

    def learned_damping(self) -> dict:
        r"""`{"rate": γ}`, the learned (or given) damping rate as a Python float."""
        if self.raw_damping is None:
            return {"rate": float(self.damping)}
        return {"rate": float(self.damping_rate(self.raw_damping.dtype))}

    def _time_step(self, h, dtype):
        h = step_size(h, dtype)
        if h is not None:
            return h
        return jnp.asarray(1.0 if self.dt is None else self.dt, dtype)

    def conformal_factor(self, h=None, dtype=None) -> Float[Array, ""]:
        r"""The factor $c = e^{-\gamma\tau}$ of $D\Phi^\top\mathbb{J}D\Phi = c\,\mathbb{J}$
        ($\tau$ = `h`, else `dt`, else 1)."""
        dtype = float_dtype(dtype)
        return jnp.exp(-self.damping_rate(dtype) * self._time_step(h, dtype))

    def __call__(self, z: Float[Array, " dim"], h=None) -> Float[Array, " dim"]:
        check_point(type(self).__name__, z, self.dim)
        n = self.dim // 2
        half = jnp.exp(-0.5 * self.damping_rate(z.dtype) * self._time_step(h, z.dtype))
        scale = jnp.concatenate([jnp.ones((n,), z.dtype), jnp.broadcast_to(half, (n,))])
        hs = step_size(h, z.dtype)
        z = scale * z
        for layer in self.layers:
            z = layer(z, hs)
        return scale * z
