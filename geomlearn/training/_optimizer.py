r"""The default optimiser of `fit`: Adam with a learning rate decaying exponentially
from $10^{-2}$ to $10^{-6}$ over the planned training.

$\eta_k = 10^{-2}\,(10^{-4})^{k/(K-1)}$ for update $k = 0, \dots, K-1$ of
$K = \text{epochs} \times \text{batches per epoch}$: the last update of the last epoch uses
$10^{-6}$. (GeometricMachineLearning.jl's `AdamOptimizerWithDecay(n_epochs)` multiplies its
decay in once per minibatch, so its rate reaches $10^{-6}$ after `n_epochs` updates and
keeps shrinking; here the decay is spread over all $K$ updates and stops at $10^{-6}$.)
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .._validation import check_int
from ..manifolds import riemannian_adam

__all__ = ["default_optimizer"]

_ADAM = optax.scale_by_adam()
_LR_START, _LR_END = 1e-2, 1e-6


class DefaultOptimizerState(NamedTuple):
    """State of `default_optimizer`: Adam's moments, the update count, the planned total."""

    adam: Any
    count: jax.Array
    total: jax.Array


def _upcast(tree):
    """Half-precision leaves as float32: Adam's moments and its `eps = 1e-8` (which is 0
    in float16) need more range than float16/bfloat16 give."""
    return jax.tree_util.tree_map(
        lambda a: a.astype(jnp.float32) if jnp.finfo(a.dtype).bits < 32 else a, tree
    )


def default_init(params, *, total_steps: int) -> DefaultOptimizerState:
    return DefaultOptimizerState(
        adam=_ADAM.init(_upcast(params)),
        count=jnp.zeros((), dtype=jnp.int32),
        total=jnp.asarray(total_steps, dtype=jnp.int32),
    )


def default_update(grads, state: DefaultOptimizerState, params=None):
    updates, adam = _ADAM.update(_upcast(grads), state.adam, None)
    span = jnp.maximum(state.total - 1, 1)
    frac = jnp.minimum(state.count, span).astype(float) / span.astype(float)
    log_lr = math.log(_LR_START) + frac * (math.log(_LR_END) - math.log(_LR_START))
    lr = jnp.exp(log_lr)
    updates = jax.tree_util.tree_map(
        lambda u, g: (-lr.astype(u.dtype) * u).astype(g.dtype), updates, grads
    )
    return updates, DefaultOptimizerState(adam, state.count + 1, state.total)


def default_optimizer(total_steps: int) -> optax.GradientTransformation:
    r"""Adam with $\eta_k = 10^{-2}(10^{-4})^{k/(K-1)}$ for update $k$ of $K$ = `total_steps`.

    The first update uses $10^{-2}$, the last one $10^{-6}$ (and any beyond it too). $K$
    is kept in the optimiser *state*, not in the compiled code, so runs planned for
    different numbers of epochs share one compiled epoch.
    """
    total_steps = check_int("total_steps", total_steps, minimum=1)
    return optax.GradientTransformation(
        functools.partial(default_init, total_steps=total_steps), default_update
    )


def default_learning_rate(step, total_steps: int):
    """The default optimiser's learning rate at update `step` (computed on the host, for
    the history): a float for an integer `step`, a list of floats for an array of steps."""
    span = max(int(total_steps) - 1, 1)
    ratio = _LR_END / _LR_START
    if np.ndim(step) == 0:
        return _LR_START * ratio ** (min(step, span) / span)
    # Python's pow per element: NumPy's vectorised power may differ in the last bit, by
    # position in the array, and a resumed run's history must equal an uninterrupted one
    return [_LR_START * ratio ** (min(k, span) / span) for k in np.asarray(step).tolist()]


def default_riemannian(total_steps: int) -> optax.GradientTransformation:
    r"""The default decay $10^{-2} \to 10^{-6}$ over `total_steps` updates, by Riemannian Adam
    (for a model with Stiefel/Grassmann parameters, which it keeps on their manifold)."""
    return riemannian_adam(optax.exponential_decay(
        _LR_START, max(total_steps - 1, 1), _LR_END / _LR_START))
