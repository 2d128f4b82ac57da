r"""The `geomlearn` command: a thin shell over the library (`geomlearn --help`).

Models come from `geomlearn.cli.MODELS`, data from `geomlearn.cli.for_system`, training
from `geomlearn.fit`. The trainer, evaluation, report figure and structure check come
from the model's registry entry (`geomlearn.cli.ModelSpec`): for an integrator
`geomlearn.training.choose_trainer`, `geomlearn.evaluate`, `geomlearn.plotting.report`
and `geomlearn.check_structure`; for a reduction (the symplectic autoencoder, a
`geomlearn.cli.ReductionSpec`) Riemannian Adam from the PSD,
`geomlearn.evaluation.evaluate_reduction`, `geomlearn.plotting.reduction_report` and
`geomlearn.evaluation.check_immersion`; for the manifold cotangent lift with a latent
integrator (`geomlearn.cli.LiftSpec`) a closed-form fit of the lift and the latent
network trained alone. `geomlearn train` writes a run folder
(`geomlearn.cli.run_folder`) with `model.geomlearn`, `run.json` (the options),
`history.json`, `metrics.json` and `report.png`. Exit status: 0 success, 1 a failed
`check` or training, 2 a usage error (one line `geomlearn: error: …`, nothing written),
130 interrupted (what was trained is saved and `run.json` says `"interrupted": true`).
`--x64` turns on 64-bit mode for this process only; `evaluate` uses the run's precision;
`check` computes residuals in float64. The driven systems written in extended phase
space (`parametric_pendulum`, `forced_rigid_body`: `_recipes.CLOCK_DROPPED`) train on
their physical rows, the clock $(\tau, E)$ dropped — the drive phase is the row's place
in a window, which `--positional-encoding` lets a transformer see — and are evaluated
against their held-out data alone (`_recipes.phase_space`).

The modules: `_main` (the parser and `main`), `_commands` (train, evaluate, check,
list), `_specs` and `_reduction_specs` (how each kind of model is trained and
evaluated), `_registry` (the models by name), `_recipes` (the data by system name), `_runs`
(run folders).
"""

from ..systems import SYSTEMS, resolve_system
from ._commands import model_by_name, system_by_name
from ._errors import CLIError
from ._main import main
from ._recipes import DEFAULT_DT, DEFAULT_STEPS, RECIPES, for_system
from ._reduction_specs import LiftSpec
from ._registry import MODELS, ModelSpec, ReductionSpec, register_model, resolve_model, spec_of
from ._runs import RUN_FILES, run_folder

__all__ = [
    "main",
    "model_by_name",
    "system_by_name",
    "CLIError",
    "MODELS",
    "ModelSpec",
    "ReductionSpec",
    "LiftSpec",
    "register_model",
    "resolve_model",
    "spec_of",
    "SYSTEMS",
    "resolve_system",
    "RECIPES",
    "for_system",
    "DEFAULT_DT",
    "DEFAULT_STEPS",
    "RUN_FILES",
    "run_folder",
]
