r"""Samples and rollouts of irregularly sampled trajectories.

A trajectory sampled at times $t_0 < t_1 < \dots$ with a nominal step
$\overline{\Delta t}$ (the training data's mean step) reaches a model in units of that
step:

- a feed-forward integrator $z_{k+1} = \Phi_\theta(z_k, s_k)$ takes the relative step
  $s_k = (t_{k+1} - t_k)/\overline{\Delta t}$, which scales every layer's increment (a
  SympNet stays symplectic, a volume-preserving network volume-preserving, for every
  $s_k$);
- a transformer integrator reads a window of $T$ rows at times $t_{k..k+T-1}$ with the
  rows' times in nominal steps, $\tau_i = t_{k+i}/\overline{\Delta t}$ (what its position
  signal reads), and the steps to its target rows `pw` rows later,
  $s_i = (t_{k+i+pw} - t_{k+i}) / (pw\,\overline{\Delta t})$
  (`model(Z, times=tau, steps=s)`; see `geomlearn.layers._row_steps`).

The times are the recorded ones, not relative to the window: the map of a driven system
depends on the drive's phase, which only the clock carries (a position signal's gains
start at zero, so a model starts time-invariant). On a regular grid every $s = 1$. The
training samples (`TimedPairs`, `TimedWindows`) carry the times as trailing columns of the
input, so that they batch like any other array; their task records $\overline{\Delta t}$
as `dt`, and validation data are counted in it.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._validation import first_not_increasing
from ._task import Task, TimedPairs, TimedWindows

__all__ = [
    "nominal_step",
    "relative_steps",
    "timed_pairs",
    "timed_windows",
    "split_pair",
    "split_window",
    "pairs_rollout_at",
    "windows_rollout_at",
]


def timed_pairs(data, task: Task):
    """`(x, y, task)`: the one-step pairs of irregular `data` with their relative steps as
    a last input column, `x` `(M, dim + 1)`, `y` `(M, dim)`, in the data's dtype."""
    dt = nominal_step(data, task)
    x, y, tx, ty = data.pairs(times=True)
    x = jnp.asarray(x)
    h = jnp.asarray((np.asarray(ty, np.float64) - np.asarray(tx, np.float64)) / dt,
                    dtype=x.dtype)
    return jnp.concatenate([x, h[:, None]], axis=1), jnp.asarray(y), Task(
        seq_length=task.seq_length, prediction_window=task.prediction_window, dt=dt,
        samples=TimedPairs())


def nominal_step(data, task: Task) -> float:
    """The step the relative times are counted in: the task's `dt` once set (validation
    data are measured in the training data's step), else the data's mean step."""
    return float(data.dt) if task.dt is None else float(task.dt)


def timed_windows(data, T: int, task: Task):
    """`(x, y, task)`: the windows of irregular `data` with each row's time and relative
    step (in nominal steps) as the last two input columns, `x` `(M, T, dim + 2)`, `y` `(M, T, dim)`."""
    pw, dt = task.prediction_window, nominal_step(data, task)
    x, y, tx, ty = data.windows(T, pw, times=True)
    x = jnp.asarray(x)
    tx, ty = np.asarray(tx, np.float64), np.asarray(ty, np.float64)
    tau = jnp.asarray(tx / dt, dtype=x.dtype)
    s = jnp.asarray((ty - tx) / (pw * dt), dtype=x.dtype)
    x = jnp.concatenate([x, tau[..., None], s[..., None]], axis=-1)
    return x, jnp.asarray(y), Task(seq_length=T, prediction_window=pw, dt=dt,
                                   samples=TimedWindows())


def split_pair(x, dim: int):
    """`(z, s)` of one `TimedPairs` input `(dim + 1,)`."""
    return x[:dim], x[dim]


def split_window(x, dim: int):
    """`(Z, tau, s)` of one `TimedWindows` input `(T, dim + 2)`."""
    return x[:, :dim], x[:, dim], x[:, dim + 1]


def relative_steps(times, dt: float) -> np.ndarray:
    """The steps between consecutive `times` in units of `dt`, float64; `ValueError` for
    times that are not finite and strictly increasing, or a `dt` that is not > 0."""
    t = np.asarray(times, dtype=np.float64)
    if t.ndim != 1 or t.size < 2:
        raise ValueError(f"times must be a 1-D array of at least 2 times, got shape {t.shape}")
    if not np.all(np.isfinite(t)):
        raise ValueError("times must be finite")
    i = first_not_increasing(t)
    if i is not None:
        raise ValueError(f"times must be strictly increasing, got times[{i + 1}] = "
                         f"{t[i + 1]} after times[{i}] = {t[i]}")
    if not (math.isfinite(dt) and dt > 0):
        raise ValueError(f"the nominal step dt must be a finite number > 0, got {dt}")
    return np.diff(t) / dt


@eqx.filter_jit
def pairs_rollout_at(form, initial, steps):
    r"""$z_{k+1} = \Phi(z_k, s_k)$ from `initial` `(dim,)` for the relative `steps`
    `(n,)` (one `lax.scan`, compiled once per model structure and shape): `(n + 1, dim)`."""

    def body(z, s):
        z = form(z, s)
        return z, z

    _, zs = jax.lax.scan(body, initial, steps.astype(initial.dtype))
    return jnp.concatenate([initial[None], zs], axis=0)


def windows_rollout_at(form, initial, times, dt: float, pw: int):
    r"""The window rollout of a transformer's map `form(Z, times=, steps=)` from the
    window `initial` `(T, dim)` at the rows' real `times` `(n,)` (the first $T$ those of
    `initial`; $n - T$ a multiple of `pw`): step $k$ reads rows $k\,pw, \dots,
    k\,pw + T - 1$ with their times and steps and appends the last `pw` rows of
    the output. Returns `(n, dim)`."""
    T, d = initial.shape
    t = np.asarray(times, np.float64)
    n_steps = (t.size - T) // pw
    rows = (np.arange(n_steps) * pw)[:, None] + np.arange(T)[None, :]  # (n_steps, T)
    tau = jnp.asarray(t[rows] / dt, initial.dtype)
    s = jnp.asarray((t[rows + pw] - t[rows]) / (pw * dt), initial.dtype)
    news = _scan_windows(form, initial, tau, s, pw)
    return jnp.concatenate([initial, news.reshape(n_steps * pw, d)], axis=0)


@eqx.filter_jit
def _scan_windows(form, initial, tau, s, pw: int):
    """The `pw` new rows of every step of `windows_rollout_at` (one `lax.scan`)."""
    T = initial.shape[0]

    def body(window, ts):
        new = form(window, times=ts[0], steps=ts[1])[T - pw:]
        return jnp.concatenate([window[pw:], new], axis=0), new

    return jax.lax.scan(body, initial, (tau, s))[1]
