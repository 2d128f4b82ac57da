r"""Reference trajectories accurate to a stated tolerance at the sampling step.

A network trained on one-step pairs $(z_k, z_{k+1})$ learns whatever map produced them.
If the data come from a low-order method at the sampling step $\Delta t$ it learns that
method, not the flow $\varphi_{\Delta t}$. `reference_data` integrates with a high-order
method and `s` substeps of size $\Delta t / s$, in float64, and checks the result: for
every sampled state $z_k$ the one-step map $\Phi_s$ is compared with $\Phi_{2s}$ (half
the substep). For a method of order $p$,
$\Phi_s - \varphi_{\Delta t} \approx \frac{2^p}{2^p - 1}(\Phi_s - \Phi_{2s})$, so

$$\varepsilon = \frac{2^p}{2^p - 1}\,\max_k
\frac{\lVert \Phi_s(z_k) - \Phi_{2s}(z_k) \rVert_\infty}{\lVert \Phi_{2s}(z_k) \rVert_\infty}$$

estimates the largest relative error of a stored step (`one_step_error`). While
$\varepsilon$ exceeds the tolerance, `s` is doubled.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._typing import Array, Float, PRNGKeyArray
from .._validation import check_int, float_dtype
from ..data import TrajectoryData
from ..integrators import as_integrator, integrate

__all__ = ["reference_data", "one_step_error", "numpy_rng", "REFERENCE_TOLERANCE", "MAX_SUBSTEPS"]

#: The relative one-step accuracy of the reference data of `geomlearn.datasets`.
REFERENCE_TOLERANCE = 1e-8
#: The most substeps `reference_data` tries before giving up.
MAX_SUBSTEPS = 4096


def one_step_error(system, states: Float[Array, "N T d"], dt: float, *, method,
                   substeps: int) -> float:
    r"""The estimated relative error $\varepsilon$ of the steps of `states` (see the module
    docstring): `states[:, k + 1]` is taken as $\Phi_s$ (`substeps` = $s$) from
    `states[:, k]` and compared with $\Phi_{2s}$, computed here.

    **Arguments:** `system`; `states` `(N, T, d)` (for the accuracy claim, float64);
    `dt`; `method` (an integrator or its name; its `order` is $p$); `substeps` $s$.

    **Returns:** $\varepsilon$, a Python float.
    """
    integrator = as_integrator(method)
    states = jnp.asarray(states)
    d = states.shape[-1]
    start = states[:, :-1].reshape(-1, d)
    fine = integrate(system, start, dt, 1, method=integrator, substeps=2 * substeps)[:, -1]
    coarse = states[:, 1:].reshape(-1, d)
    diff = np.max(np.abs(np.asarray(coarse - fine)), axis=-1)
    size = np.max(np.abs(np.asarray(fine)), axis=-1)
    relative = np.where(size > 0, diff / np.where(size > 0, size, 1.0), diff)
    factor = 2.0**integrator.order / (2.0**integrator.order - 1.0)
    return float(factor * relative.max())


def reference_data(system, initial_conditions: Float[Array, "B d"], dt: float, n_steps: int,
                   *, method, substeps: int = 1, tol: float = REFERENCE_TOLERANCE,
                   dtype=None) -> tuple[TrajectoryData, int, float]:
    r"""Trajectories of `system` whose every stored step is accurate to `tol` (relative).

    Integrates in float64 (JAX's 64-bit mode is switched on for the computation only)
    with `method` and `substeps` substeps per step, estimates the one-step error
    $\varepsilon$ (`one_step_error`) and doubles the substeps until $\varepsilon \le$
    `tol`; the states are then cast to `dtype`.

    **Arguments:**

    - `system`, `initial_conditions` `(B, d)`, `dt`, `n_steps`, `method`: as for
      `geomlearn.integrators.integrate`.
    - `substeps`: the first number of substeps tried (`≥ 1`).
    - `tol`: the relative one-step accuracy to reach (default `REFERENCE_TOLERANCE`).
    - `dtype`: the dtype of the returned states (default JAX's default float).

    **Returns:** `(data, substeps, error)`: the `TrajectoryData`, the substeps used and
    their estimated error $\varepsilon$ (computed in float64).

    **Raises:** `ValueError` when `MAX_SUBSTEPS` substeps do not reach `tol`.
    """
    dtype = float_dtype(dtype)
    s = check_int("substeps", substeps, minimum=1)
    n_steps = check_int("n_steps", n_steps, minimum=1)
    with jax.enable_x64(True):
        z0 = jnp.asarray(np.asarray(initial_conditions, dtype=np.float64))
        while True:
            states = integrate(system, z0, dt, n_steps, method=method, substeps=s)
            error = one_step_error(system, states, dt, method=method, substeps=s)
            if error <= tol or 2 * s > MAX_SUBSTEPS:
                break
            s *= 2
        states = np.asarray(states)
    if error > tol:
        raise ValueError(f"{type(system).__name__}: {s} substeps of {as_integrator(method).name} "
                         f"reach a one-step error of {error:.2g}, not {tol:g}; use a smaller dt")
    labels = tuple(system.labels)
    data = TrajectoryData(states.astype(dtype), dt,
                          labels=labels if len(labels) == states.shape[-1] else None)
    return data, s, error


def numpy_rng(key: PRNGKeyArray) -> np.random.Generator:
    """A NumPy generator seeded by the key's bits: the recipes draw their initial states
    with it."""
    return np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel().tolist())
