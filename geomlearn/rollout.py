r"""Rollout: use a trained model as an integrator, `iterate(model, initial, n_points)`.

The model says how it is iterated (the model protocol of `geomlearn.models`): a
feed-forward integrator is applied repeatedly, $z_{k+1} = \Phi_\theta(z_k)$; a
transformer integrator reads the last $T$ states and appends the last `pw` rows of its
output window; a Hamiltonian neural network takes implicit-midpoint steps of its learned
field, solved to round-off. `iterate` only validates the shapes and compiles the model's
`rollout` once, vectorised over a leading batch axis with `jax.vmap`.

A rollout that fails — a state that is not finite, or an implicit solve that does not
converge — raises `RolloutError`, one line that names the trajectory and the step and
says what to try (`ROLLOUT_ADVICE`).
"""

from __future__ import annotations

import dataclasses
import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._validation import check_floating, check_int
from .models._base import check_model, model_rollout

__all__ = ["iterate", "RolloutError", "ROLLOUT_ADVICE"]

ROLLOUT_ADVICE = ("try float64 (jax_enable_x64; train with --x64 at the command line), a "
                  "model trained at a smaller step, or a different model")
"""What a failed rollout's message advises."""


class RolloutError(RuntimeError):
    """A rollout that could not be completed: a state that is not finite or an implicit
    solve that did not converge. The message is one line naming the trajectory (its
    index in the batch) and the step (the row of the trajectory), with advice;
    `trajectory` (`None` for one unbatched initial state) and `step` hold them."""

    def __init__(self, message: str, *, trajectory: int | None = None, step: int | None = None):
        super().__init__(message)
        self.trajectory = trajectory
        self.step = step


def iterate(
    model,
    initial,
    n_points: int,
    *,
    prediction_window: int | None = None,
    dt=None,
    times=None,
):
    r"""Roll a trained model out from initial states.

    - Feed-forward integrators: $z_{k+1} = \Phi_\theta(z_k)$ from `initial` of shape `(d,)`.
    - Transformer integrators: `initial` is a window `(T, d)` of consecutive states; each
      step feeds the last $T$ states and appends the last `pw` rows of the output. With
      `pw < T` the iterated window update is not structure-preserving even for a
      structure-preserving model, and a `UserWarning` says so.
    - Hamiltonian networks: implicit-midpoint steps of size `dt` of the learned field,
      solved to round-off (a solve that does not converge raises).
    - Any other model: its own `rollout` (see `geomlearn.models.AbstractModel`).

    **Arguments:**

    - `model`: a geomlearn model.
    - `initial`: one initial state of the model's iterated map — `(d,)` or, for a
      transformer, `(T, d)` — with an optional leading batch axis `(B, …)`.
    - `n_points`: the number of states returned, **including** the initial ones
      (`n_points ≥ 1`; for a transformer, `n_points ≥ T`).
    - `prediction_window`: transformers only, the number `pw` of output rows appended per
      step (`1 ≤ pw ≤ T`); `None` means `T`. Use the value the model was trained with.
    - `dt`: Hamiltonian networks, the time step; with `times`, the step the model was
      trained at (the training data's `dt`).
    - `times`: feed-forward and transformer integrators, the real times `(n_points,)` of
      the rows (the first the initial states'), each step advanced by its length in
      units of `dt` (`geomlearn.models._timed`); transformers: `n_points - T` a multiple of `pw`.

    **Returns:** the trajectory `(n_points, d)` (or `(B, n_points, d)`), in the dtype of
    `initial`, whose first rows are the initial states.

    **Raises:** `RolloutError` (one line: the trajectory, the step, the cause and what to
    try) when a state is not finite or an implicit solve does not converge; under a JAX
    transformation, the model's own run-time check instead.

    ```python
    model = gl.GSympNet(2, key=jax.random.PRNGKey(0))
    traj = gl.iterate(model, jnp.array([1.0, 0.0]), 1000)      # (1000, 2)
    ```

    One `lax.scan` under `equinox.filter_jit`, compiled once per model structure and shape.
    """
    check_model(model)
    n_points = check_int("n_points", n_points, minimum=1)
    initial = jnp.asarray(initial)
    check_floating("initial", initial)
    shape = tuple(initial.shape)
    if times is not None:
        _check_timed(model, times, n_points, dt)
    task = model.rollout_task(shape, prediction_window=prediction_window,
                              dt=None if times is not None else dt)
    state = model.state_shape(task)
    if initial.ndim not in (len(state), len(state) + 1) or shape[-len(state):] != state:
        raise ValueError(
            f"{type(model).__name__} needs an initial state {state} or a batch (B, "
            f"{', '.join(map(str, state))}), got shape {shape}"
        )
    n_initial = model.n_initial_points(task)
    if n_points < n_initial:
        raise ValueError(
            f"n_points counts the {n_initial} initial states of the window, so it must be at "
            f"least {n_initial}, got {n_points}"
        )
    batched = initial.ndim == len(state) + 1
    if times is not None:
        out = _rollout_at(model, initial, np.asarray(times, np.float64), float(dt), task,
                          batched)
        _check_finite(model, out if batched else out[None], task, batched)
        return out
    leaves = jax.tree_util.tree_leaves((model, initial))
    if any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
        return model_rollout(model, initial, n_points, task, batched=batched)
    try:
        out = model_rollout(model, initial, n_points,
                            dataclasses.replace(task, nan_on_failure=True), batched=batched)
    except eqx.EquinoxRuntimeError as e:  # a model whose failure raises all the same
        raise RolloutError(f"the rollout failed: {_cause(e)}; {ROLLOUT_ADVICE}") from None
    _check_finite(model, out if batched else out[None], task, batched)
    return out


