r"""Evaluation: how good a trained model is, measured against reference trajectories.

- `evaluate(model, system, reference)`: a learned integrator's trajectory error (next to
  the identity map's and one classical step's), invariant drift, structure residuals and
  speed (`Evaluation`);
  `check_structure(model, points)` the structure residuals of the map a rollout iterates
  (`StructureCheck`); with `horizon=N`, the long-horizon behaviour of the rollout
  (`long_horizon`: escape step, valid time, invariant drift and its secular trend, streamed
  without keeping the states; `LongHorizon`, `escape_warning`; `frame_projection`, the
  frame of its escape test: no clock, particles about their centre of mass).
- `work_precision(model, system, data)`: the model's error and throughput against the
  classical integrators at steps $\Delta t/k$, their frontier and the two ratios that
  say whether the model pays at equal cost (`WorkPrecision`).
- `evaluate_reduction(reduction, system, reference)`: a model reduction's projection and
  reduction errors, reduced energy drift and online speed (`ReductionEvaluation`);
  `check_immersion(reduction, points)` whether its decoder is a symplectic immersion
  (`ImmersionCheck`).
"""

from .._format import fmt as fmt  # the number format of the reports, used by the command line
from ._dissipation import dissipation_metrics
from ._frame import frame_projection
from ._invariants import invariants_of
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
from ._work_precision import (
    FLOOR_FACTOR,
    MAX_TRAJECTORIES,
    REFERENCE_TOLERANCE,
    SPEED_TOLERANCE,
    Comparison,
    WorkPoint,
    WorkPrecision,
    compare,
    pareto_frontier,
    work_precision,
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
    "frame_projection",
    "invariants_of",
    "work_precision",
    "WorkPrecision",
    "WorkPoint",
    "Comparison",
    "compare",
    "pareto_frontier",
    "REFERENCE_TOLERANCE",
    "FLOOR_FACTOR",
    "SPEED_TOLERANCE",
    "MAX_TRAJECTORIES",
    "evaluate_reduction",
    "ReductionEvaluation",
    "ImmersionCheck",
    "check_immersion",
    "IMMERSION_TOLERANCE",
    "dissipation_metrics",
]
