r"""Evaluation: how good a trained model is, measured against reference trajectories.

- `evaluate(model, system, reference)`: a learned integrator's trajectory error,
  invariant drift, structure residuals and speed (`Evaluation`);
  `check_structure(model, points)` the structure residuals of the map a rollout iterates
  (`StructureCheck`).
- `evaluate_reduction(reduction, system, reference)`: a model reduction's projection and
  reduction errors, reduced energy drift and online speed (`ReductionEvaluation`);
  `check_immersion(reduction, points)` whether its decoder is a symplectic immersion
  (`ImmersionCheck`).
"""

from .._format import fmt as fmt  # the number format of the reports, used by the command line
from ._integrator import (
    CHECK_TOLERANCE,
    Evaluation,
    StructureCheck,
    check_structure,
    default_horizons,
    evaluate,
)
from ._reduction import (
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
    "evaluate_reduction",
    "ReductionEvaluation",
    "ImmersionCheck",
    "check_immersion",
    "IMMERSION_TOLERANCE",
]
