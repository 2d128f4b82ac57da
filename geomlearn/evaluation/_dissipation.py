r"""How well a model of a damped or driven system keeps its energy budget.

For a port-Hamiltonian system (`geomlearn.systems.AbstractPortHamiltonianSystem`) with
stored energy $H$ and exact rate $\dot H = -\nabla H^\top R\nabla H + \nabla H^\top F$,
`dissipation_metrics` compares a model's rollout with the reference:

- **learned damping**: what the model says its damping is (`model.learned_damping()`:
  the rate $\gamma$ of a `ConformalSympNet`, the spectrum of $R_\theta$ of a
  `PortHamiltonianNN`) against the system's (`system.learned_damping_reference()`),
  with the relative error $|\hat\gamma - \gamma|/\gamma$, or
  $\max_i|\hat\lambda_i - \lambda_i| / \max_i|\lambda_i|$ for the spectra;
- **energy error**: $\max_{t,i} |H(\hat z^i_t) - H(z^i_t)| / \max_i |H(z^i_0)|$;
- **energy-balance residual** of a trajectory against the system's exact rate, by the
  trapezoidal rule: $\max_n |H_{n+1} - H_n - \tfrac h2(\dot H_n + \dot H_{n+1})| /
  \max_i |H(z^i_0)|$, for the model's rollout and for the reference (whose value is the
  quadrature error, the floor a perfect model reaches);
- the **energy series** (the mean over trajectories of $H$ along the reference and the
  rollout), which the report plots against time.
"""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np

__all__ = ["dissipation_metrics"]


@eqx.filter_jit
def _energies(system, states):
    H = jax.vmap(jax.vmap(system.hamiltonian))(states)
    rate = jax.vmap(jax.vmap(system.energy_rate))(states)
    return H, rate


def _compare(learned: dict, true: dict) -> dict:
    out = {}
    for name, value in learned.items():
        if name not in true:
            continue
        v, t = np.atleast_1d(np.asarray(value, np.float64)), np.atleast_1d(np.asarray(true[name], np.float64))
        scale = float(np.max(np.abs(t))) or 1.0
        out[name] = {"model": value, "true": true[name],
                     "relative_error": float(np.max(np.abs(v - t)) / scale)}
    return out


def _balance_residual(H, rate, dt, scale) -> float:
    r = H[:, 1:] - H[:, :-1] - 0.5 * dt * (rate[:, 1:] + rate[:, :-1])
    return float(np.max(np.abs(r)) / scale)


def dissipation_metrics(model, system, rollout, reference, dt: float) -> tuple[dict, dict]:
    """`(metrics, series)` of a model's rollout `(B, N, d)` of a port-Hamiltonian `system`
    against the `reference` states `(B, N, d)` with time step `dt` (see the module
    documentation). `metrics` is JSON-able: `learned_damping`, `energy_error`,
    `energy_balance_residual` (`{"model", "reference"}`); `series` holds `t`,
    `reference` and `model`, the mean energies over the trajectories."""
    H_model, rate_model = (np.asarray(a, np.float64) for a in _energies(system, rollout))
    H_ref, rate_ref = (np.asarray(a, np.float64) for a in _energies(system, reference))
    scale = float(np.max(np.abs(H_ref[:, 0]))) or 1.0
    metrics = {
        "learned_damping": _compare(model.learned_damping(), system.learned_damping_reference()),
        "energy_error": float(np.max(np.abs(H_model - H_ref)) / scale),
        "energy_balance_residual": {
            "model": _balance_residual(H_model, rate_model, dt, scale),
            "reference": _balance_residual(H_ref, rate_ref, dt, scale)},
    }
    series = {"t": dt * np.arange(H_ref.shape[1]), "reference": H_ref.mean(axis=0),
              "model": H_model.mean(axis=0)}
    return metrics, series
