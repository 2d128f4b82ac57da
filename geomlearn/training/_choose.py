"""`choose_trainer`: the trainer the command line uses for a model and a data set."""

from __future__ import annotations

from .._nn import count_parameters
from ..second_order import LevenbergMarquardt
from ._inputs import has_manifold_parameters

__all__ = ["choose_trainer"]

#: Parameters up to which `choose_trainer` picks Levenberg–Marquardt (Adam above).
_LM_MAX_PARAMS = 2000


def _levenberg_marquardt(n_params, n_samples, on_manifold, epochs, time_budget):
    epochs = 500 if epochs is None else epochs
    time_budget = 150.0 if time_budget is None else time_budget
    solver = LevenbergMarquardt(subset=4096 if n_samples > 4096 else None,
                                max_params=max(_LM_MAX_PARAMS, n_params))
    return solver, epochs, time_budget, (
        f"Levenberg–Marquardt ({n_params} parameters), up to {epochs} iterations or "
        f"{time_budget:g} s")


def _adam(n_params, n_samples, on_manifold, epochs, time_budget):
    epochs = (3000 if n_samples <= 512 else 100) if epochs is None else epochs
    adam = "Riemannian Adam" if on_manifold else "Adam"
    return None, epochs, time_budget, f"{adam} ({n_params} parameters), {epochs} epochs"


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
    per iteration on larger data sets; up to 500 iterations or 150 s) for models with at
    most 2000 parameters and no manifold parameters, and the default Adam of `fit` (3000
    full-batch epochs on up to 512 samples, else 100 epochs; Riemannian on manifold
    parameters) otherwise. `trainer="lm"` or `"adam"` forces one; `epochs` and
    `time_budget` override the defaults. `optimizer` is `None` for the default Adam.
    """
    n_params = count_parameters(model)
    if not (isinstance(trainer, str) and trainer in _TRAINERS):
        raise ValueError(f"trainer must be 'auto', 'lm' or 'adam', got {trainer!r}")
    return _TRAINERS[trainer](n_params, n_samples, has_manifold_parameters(model), epochs, time_budget)