def _check_timed(model, times, n_points: int, dt) -> None:
    """`ValueError` unless `model` rolls out at real times and `times` and `dt` fit."""
    if not model.reads_times:
        raise ValueError(f"{type(model).__name__} does not roll out at irregular times "
                         "(times=): feed-forward and transformer integrators do")
    if dt is None:
        raise ValueError("times= needs dt, the nominal step the model was trained at (the "
                         "training data's dt)")
    shape = np.shape(times)
    if shape != (n_points,):
        raise ValueError(f"times must have shape ({n_points},), one per returned row "
                         f"(n_points), got shape {shape}")


def _rollout_at(model, initial, times, dt, task, batched):
    """`model.rollout_at` of one initial state or of a batch (`jax.vmap`); the times stay
    NumPy (the relative steps are formed once, in float64, outside the scan)."""
    one = lambda z: model.rollout_at(z, times, dt, task)  # noqa: E731
    return jax.vmap(one)(initial) if batched else one(initial)


def _cause(error: Exception) -> str:
    """The message of a run-time check, without the trace around it."""
    found = re.search(r"EquinoxRuntimeError: (.*)", str(error))
    message = found.group(1).strip() if found else str(error).strip().splitlines()[-1]
    return message.split("; try ")[0]  # a solver's own advice: ROLLOUT_ADVICE says it once


def _check_finite(model, rollout, task, batched: bool) -> None:
    """`RolloutError` at the first trajectory and step of `rollout` `(B, N, ...)` that is
    not finite, with the cause found by taking that step again alone."""
    finite = np.isfinite(np.asarray(rollout)).reshape(rollout.shape[0], rollout.shape[1], -1)
    bad = ~finite.all(axis=-1)
    if not bad.any():
        return
    steps = np.where(bad.any(axis=1), bad.argmax(axis=1), rollout.shape[1])
    i = int(np.argmin(steps))
    k = int(steps[i])
    n_init = model.n_initial_points(task)
    which = f"trajectory {i}" if batched else "the trajectory"
    if k < n_init:
        raise RolloutError(f"the initial state of {which} is not finite (step {k})",
                           trajectory=i if batched else None, step=k)
    per = task.prediction_window or 1
    start = n_init + (k - n_init) // per * per
    cause = "the state is not finite"
    window = model.initial_states(rollout[i : i + 1, start - n_init : start], task)[0]
    try:
        jax.block_until_ready(model_rollout(model, window, n_init + per, task, batched=False))
    except eqx.EquinoxRuntimeError as e:
        cause = _cause(e)
    raise RolloutError(f"the rollout of {which} failed at step {k} ({cause}); {ROLLOUT_ADVICE}",
                       trajectory=i if batched else None, step=k)
