r"""Evaluation: how good an integrator a trained model is, `evaluate(model, system, reference)`.

The model is rolled out (`geomlearn.iterate`) from the initial state(s) of every
reference trajectory for as many steps as the reference has, and compared with it:

- **trajectory error** at horizons $k$: $\|\hat Z_{0:k} - Z_{0:k}\|_F / \|Z_{0:k}\|_F$ over
  the states up to step $k$ of all trajectories (the relative error of the papers);
- **invariant drift** of each invariant $I$ of the system (energy; the rigid body's
  Casimir): $\max_{t, i} |I(\hat z^i_t) - I(z^i_0)| / \max_i |I(z^i_0)|$, for the model's
  rollouts and, for comparison, for the reference trajectories themselves;
- the **structure residual** of the model at sample points taken from the reference:
  symplecticity $\|M^\top\Omega M - \Omega\|/\|\Omega\|$ (even dimensions) and volume
  $\big||\det M| - 1\big|$ (see `geomlearn.geometry`), the maximum over the points;
- the **speed**: states per second of the compiled model rollout and of the reference
  integrator (`geomlearn.integrators.integrate`) on the same initial states, both timed
  after a warm-up call, in the same process.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from ._validation import check_int
from .geometry import symplecticity_residual, volume_residual
from .rollout import ROLLOUT_MIDPOINT_ITERATIONS, _midpoint_step, _model_kind, iterate

__all__ = ["evaluate"]


def _reference_states(reference, dt):
    """`(states (n_traj, N, d), dt or None)` from a TrajectoryData or an array."""
    if hasattr(reference, "states") and hasattr(reference, "dt"):
        states = jnp.asarray(reference.states)
        ref_dt = float(reference.dt)
        if dt is not None and float(dt) != ref_dt:
            raise ValueError(f"dt={dt} disagrees with the reference data's dt={ref_dt}")
        dt = ref_dt
    else:
        states = jnp.asarray(reference)
        if states.ndim == 2:
            states = states[None]
    if states.ndim != 3:
        raise ValueError(
            "reference must be a TrajectoryData or an array of states (n_steps + 1, d) or "
            f"(n_trajectories, n_steps + 1, d), got shape {states.shape}"
        )
    if not jnp.issubdtype(states.dtype, jnp.floating):
        raise TypeError(f"reference states must be floating-point, got {states.dtype}")
    return states, (None if dt is None else float(dt))


def default_horizons(n_steps: int) -> list[int]:
    """1, 10, 100, … below `n_steps`, and `n_steps` itself."""
    out, k = [], 1
    while k < n_steps:
        out.append(k)
        k *= 10
    out.append(n_steps)
    return out


def _timed(fn):
    jax.block_until_ready(fn())  # warm-up: compile
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    return out, time.perf_counter() - t0


def _evaluate(
    model,
    system,
    reference,
    *,
    dt=None,
    horizons=None,
    prediction_window=None,
    seq_length=None,
    n_structure_points: int = 8,
    method: str = "implicit_midpoint",
    key=None,
):
    """`(metrics, rollout, states, series)`: `evaluate`'s dict, the rollout, the reference
    states and, per invariant, its relative error over time (max over trajectories) along
    the rollout and along the reference."""
    kind = _model_kind(model)
    states, dt = _reference_states(reference, dt)
    n_traj, N, d = states.shape
    if d != model.dim or d != system.dim:
        raise ValueError(
            f"dimensions disagree: model.dim={model.dim}, system.dim={system.dim}, "
            f"reference states have d={d}"
        )
    n_steps = N - 1
    if n_steps < 1:
        raise ValueError("the reference trajectories need at least 2 states")
    horizons = default_horizons(n_steps) if horizons is None else list(horizons)
    for h in horizons:
        check_int("horizon", h, minimum=1)
        if h > n_steps:
            raise ValueError(f"horizon {h} is beyond the reference's {n_steps} steps")
    n_structure_points = check_int("n_structure_points", n_structure_points, minimum=1)

    # --- rollout
    if kind == "transformer":
        T = model.seq_length if model.seq_length is not None else seq_length
        if T is None:
            raise ValueError(
                f"{type(model).__name__} accepts windows of any length; pass seq_length=T "
                "(the window length it was trained on)"
            )
        if T > N:
            raise ValueError(f"the reference has {N} states, fewer than the window length {T}")
        initial = states[:, :T]
        run = lambda: iterate(model, initial, N, prediction_window=prediction_window)  # noqa: E731
    elif kind == "hamiltonian":
        if dt is None:
            raise ValueError("evaluating a Hamiltonian neural network needs dt")
        T = 1
        run = lambda: iterate(model, states[:, 0], N, dt=dt)  # noqa: E731
    else:
        T = 1
        run = lambda: iterate(model, states[:, 0], N)  # noqa: E731
    rollout, model_seconds = _timed(run)

    # --- errors
    diff = np.asarray(rollout - states, dtype=np.float64)
    ref = np.asarray(states, dtype=np.float64)
    err_sq = np.cumsum(np.sum(diff**2, axis=(0, 2)))
    ref_sq = np.cumsum(np.sum(ref**2, axis=(0, 2)))
    trajectory_error = {str(h): float(np.sqrt(err_sq[h] / ref_sq[h])) for h in horizons}

    # --- invariants
    invariants = getattr(system, "invariants", None) or {"energy": system.hamiltonian}
    drift, ref_drift, series = {}, {}, {}
    for name, fn in invariants.items():
        f = jax.jit(jax.vmap(jax.vmap(fn)))
        pred_vals = np.asarray(f(rollout), dtype=np.float64)
        ref_vals = np.asarray(f(states), dtype=np.float64)
        start = ref_vals[:, :1]
        scale = float(np.max(np.abs(start)))
        scale = scale if scale > 0 else 1.0
        series[name] = {
            "model": np.max(np.abs(pred_vals - start), axis=0) / scale,
            "reference": np.max(np.abs(ref_vals - start), axis=0) / scale,
        }
        drift[name] = float(np.max(np.abs(pred_vals - start)) / scale)
        ref_drift[name] = float(np.max(np.abs(ref_vals - start)) / scale)

    # --- structure residuals at sample points of the reference
    key = jax.random.PRNGKey(0) if key is None else key
    k1, k2 = jax.random.split(key)
    n_pts = n_structure_points
    traj_idx = np.asarray(jax.random.randint(k1, (n_pts,), 0, n_traj))
    time_idx = np.asarray(jax.random.randint(k2, (n_pts,), 0, N - T + 1))
    if kind == "transformer":
        points = [states[i, t : t + T] for i, t in zip(traj_idx, time_idx)]
        fmap = model
    elif kind == "hamiltonian":
        points = [states[i, t] for i, t in zip(traj_idx, time_idx)]
        fmap = lambda z: _midpoint_step(model, z, dt, ROLLOUT_MIDPOINT_ITERATIONS)  # noqa: E731
    else:
        points = [states[i, t] for i, t in zip(traj_idx, time_idx)]
        fmap = model
    residuals = {}
    if d % 2 == 0:
        res = jax.jit(lambda z: symplecticity_residual(fmap, z))
        residuals["symplecticity"] = float(max(float(res(z)) for z in points))
    vol = jax.jit(lambda z: volume_residual(fmap, z))
    residuals["volume"] = float(max(float(vol(z)) for z in points))

    # --- reference integrator speed (same initial states, same process)
    reference_rate = None
    if dt is not None:
        from .integrators import integrate

        _, ref_seconds = _timed(
            lambda: integrate(system, states[:, 0], dt, n_steps, method=method)
        )
        reference_rate = n_traj * N / ref_seconds

    metrics = {
        "model": type(model).__name__,
        "system": type(system).__name__,
        "structure": type(model).structure,
        "n_trajectories": int(n_traj),
        "n_steps": int(n_steps),
        "dt": dt,
        "trajectory_error": trajectory_error,
        "invariant_drift": drift,
        "reference_invariant_drift": ref_drift,
        "structure_residual": residuals,
        "rollout_states_per_second": n_traj * N / model_seconds,
        "reference_states_per_second": reference_rate,
        "reference_method": method if dt is not None else None,
    }
    return metrics, rollout, states, series


def evaluate(
    model,
    system,
    reference,
    *,
    dt: float | None = None,
    horizons=None,
    prediction_window: int | None = None,
    seq_length: int | None = None,
    n_structure_points: int = 8,
    method: str = "implicit_midpoint",
    key=None,
) -> dict:
    r"""Measure a trained model against reference trajectories of `system`.

    **Arguments:**

    - `model`: a trained geomlearn model.
    - `system`: the system the reference comes from (a `geomlearn.systems` object); its
      `invariants` are checked along the rollout.
    - `reference`: a `TrajectoryData` (its `dt` is used), or an array of states
      `(n_trajectories, n_steps + 1, d)` or `(n_steps + 1, d)`. The model is rolled out
      from each trajectory's first state (a transformer from its first `T` states) for
      `n_steps` steps.
    - `dt`: the time step of an array `reference` (needed for a Hamiltonian network and
      for timing the reference integrator; without it the reference speed is `None`).
    - `horizons`: the steps `k` at which to report the trajectory error; default
      `1, 10, 100, …` and `n_steps`.
    - `prediction_window`, `seq_length`: for transformers, as in `fit` and `iterate`.
    - `n_structure_points`: the number of reference states (windows) at which the
      structure residuals are computed.
    - `method`: the reference integrator whose speed is reported
      (`geomlearn.integrators.METHODS`).
    - `key`: a PRNG key choosing the structure sample points (default: a fixed key).

    **Returns:** a JSON-serialisable dict:

    - `"trajectory_error"`: `{str(k): error}` — the relative error over steps `0…k`
      (see the module documentation);
    - `"invariant_drift"`: `{name: drift}` for every invariant of `system` along the
      model's rollouts, and `"reference_invariant_drift"` the same along the reference;
    - `"structure_residual"`: `{"symplecticity": r, "volume": r}` (symplecticity only in
      even dimensions), the maximum over the sample points, in the reference's dtype;
    - `"rollout_states_per_second"` and `"reference_states_per_second"`;
    - `"model"`, `"system"`, `"structure"`, `"n_trajectories"`, `"n_steps"`, `"dt"`,
      `"reference_method"`.

    ```python
    train, test = gl.datasets.pendulum_sympnets()
    metrics = gl.evaluate(model, gl.systems.Pendulum(), test)
    metrics["invariant_drift"]["energy"]
    ```
    """
    metrics, *_ = _evaluate(
        model,
        system,
        reference,
        dt=dt,
        horizons=horizons,
        prediction_window=prediction_window,
        seq_length=seq_length,
        n_structure_points=n_structure_points,
        method=method,
        key=key,
    )
    return metrics
