r"""Evaluation: how good a trained model is, measured against reference trajectories.

- `evaluate(model, system, reference)`: a learned integrator's trajectory error (next to
  the identity map's and one classical step's), invariant drift, structure residuals and
  speed (`Evaluation`);
  `check_structure(model, points)` the structure residuals of the map a rollout iterates
  (`StructureCheck`); with `horizon=N`, the long-horizon behaviour of the rollout
  (`long_horizon`: escape step, valid time, invariant drift and its secular trend, streamed
  without keeping the states; `LongHorizon`, `escape_warning`).
- `evaluate_reduction(reduction, system, reference)`: a model reduction's projection and
  reduction errors, reduced energy drift and online speed (`ReductionEvaluation`);
  `check_immersion(reduction, points)` whether its decoder is a symplectic immersion
  (`ImmersionCheck`).
"""

from .._format import fmt as fmt  # the number format of the reports, used by the command line
from ._dissipation import dissipation_metrics
from ._integrator import (
    CHECK_TOLERANCE,
    Evaluation,
    StructureCheck,
    check_structure,
    default_horizons,
    evaluate,
)
from ._long_horizon import (
    CHUNK,
    ESCAPE_FACTOR,
    N_SERIES,
    TREND_STEPS,
    VALID_FLOOR,
    VALID_TOLERANCE,
    LongHorizon,
    escape_warning,
    long_horizon,
)
from ..reduction._evaluation import (  # the evaluation of a reduction, kept with it
    IMMERSION_TOLERANCE,
    ImmersionCheck,
    ReductionEvaluation,
    check_immersion,
    evaluate_reduction,
)

__all__ = [
    "evaluate",
    "Evaluation",
    "StructureCheck",
    "check_structure",
    "CHECK_TOLERANCE",
    "default_horizons",
    "long_horizon",
    "LongHorizon",
    "escape_warning",
    "ESCAPE_FACTOR",
    "VALID_TOLERANCE",
    "VALID_FLOOR",
    "TREND_STEPS",
    "N_SERIES",
    "CHUNK",
    "evaluate_reduction",
    "ReductionEvaluation",
    "ImmersionCheck",
    "check_immersion",
    "IMMERSION_TOLERANCE",
    "dissipation_metrics",
]
