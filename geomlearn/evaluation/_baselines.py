r"""What a model's errors are measured against: the identity map and one classical step.

- The **identity map** (the do-nothing map) keeps the given states and then repeats the
  last one: $\hat z_t = z_0$ for every $t$ for a model that starts from one state (a
  transformer's window keeps its $T$ given states, then repeats the last). Its
  trajectory error, the same figure as the model's, is what a model must clearly beat
  to have learned anything of the flow.
- **One classical step** at the data's time step $h$ from every data state $z_i$
  against the next data state:
  $\sqrt{\sum_i \|\Phi_h(z_i) - z_{i+1}\|^2 / \sum_i \|z_{i+1}\|^2}$ over all pairs of
  consecutive states, with $\Phi_h$ the Störmer–Verlet method for a separable system
  and the implicit midpoint rule otherwise (`geomlearn.integrators`): what a textbook
  integrator of the known system achieves at this step.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..integrators import AbstractIntegrator, ImplicitMidpoint, StormerVerlet
from ..systems import AbstractSeparableSystem

__all__ = ["identity_rollout", "classical_method", "classical_step_error"]


def identity_rollout(states, n_init: int = 1) -> np.ndarray:
    """The identity map's rollout along the reference `states` `(B, N, d)`: the first
    `n_init` states as given, then the last of them repeated."""
    states = np.asarray(states)
    rollout = states.copy()
    rollout[:, n_init:] = states[:, n_init - 1 : n_init]
    return rollout


def classical_method(system) -> AbstractIntegrator:
    """Störmer–Verlet for a separable canonical system, else the implicit midpoint rule."""
    if system.separable and isinstance(system, AbstractSeparableSystem):
        return StormerVerlet()
    return ImplicitMidpoint()


@eqx.filter_jit
def _steps(system, method, z, h):
    """One step of `method` from every state `z` `(M, d)`: `(next states, converged)`."""
    return jax.vmap(lambda x: method.step(system, x, h))(z)


def classical_step_error(system, states, dt) -> float | None:
    """The relative error of one classical step (see the module documentation) over the
    consecutive states of `states` `(B, N, d)`; `None` without a system or a time step,
    or when a step is not finite or its solve did not converge."""
    if system is None or dt is None:
        return None
    states = np.asarray(states)
    d = states.shape[-1]
    here, after = states[:, :-1].reshape(-1, d), states[:, 1:].reshape(-1, d)
    stepped, converged = _steps(system, classical_method(system), jnp.asarray(here),
                                jnp.asarray(dt, here.dtype))
    stepped = np.asarray(stepped, dtype=np.float64)
    if not (np.all(np.asarray(converged)) and np.all(np.isfinite(stepped))):
        return None
    after = np.asarray(after, dtype=np.float64)
    size = np.sum(after**2)
    return float(np.sqrt(np.sum((stepped - after) ** 2) / size)) if size > 0 else None
