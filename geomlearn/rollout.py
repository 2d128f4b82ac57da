r"""Rollout: use a trained model as an integrator, `iterate(model, initial, n_points)`.

A feed-forward integrator is applied repeatedly, $z_{k+1} = \Phi_\theta(z_k)$. A
transformer integrator reads the last $T$ states and appends the last `pw` rows of its
output window (DESIGN.md's output-row semantics: for the input rows
$z_{t-T+1}, \dots, z_t$ the output rows are $z_{t-T+1+pw}, \dots, z_{t+pw}$). A Hamiltonian
neural network is integrated with the implicit midpoint rule applied to its learned field
$J\nabla H_\theta$ (a symplectic method), solved by fixed-point iteration.

The whole rollout is one `jax.lax.scan`, compiled once per model structure and size
(`equinox.filter_jit`); a leading batch axis of initial conditions goes through
`jax.vmap`.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp

from ._validation import check_floating, check_int
from .models._base import (
    AbstractFeedForwardIntegrator,
    AbstractHamiltonianModel,
    AbstractModel,
    AbstractTransformerIntegrator,
)

__all__ = ["iterate"]

#: Fixed-point iterations of the implicit midpoint rule in a Hamiltonian-network rollout.
#: The iteration contracts like $(h L / 2)^k$ for a field with Lipschitz constant $L$, so
#: 12 iterations reach float64 round-off for $hL \lesssim 0.1$.
ROLLOUT_MIDPOINT_ITERATIONS = 12


def _model_kind(model) -> str:
    """`"feedforward"`, `"transformer"` or `"hamiltonian"`; `TypeError` for anything else."""
    if isinstance(model, AbstractFeedForwardIntegrator):
        return "feedforward"
    if isinstance(model, AbstractTransformerIntegrator):
        return "transformer"
    if isinstance(model, AbstractHamiltonianModel):
        return "hamiltonian"
    if isinstance(model, AbstractModel):
        raise TypeError(
            f"{type(model).__name__} is a geomlearn model of no known kind (feed-forward "
            "integrator, transformer integrator or Hamiltonian model)"
        )
    raise TypeError(f"expected a geomlearn model, got {type(model).__name__}")


def _midpoint_step(model, z, dt, n_iter: int):
    r"""One implicit-midpoint step of the learned field, $z_1 = z_0 + h\,f((z_0 + z_1)/2)$.

    Solved by `n_iter` fixed-point iterations starting from the explicit Euler guess; the
    iterations are unrolled through `lax.fori_loop` with a static trip count, so the step
    is differentiable in reverse mode (used for training on one-step pairs).
    """
    h = jnp.asarray(dt, dtype=z.dtype)
    f = model.vector_field
    z1 = z + h * f(z)

    def body(_, z1):
        return z + h * f((z + z1) * jnp.asarray(0.5, dtype=z.dtype))

    return jax.lax.fori_loop(0, n_iter, body, z1)


def _check_prediction_window(model, T: int, prediction_window) -> int:
    pw = T if prediction_window is None else check_int("prediction_window", prediction_window, minimum=1)
    if pw > T:
        raise ValueError(
            f"prediction_window must be at most the window length T={T}, got {pw}"
        )
    return pw


@eqx.filter_jit
def _rollout(model, initial, n_points: int, kind: str, pw: int | None, dt):
    def one(z0):
        if kind == "feedforward":

            def step(z, _):
                z = model(z)
                return z, z

            _, zs = jax.lax.scan(step, z0, None, length=n_points - 1)
            return jnp.concatenate([z0[None], zs], axis=0)
        if kind == "hamiltonian":

            def step(z, _):
                z = _midpoint_step(model, z, dt, ROLLOUT_MIDPOINT_ITERATIONS)
                return z, z

            _, zs = jax.lax.scan(step, z0, None, length=n_points - 1)
            return jnp.concatenate([z0[None], zs], axis=0)
        # transformer: z0 is a window (T, d)
        T, d = z0.shape
        n_steps = math.ceil((n_points - T) / pw)

        def step(window, _):
            new = model(window)[T - pw :]
            window = jnp.concatenate([window[pw:], new], axis=0)
            return window, new

        _, news = jax.lax.scan(step, z0, None, length=n_steps)
        return jnp.concatenate([z0, news.reshape(n_steps * pw, d)], axis=0)[:n_points]

    if initial.ndim == (2 if kind == "transformer" else 1):
        return one(initial)
    return jax.vmap(one)(initial)


def iterate(model, initial, n_points: int, *, prediction_window: int | None = None, dt=None):
    r"""Roll a trained model out from initial states.

    - Feed-forward integrators: $z_{k+1} = \Phi_\theta(z_k)$ from `initial` of shape `(d,)`.
    - Transformer integrators: `initial` is a window `(T, d)` of consecutive states; each
      step feeds the last $T$ states and appends the last `pw` rows of the output.
    - Hamiltonian networks: the implicit midpoint rule
      $z_{k+1} = z_k + h\, J\nabla H_\theta\big((z_k + z_{k+1})/2\big)$ with step `dt`
      (a symplectic integrator of the learned Hamiltonian).

    **Arguments:**

    - `model`: a geomlearn model.
    - `initial`: `(d,)` (feed-forward, Hamiltonian) or `(T, d)` (transformer), with an
      optional leading batch axis `(B, …)` of initial conditions.
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
    kind = _model_kind(model)
    n_points = check_int("n_points", n_points, minimum=1)
    initial = jnp.asarray(initial)
    check_floating("initial", initial)
    d = model.dim
    pw = None
    if kind == "transformer":
        if initial.ndim not in (2, 3) or initial.shape[-1] != d:
            raise ValueError(
                f"a transformer integrator needs an initial window (T, {d}) or a batch "
                f"(B, T, {d}), got shape {initial.shape}"
            )
        T = initial.shape[-2]
        if model.seq_length is not None and T != model.seq_length:
            raise ValueError(
                f"{type(model).__name__} reads windows of length {model.seq_length}, got an "
                f"initial window of length {T}"
            )
        pw = _check_prediction_window(model, T, prediction_window)
        if n_points < T:
            raise ValueError(
                f"n_points counts the {T} initial states of the window, so it must be at "
                f"least {T}, got {n_points}"
            )
    else:
        if initial.ndim not in (1, 2) or initial.shape[-1] != d:
            raise ValueError(
                f"{type(model).__name__} needs an initial state ({d},) or a batch (B, {d}), "
                f"got shape {initial.shape}"
            )
        if prediction_window is not None:
            raise ValueError("prediction_window applies to transformer integrators only")
    if kind == "hamiltonian":
        if dt is None:
            raise ValueError(
                "rolling out a Hamiltonian neural network needs the time step dt "
                "(it is integrated with the implicit midpoint rule)"
            )
        dt = float(dt)
        if not dt > 0:
            raise ValueError(f"dt must be positive, got {dt}")
    elif dt is not None:
        raise ValueError("dt applies to Hamiltonian neural networks only")
    return _rollout(model, initial, n_points, kind, pw, dt)
