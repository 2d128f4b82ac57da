r"""The `geomlearn` command: a thin shell over the library (`geomlearn --help`).

Models come from `geomlearn.cli.MODELS`, data from `geomlearn.cli.for_system`, training
from `geomlearn.fit`. How a model is trained, evaluated, reported and checked comes from
its registry entry, a `geomlearn.cli.ModelSpec` built from small policy objects:
`compatibility` (which systems: `Canonical`, `Unconstrained`, `UnitMassCanonical`,
`LiePoissonSO3`, `EvenDimensional`, `EvenOrDriven`), `arguments` (how its constructor is
called: `StateDimension`, `DegreesOfFreedom`, `ForcingWhenOdd`, `LatentStride`), `plan`
(prepare, trainer, fit: `IntegratorPlan`, with the trainer `geomlearn.cli.choose_trainer`
picks; `ReductionPlan`, Riemannian Adam from the PSD; `LiftPlan`, a closed-form fit of
the cotangent lift and the latent network trained alone) and `evaluation`
(`IntegratorEvaluation`: `geomlearn.evaluate`, `geomlearn.plotting.report`,
`geomlearn.check_structure`; `DissipativeEvaluation`, with the energy balance;
`ReductionEvaluation`: `geomlearn.evaluation.evaluate_reduction`,
`geomlearn.plotting.reduction_report`, `geomlearn.evaluation.check_immersion`).

`geomlearn train` parses its flags once into a `geomlearn.cli.TrainOptions` and writes a
run folder (`geomlearn.cli.run_folder`) with `model.geomlearn`, `run.json` (the options,
under `"options"`, and what the data were), `history.json`, `metrics.json` and
`report.png`; `evaluate`, `predict` and `check` read the options back
(`TrainOptions.from_run`). Exit status: 0 success, 1 a failed `check` or training, 2 a
usage error (one line `geomlearn: error: …`, nothing written), 130 interrupted (what was
trained is saved and `run.json` says `"interrupted": true`). `--x64` turns on 64-bit
mode for this process only; `evaluate` uses the run's precision; `check` computes
residuals in float64. The driven systems written in extended phase space
(`parametric_pendulum`, `forced_rigid_body`: `_recipes.CLOCK_DROPPED`) train on their
physical rows, the clock $(\tau, E)$ dropped — the drive phase is the row's place in a
window, which `--positional-encoding` lets a transformer see — and are evaluated against
their held-out data alone (`_recipes.phase_space`). A user's file (`--data FILE`) is
compared with the classical integrators at equal cost when its Hamiltonian is given
(`--hamiltonian MODULE:FUNCTION`, a `.py` file or an importable module, and
`--hamiltonian-separable` for the explicit splitting methods: `_hamiltonian`).

The modules: `_main` (the parser and `main`), `_options` (the train command's options),
`_commands` (train, evaluate, check, list), `_predict`, `_specs` (`ModelSpec`), the
policies (`_compatibility`, `_plans`, `_evaluations`), `_trainer_choice`, `_registry` (the
models by name), `_recipes` (the data by system name), `_own_data` (a user's file),
`_hamiltonian` (a user's Hamiltonian), `_symmetry` (`--symmetry`), `_runs` (run folders).
"""

from ._system_names import SYSTEMS, resolve_system
from ._commands import model_by_name, system_by_name
from ._compatibility import (
    AbstractCompatibility,
    Canonical,
    EvenDimensional,
    EvenOrDriven,
    KnownSeparable,
    LiePoissonSO3,
    Unconstrained,
    UnitMassCanonical,
)
from ._errors import CLIError
from ._evaluations import (
    AbstractEvaluation,
    DissipativeEvaluation,
    IntegratorEvaluation,
    ReductionEvaluation,
)
from ._classical_step import ClassicalStep, StableSubsteps
from ._main import main
from ._options import TrainOptions
from ._plans import (
    AbstractArguments,
    AbstractPlan,
    AbstractSizing,
    AsBuilt,
    DegreesOfFreedom,
    ForcingWhenOdd,
    IntegratorPlan,
    LatentStride,
    LiftPlan,
    ReductionPlan,
    StateDimension,
)
from ._recipes import DEFAULT_DT, DEFAULT_STEPS, RECIPES, for_system
from ._registry import MODELS, ModelSpec, register_model, resolve_model, spec_of
from ._runs import NOT_TRAINED, RUN_FILES, run_folder
from ._trainer_choice import choose_trainer

__all__ = [
    "main",
    "model_by_name",
    "system_by_name",
    "CLIError",
    "MODELS",
    "ModelSpec",
    "register_model",
    "resolve_model",
    "spec_of",
    "AbstractCompatibility",
    "Unconstrained",
    "Canonical",
    "UnitMassCanonical",
    "LiePoissonSO3",
    "EvenDimensional",
    "EvenOrDriven",
    "KnownSeparable",
    "AbstractArguments",
    "StateDimension",
    "DegreesOfFreedom",
    "ForcingWhenOdd",
    "ClassicalStep",
    "StableSubsteps",
    "AbstractSizing",
    "AsBuilt",
    "LatentStride",
    "AbstractPlan",
    "IntegratorPlan",
    "ReductionPlan",
    "LiftPlan",
    "AbstractEvaluation",
    "IntegratorEvaluation",
    "DissipativeEvaluation",
    "ReductionEvaluation",
    "TrainOptions",
    "choose_trainer",
    "SYSTEMS",
    "resolve_system",
    "RECIPES",
    "for_system",
    "DEFAULT_DT",
    "DEFAULT_STEPS",
    "NOT_TRAINED",
    "RUN_FILES",
    "run_folder",
]

#: Spec classes of earlier versions, now one `ModelSpec` with policies.
_MOVED = {
    "ReductionSpec": "ModelSpec(..., plan=ReductionPlan(), evaluation=ReductionEvaluation())",
    "LiftSpec": "ModelSpec(..., arguments=LatentStride(), plan=LiftPlan(), "
                "evaluation=ReductionEvaluation())",
}


def __getattr__(name: str):
    # an `ImportError` (not an `AttributeError`) so that `from geomlearn.cli import
    # ReductionSpec` shows where the name went too
    if name in _MOVED:
        raise ImportError(f"geomlearn.cli.{name} is now geomlearn.cli.{_MOVED[name]}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
