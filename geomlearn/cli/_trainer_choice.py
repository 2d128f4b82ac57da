"""`choose_trainer`: the command line's policy of which trainer a model of a given size and a
data set of a given size get (`geomlearn train --trainer`)."""

from __future__ import annotations

from .._nn import count_parameters
from ..second_order import LevenbergMarquardt
from ..training._inputs import has_manifold_parameters

__all__ = ["choose_trainer"]

#: Parameters up to which `choose_trainer` picks Levenberg–Marquardt (Adam above).
_LM_MAX_PARAMS = 2000


def budget_text(epochs, time_budget, what: str) -> str:
    """The budget rule of a run in words: at most `epochs` `what` and at most
    `time_budget` seconds, whichever comes first (`None`: no limit of that kind)."""
    if epochs is None:
        return f"as many {what} as {time_budget:g} s allow"
    count = f"{epochs} {what[:-1] if epochs == 1 else what}"
    if time_budget is None:
        return f"at most {count} (no time limit)"
    return f"at most {count} and {time_budget:g} s, whichever comes first"


def _levenberg_marquardt(n_params, n_samples, on_manifold, epochs, time_budget):
    epochs = 500 if epochs is None else epochs
    time_budget = 150.0 if time_budget is None else time_budget
    solver = LevenbergMarquardt(subset=4096 if n_samples > 4096 else None,
                                max_params=max(_LM_MAX_PARAMS, n_params))
    return solver, epochs, time_budget, (
        f"Levenberg–Marquardt ({n_params} parameters), "
        f"{budget_text(epochs, time_budget, 'iterations')}, or until it stalls")


def _adam(n_params, n_samples, on_manifold, epochs, time_budget):
    if epochs is None:
        epochs = 3000 if n_samples <= 512 else 100
    adam = "Riemannian Adam" if on_manifold else "Adam"
    return None, epochs, time_budget, (
        f"{adam} ({n_params} parameters), {budget_text(epochs, time_budget, 'epochs')}")


def _auto(n_params, n_samples, on_manifold, epochs, time_budget):
    small = n_params <= _LM_MAX_PARAMS and not on_manifold
    choice = _levenberg_marquardt if small else _adam
    return choice(n_params, n_samples, on_manifold, epochs, time_budget)


#: The trainers by the name `choose_trainer(trainer=...)` accepts.
_TRAINERS = {"auto": _auto, "lm": _levenberg_marquardt, "adam": _adam}


def choose_trainer(model, n_samples: int, *, trainer: str = "auto", epochs=None, time_budget=None):
    """The trainer the command line uses: `(optimizer, epochs, time_budget, description)`.

    Structure-preserving integrators are small networks fitted to redundant data — a
    small nonlinear least-squares problem — so `trainer="auto"` picks
    Levenberg–Marquardt (`geomlearn.LevenbergMarquardt`; a random subset of 4096 samples
    per iteration on larger data sets) for models with at most 2000 parameters and no
    manifold parameters, and the default Adam of `fit` (Riemannian on manifold
    parameters) otherwise. `trainer="lm"` or `"adam"` forces one. `optimizer` is `None`
    for the default Adam.

    **The budget rule:** at most `epochs` epochs (Levenberg–Marquardt: iterations) and
    at most `time_budget` seconds, whichever comes first (Levenberg–Marquardt stops
    earlier when it stalls). Each that is `None` takes the trainer's default:
    Levenberg–Marquardt 500 iterations and 150 s; Adam 3000 full-batch epochs on up to
    512 samples, else 100, and no time limit. `--epochs` sets the first, `--time-budget`
    the second.
    """
    n_params = count_parameters(model)
    if not (isinstance(trainer, str) and trainer in _TRAINERS):
        raise ValueError(f"trainer must be 'auto', 'lm' or 'adam', got {trainer!r}")
    return _TRAINERS[trainer](n_params, n_samples, has_manifold_parameters(model), epochs, time_budget)
