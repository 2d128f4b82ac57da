r"""The fastest linearised frequency of a separable system: the classical methods'
stability limit.

Linearised at a state $(q, p)$, the equations of $H = T(p) + V(q)$ read
$\delta\ddot q = -\nabla^2 T(p)\,\nabla^2 V(q)\,\delta q$; each eigenvalue
$\omega^2 > 0$ of $\nabla^2 T\,\nabla^2 V$ is an oscillation of frequency $\omega$.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._typing import Array, Float
from .._validation import float_dtype
from ..systems import AbstractSeparableSystem

__all__ = ["fastest_frequency"]


@eqx.filter_jit
def _curvatures(system, z):
    r"""`(smallest eigenvalue of ∇²T, largest of (∇²T)^{1/2} ∇²V (∇²T)^{1/2})` per state."""
    n = system.dim // 2
    kinetic = jax.vmap(jax.hessian(system.kinetic))(z[:, n:])
    potential = jax.vmap(jax.hessian(system.potential))(z[:, :n])
    kinetic = (kinetic + jnp.swapaxes(kinetic, -1, -2)) / 2
    potential = (potential + jnp.swapaxes(potential, -1, -2)) / 2
    lam, u = jnp.linalg.eigh(kinetic)
    root = (u * jnp.sqrt(jnp.maximum(lam, 0.0))[..., None, :]) @ jnp.swapaxes(u, -1, -2)
    product = root @ potential @ root
    product = (product + jnp.swapaxes(product, -1, -2)) / 2
    return lam[..., 0], jnp.abs(lam).max(axis=-1), jnp.linalg.eigvalsh(product)[..., -1]


def fastest_frequency(system: AbstractSeparableSystem, states: Float[Array, "*B d"]) -> float:
    r"""The largest linearised frequency $\omega_{\max}$ of a separable canonical system
    over the given states: the stiffness that limits the explicit methods' step.

    $$\omega_{\max} = \max_{(q, p)} \sqrt{\max\bigl(0,\ \lambda_{\max}(\nabla^2 T(p)\,
    \nabla^2 V(q))\bigr)}.$$

    For $\ddot q = -\omega^2 q$ a step $h$ of Störmer–Verlet is stable iff
    $h\omega < 2$, of RK4 iff $h\omega < 2\sqrt 2$ (its one-step growth factor exceeds 1
    beyond), while implicit midpoint and the Gauss–Legendre methods are stable for
    every $h$ (their step is a rotation). Along a nonlinear trajectory the linearised
    frequency changes from state to state, so $2/\omega_{\max}$ is the step at which
    Störmer–Verlet stays stable at every state given, not a guarantee between them.

    The eigenvalues of $\nabla^2 T\,\nabla^2 V$ are those of the symmetric
    $(\nabla^2 T)^{1/2}\,\nabla^2 V\,(\nabla^2 T)^{1/2}$ when $T$ is convex (every
    $T = \frac12 p^\top M^{-1} p$), which is how they are computed (vmapped
    `jax.hessian`, `eigh`).

    **Arguments:**

    - `system`: an `AbstractSeparableSystem`, $H = T(p) + V(q)$, canonical.
    - `states`: one state `(dim,)` or any batch `(..., dim)`.

    **Returns:** $\omega_{\max}$, a Python float ($0$ when no direction oscillates).

    **Raises:** `ValueError` for a system that is not canonical and separable, states
    of the wrong dimension or none, or a kinetic energy with a negative curvature at
    one of the states.
    """
    if not isinstance(system, AbstractSeparableSystem) or not system.canonical:
        raise ValueError(f"fastest_frequency needs a canonical separable system "
                         f"H = T(p) + V(q), got {type(system).__name__}")
    z = jnp.asarray(states)
    if not jnp.issubdtype(z.dtype, jnp.floating):
        z = z.astype(float_dtype(None))
    if z.ndim < 1 or z.shape[-1] != system.dim or z.size == 0:
        raise ValueError(f"states must have shape (..., {system.dim}) for "
                         f"{type(system).__name__}, got shape {z.shape}")
    smallest, scale, top = (np.asarray(a) for a in _curvatures(system, z.reshape(-1, system.dim)))
    tolerance = np.sqrt(np.finfo(smallest.dtype).eps) * np.maximum(scale, 1.0)
    if (smallest < -tolerance).any():
        raise ValueError(f"{type(system).__name__}: the kinetic energy has a negative "
                         f"curvature at some states; its frequencies are not oscillations")
    return float(np.sqrt(max(0.0, float(top.max()))))
