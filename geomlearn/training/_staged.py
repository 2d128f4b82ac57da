r"""`fit_position_last`: train a transformer without its position signal first, then with it.

A position signal with trainable gains (`positional_encoding="bias"`, `"amplitude"`,
`"split-amplitude"`) adds parameters that start at zero: the encoded
model at initialisation *is* the model without encoding. Under Levenberg–Marquardt an
iteration costs $\propto P^2$ in the parameter count $P$, so at equal wall time the
encoded model runs fewer iterations than the plain one — and on a problem whose
dynamics do not depend on the order of the rows it only loses by that. Training the
plain twin (same configuration, `positional_encoding=False`, same arrays) for the first
part of the budget and then the encoded model from there spends the cheap iterations on
what both models share, and the dear ones only on the refinement the position signal
adds. Because the gains start at zero, the second stage starts exactly where the first
ended: nothing is lost at the hand-over.
"""

from __future__ import annotations

import functools
import time

import equinox as eqx
import jax

from ..models import AbstractModel
from ..second_order import AbstractDampedLeastSquares
from ._fit import fit

__all__ = ["fit_position_last", "plain_twin", "trains_position_last"]

#: The share of the epochs and of the time budget the plain twin gets.
PLAIN_SHARE = 0.5


def _arrays_by_path(model) -> dict:
    arrays = eqx.filter(model, eqx.is_inexact_array)
    return {jax.tree_util.keystr(path): leaf
            for path, leaf in jax.tree_util.tree_flatten_with_path(arrays)[0]}


def _position_free_config(model):
    """The constructor arguments of `model` with `positional_encoding=False`, or `None`
    when the model has no position signal to leave out."""
    if not isinstance(model, AbstractModel):
        return None
    config = model.config()
    if config.get("positional_encoding") in (None, False):
        return None
    return {**config, "positional_encoding": False}


def plain_twin(model):
    """The same model without its position signal: `type(model)(**config,
    positional_encoding=False)` holding `model`'s own arrays.

    Raises `ValueError` for a model without a position signal, or whose plain twin's
    arrays are not a subset of its own (a placement without trainable gains, such as
    `"input"`, changes the map of the shared arrays: there is no twin to warm-start).
    """
    config = _position_free_config(model)
    if config is None:
        raise ValueError(f"{type(model).__name__} has no position signal "
                         "(positional_encoding is False or not an option of the model)")
    if not model.signal.starts_plain:
        raise ValueError(
            f"{type(model).__name__} with positional_encoding={model.positional_encoding!r} "
            "does not start as the model without encoding; it cannot be trained position-last")
    plain = type(model)(**config, key=jax.random.PRNGKey(0))
    own, theirs = _arrays_by_path(model), _arrays_by_path(plain)
    if len(own) == len(theirs) or any(
            path not in own or own[path].shape != leaf.shape for path, leaf in theirs.items()):
        raise ValueError(
            f"{type(model).__name__} with positional_encoding={model.positional_encoding!r} "
            "has no trainable position gains added to the arrays of the model without "
            "encoding; it cannot be trained position-last")
    return _with_arrays(plain, own)


def _with_arrays(model, arrays: dict):
    """`model` with each of its arrays replaced by the one of `arrays` at the same path."""
    leaves, treedef = jax.tree_util.tree_flatten_with_path(model)
    return jax.tree_util.tree_unflatten(treedef, [
        arrays.get(jax.tree_util.keystr(path), leaf) if eqx.is_inexact_array(leaf) else leaf
        for path, leaf in leaves])


@functools.singledispatch
def _iteration_cost_grows_as_p_squared(optimizer) -> bool:
    """Whether an iteration of `optimizer` costs $\\propto P^2$ (a Gauss–Newton matrix):
    not for Optax's first-order methods or the default Adam (`None`)."""
    return False


@_iteration_cost_grows_as_p_squared.register
def _(optimizer: AbstractDampedLeastSquares) -> bool:
    return True


def trains_position_last(model, optimizer) -> bool:
    """Whether `fit_position_last` applies and pays: `model` has trainable position gains
    and `optimizer` is a damped least-squares solver (Levenberg–Marquardt, Gauss–Newton),
    whose iteration cost grows as $P^2$. (Under Adam an epoch costs about the same with
    and without the gains; training them from the start loses nothing.)"""
    if not _iteration_cost_grows_as_p_squared(optimizer) or _position_free_config(model) is None:
        return False
    try:
        plain_twin(model)
    except ValueError:
        return False
    return True


def _share(value, kind):
    if value is None:
        return None
    return max(1, int(value * PLAIN_SHARE)) if kind is int else value * PLAIN_SHARE


def fit_position_last(model, data, *, key, epochs=None, time_budget=None, **options):
    r"""`geomlearn.fit` in two stages: the plain twin of `model` (`plain_twin`: no position
    signal) for half the epochs and half the time budget, then `model` itself, its shared
    arrays taken from the trained twin and its position gains as they were (zero for a new
    model: it starts as the trained twin, exactly), for the rest.

    **Arguments:** those of `geomlearn.fit` (`epochs` and `time_budget` are the totals of
    both stages; the second stage gets what the first left: `epochs` minus the epochs
    done, the budget minus the wall time spent). `checkpoint` and `resume` are not
    supported (a checkpoint holds one model's state).

    **Returns:** `(model, history)` as `geomlearn.fit`: one history over both stages
    (epochs numbered on, times counted from the start of the first stage), with
    `plain_epochs`, the number of epochs of the first stage. Training stops after the
    first stage when it was interrupted, stopped by the callback or converged, or when
    nothing of the budget is left.

    Under a monotone trainer (Levenberg–Marquardt) the result is at most the loss of the
    plain twin *after the first stage* — not that of the plain model trained for the whole
    budget: where the first half is far from converged, the encoded model can end above
    it. Where this helps and where training from the start does better is measured on
    the concepts page "The positional encoding", section "Position-last training".
    """
    for option in ("checkpoint", "resume"):
        if options.get(option):
            raise ValueError(f"fit_position_last does not support {option}= (a checkpoint "
                             "holds one model's state); use geomlearn.fit")
    if epochs is None and time_budget is None:
        raise ValueError("fit_position_last needs epochs or time_budget (or both)")
    plain = plain_twin(model)
    k_plain, k_encoded = jax.random.split(key)
    started = time.perf_counter()
    plain, history = fit(plain, data, key=k_plain, epochs=_share(epochs, int),
                         time_budget=_share(time_budget, float), **options)
    spent = time.perf_counter() - started
    model = _with_arrays(model, _arrays_by_path(plain))
    done = len(history["epoch"])
    left_epochs = None if epochs is None else epochs - done
    left_time = None if time_budget is None else time_budget - spent
    history = dict(history, plain_epochs=done)
    if (history.get("stop_reason") in ("interrupted", "callback", "converged")
            or left_epochs == 0 or (left_time is not None and left_time <= 0)):
        return model, history
    model, second = fit(model, data, key=k_encoded, epochs=left_epochs,
                        time_budget=left_time, **options)
    for name, values in second.items():
        if name == "epoch":
            history[name] = history[name] + [done + e for e in values]
        elif name == "time":
            history[name] = history[name] + [spent + t for t in values]
        elif isinstance(values, list):
            history[name] = history.get(name, []) + values
        else:
            history[name] = values
    return model, history
