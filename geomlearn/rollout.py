r"""Rollout: use a trained model as an integrator, `iterate(model, initial, n_points)`.

The model says how it is iterated (the model protocol of `geomlearn.models`): a
feed-forward integrator is applied repeatedly, $z_{k+1} = \Phi_\theta(z_k)$; a
transformer integrator reads the last $T$ states and appends the last `pw` rows of its
output window; a Hamiltonian neural network takes implicit-midpoint steps of its learned
field, solved to round-off. `iterate` only validates the shapes and compiles the model's
`rollout` once, vectorised over a leading batch axis with `jax.vmap`.
"""

from __future__ import annotations

import jax.numpy as jnp

from ._validation import check_floating, check_int
from .models._base import check_model, model_rollout

__all__ = ["iterate"]


def iterate(
    model,
    initial,
    n_points: int,
    *,
    prediction_window: int | None = None,
    dt=None,
):
    r"""Roll a trained model out from initial states.

    - Feed-forward integrators: $z_{k+1} = \Phi_\theta(z_k)$ from `initial` of shape `(d,)`.
    - Transformer integrators: `initial` is a window `(T, d)` of consecutive states; each
      step feeds the last $T$ states and appends the last `pw` rows of the output. With
      `pw < T` the iterated window update is not structure-preserving even for a
      structure-preserving model, and a `UserWarning` says so.
    - Hamiltonian networks: the implicit midpoint rule
      $z_{k+1} = z_k + h\, J\nabla H_\theta\big((z_k + z_{k+1})/2\big)$ with step `dt`,
      solved to round-off (a symplectic integrator of the learned Hamiltonian); a solve
      that does not converge raises.
    - Any other model: its own `rollout` (see `geomlearn.models.AbstractModel`).

    **Arguments:**

    - `model`: a geomlearn model.
    - `initial`: one initial state of the model's iterated map — `(d,)` or, for a
      transformer, `(T, d)` — with an optional leading batch axis `(B, …)`.
    - `n_points`: the number of states returned, **including** the initial ones
      (`n_points ≥ 1`; for a transformer, `n_points ≥ T`).
    - `prediction_window`: transformers only, the number `pw` of output rows appended per
      step (`1 ≤ pw ≤ T`); `None` means `T`. Use the value the model was trained with.
    - `dt`: Hamiltonian networks only, the time step (required for them).

    **Returns:** the trajectory `(n_points, d)` (or `(B, n_points, d)`), in the dtype of
    `initial`, whose first rows are the initial states.

    ```python
    model = gl.GSympNet(2, key=jax.random.PRNGKey(0))
    traj = gl.iterate(model, jnp.array([1.0, 0.0]), 1000)      # (1000, 2)
    batch = gl.iterate(model, jnp.ones((8, 2)), 1000)          # (8, 1000, 2)
    ```

    The rollout is one `lax.scan` compiled with `equinox.filter_jit`: calling again with
    the same model structure, shapes and `n_points` does not recompile.
    """
    check_model(model)
    n_points = check_int("n_points", n_points, minimum=1)
    initial = jnp.asarray(initial)
    check_floating("initial", initial)
    shape = tuple(initial.shape)
    task = model.rollout_task(shape, prediction_window=prediction_window, dt=dt)
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
    return model_rollout(model, initial, n_points, task, batched=initial.ndim == len(state) + 1)
