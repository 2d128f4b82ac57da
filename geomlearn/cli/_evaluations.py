r"""How the command line evaluates, reports and checks a trained model: the `evaluation`
policy of a `ModelSpec`.

`evaluate` compares the model with held-out data (and their system, or `None` for data
without one; with a system also with the classical integrators at equal cost), `report` draws the report figure of a run, `check` tests the structure the
model claims at given points (an object with `passed` and `report(title=...)`), and
`structure` says what `geomlearn list` shows the model class to preserve. `needs_system`
(a class variable) says whether the evaluation needs the data's system, so that the model
cannot be trained on a file.
"""

from __future__ import annotations

import abc
import dataclasses
import sys
from typing import ClassVar

from ..evaluation import (
    check_immersion,
    check_structure,
    dissipation_metrics,
    evaluate,
    evaluate_reduction,
    work_precision,
)
from ..integrators import IntegrationError
from ..plotting import energy_report, reduction_report, report
from ..systems import AbstractPortHamiltonianSystem
from ._policy import AbstractPolicy

__all__ = ["AbstractEvaluation", "IntegratorEvaluation", "DissipativeEvaluation",
           "ReductionEvaluation"]


class AbstractEvaluation(AbstractPolicy):
    """How a trained model is evaluated, reported and checked."""

    needs_system: ClassVar[bool]
    #: whether `evaluate` takes the user's invariants and long-horizon starts
    #: (`--invariants`, `--test-data`, `--reference`)
    user_options: ClassVar[bool] = True

    @abc.abstractmethod
    def structure(self, cls: type) -> str:
        """What a model of class `cls` preserves, as `geomlearn list` shows it."""

    @abc.abstractmethod
    def evaluate(self, model, system, data, **options):
        """The evaluation of `model` on the held-out `data` (of `system`, or `None`)."""

    @abc.abstractmethod
    def report(self, path, *, run: dict, history: dict, evaluation, title: str) -> bool:
        """Draw the report figure to `path` (`run` is `run.json`, `title` names the model);
        whether it was written."""

    @abc.abstractmethod
    def check(self, model, points, *, prediction_window=None, dt=None):
        """The structure check of the model's map at `points`."""


def _against_classical(result, model, system, data, dt=None):
    """`result` with the work–precision comparison of `model` against the classical
    integrators of `system` (`geomlearn.work_precision`; `dt`: the step of irregular
    `data`, the training data's mean step, `None`: the data's own): its metrics under
    `"work_precision"`, both ratios and the verdict at the top level. Without a system
    there is nothing to compare with; a comparison that does not apply (a `ValueError`)
    or whose reference cannot be computed (an `IntegrationError`) is said on stderr and
    recorded as `None`: the run's own results stand without it."""
    if system is None:
        return result
    try:
        measured = work_precision(model, system, data, dt=dt)
    except (ValueError, IntegrationError) as e:
        print(f"geomlearn: no comparison with the classical integrators: {e}", file=sys.stderr)
        result.update(work_precision=None)
        return result
    result.update(work_precision=measured.metrics, frontier_ratio=measured.frontier_ratio,
                  equal_error_speedup=measured.equal_error_speedup,
                  against_classical=measured.verdict())
    return result


def _integrator_report(path, run: dict, history: dict, evaluation) -> bool:
    """`geomlearn.plotting.report` of an integrator's run (the phase plane of the
    run's `--plot-columns`, checked when it was trained)."""
    labels = run.get("labels") or ()
    columns = (run.get("options") or {}).get("plot_columns")
    return report(path, history=history, evaluation=evaluation,
                  loss_name=run.get("loss", "relative"), labels=labels,
                  canonical=bool(run.get("canonical", True)),
                  columns=None if not columns else tuple(list(labels).index(c) for c in columns))


@dataclasses.dataclass(frozen=True)
class IntegratorEvaluation(AbstractEvaluation):
    """An integrator: the rollout against the data (`geomlearn.evaluate`), the report
    figure (`geomlearn.plotting.report`), `geomlearn.check_structure` of the iterated
    map; it preserves its class's `structure`."""

    needs_system: ClassVar[bool] = False

    def structure(self, cls):
        return cls.structure

    def evaluate(self, model, system, data, **options):
        return _against_classical(evaluate(model, system, data, **options), model, system,
                                  data, options.get("dt"))

    def report(self, path, *, run, history, evaluation, title):
        return _integrator_report(path, run, history, evaluation)

    def check(self, model, points, *, prediction_window=None, dt=None):
        return check_structure(model, points, prediction_window=prediction_window, dt=dt)


@dataclasses.dataclass(frozen=True)
class DissipativeEvaluation(AbstractEvaluation):
    r"""A model of damped or driven systems: an integrator's evaluation and, on a
    port-Hamiltonian system, the learned damping against the true one, the energy error
    and the energy-balance residual (`geomlearn.evaluation.dissipation_metrics`); the
    report adds `energy.png`, the energy against time with the decay the model predicts."""

    needs_system: ClassVar[bool] = False

    def structure(self, cls):
        return cls.structure

    def evaluate(self, model, system, data, **options):
        result = _against_classical(evaluate(model, system, data, **options), model, system,
                                    data, options.get("dt"))
        if isinstance(system, AbstractPortHamiltonianSystem):
            metrics, series = dissipation_metrics(model, system, result.rollout, result.reference,
                                                  float(options.get("dt", data.dt)))
            result.update(metrics)
            result.energy_series = series
        return result

    def report(self, path, *, run, history, evaluation, title):
        wrote = _integrator_report(path, run, history, evaluation)
        series = getattr(evaluation, "energy_series", None)
        if series is not None:
            energy_report(path.with_name("energy.png"), series=series,
                          title=f"{title} on {run.get('system')}")
        return wrote

    def check(self, model, points, *, prediction_window=None, dt=None):
        return check_structure(model, points, prediction_window=prediction_window, dt=dt)


@dataclasses.dataclass(frozen=True)
class ReductionEvaluation(AbstractEvaluation):
    r"""A model reduction: the projection and reduction errors (over the whole horizon
    too, and for the plain and the centred PSD of the same size), the code-loop action
    and the online speed-up (`geomlearn.evaluation.evaluate_reduction`, which integrates
    the reduced Hamiltonian system: it needs the system), the wave packet of the full
    and the reduced model (`geomlearn.plotting.reduction_report`), and the check that the
    decoder is a symplectic immersion,
    $(D\Psi^d)^\top\mathbb{J}_{2N}D\Psi^d = \mathbb{J}_{2n}$
    (`geomlearn.evaluation.check_immersion`); `geomlearn list` shows that claim,
    `"symplectic"`."""

    needs_system: ClassVar[bool] = True
    user_options: ClassVar[bool] = False

    def structure(self, cls):
        return "symplectic"

    def evaluate(self, model, system, data, **options):
        return evaluate_reduction(model, system, data)

    def report(self, path, *, run, history, evaluation, title):
        return reduction_report(path, history=history, evaluation=evaluation,
                                loss_name=run.get("loss", "relative"))

    def check(self, model, points, *, prediction_window=None, dt=None):
        return check_immersion(model, points)
