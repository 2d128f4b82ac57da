r"""The models the command line knows, by name, with their default configurations.

`MODELS` maps a command-line name to a `ModelSpec`; `geomlearn list` prints it and
`geomlearn train --model NAME` builds `spec.build(dim, key=...)`. A new family becomes
available to the command line by adding one entry (`register_model`), nothing else.

A spec also says how the command line *uses* its model — `prepare` (check, and start from
the data), `trainer`, `evaluate`, `report` and `check` — so the command never asks what
kind of model it holds. The defaults serve integrators (`geomlearn.evaluate`,
`geomlearn.check_structure`, `geomlearn.plotting.report`); `ReductionSpec` serves
reductions (`geomlearn.evaluation.evaluate_reduction`, `check_immersion`,
`geomlearn.plotting.reduction_report`).
"""

from __future__ import annotations

from .. import models
from ._reduction_specs import LiftSpec, ReductionSpec
from ._specs import (
    ModelSpec,
    ConformalSpec,
    DegreesOfFreedomSpec,
    LiePoissonSpec,
    PortHamiltonianSpec,
)

__all__ = ["ModelSpec", "ReductionSpec", "MODELS", "register_model", "resolve_model", "spec_of"]


MODELS: dict[str, ModelSpec] = {}


def register_model(spec: ModelSpec) -> ModelSpec:
    """Add `spec` to `MODELS` (a name may be registered once)."""
    if spec.name in MODELS:
        raise ValueError(f"a model named {spec.name!r} is already registered")
    MODELS[spec.name] = spec
    return spec


def resolve_model(name: str) -> ModelSpec:
    """The spec for a command-line name or a class name (case-insensitive);
    `ValueError` listing the valid names otherwise."""
    key = name.strip().lower().replace("_", "-")
    if key in MODELS:
        return MODELS[key]
    for spec in MODELS.values():
        if key == spec.cls.__name__.lower():
            return spec
    raise ValueError(f"unknown model {name!r}; valid models: {', '.join(MODELS)}")


def spec_of(model) -> ModelSpec:
    """The registered spec of `model`'s class, or a plain `ModelSpec` (an integrator) for
    a class that is not registered."""
    for spec in MODELS.values():
        if type(model) is spec.cls:
            return spec
    return ModelSpec(type(model).__name__.lower(), type(model), {}, model.structure)


# 16 data steps per application at 2n = 2 (8 above: `LiftSpec.build`), measured against 8
# on the Toda bump over three seeds: as accurate (0.88-0.94x the reduced system's error,
# against 0.85-1.13x) and twice as fast (572-861x the full model, against 339-406x);
# benchmarks/RESULTS.md
_LIFT = {"reduced_dim": 2, "n_features": 16, "stride": 16, "n_layers": 8, "width": 16}

# The transformers' sizes (since 2026-12-03; benchmarks/RESULTS.md, "The command line's
# transformer sizes"): the symplectic and linear symplectic transformers take width 12
# and two units (width `dim` and one unit before), the standard one transformer_dim 10
# (`dim` before). At the earlier sizes (26-176 parameters) `--positional-encoding` added
# 10-42 % of the parameters (LM cost ∝ P²) and capacity bounded its gain; at these it adds
# at most 10 % (tests/test_positional_placement.py), and through `geomlearn train` they
# were 3-150x more accurate on Hénon–Heiles and the driven pendulum within the 150-s
# budget (the standard transformer uses all of it on Hénon–Heiles and the rigid body).
# The VPT keeps one unit: with two, cut short by the budget, it ended 1.6x less accurate on
# Hénon–Heiles, ~100x on the rigid body and failed on the pendulum (one unit: 118-151 s).
# Above 12 dimensions (the 400-dimensional Toda lattice and wave, trained by Adam: the
# networks exceed LM's 2000 parameters) the symplectic transformers keep width `dim` and
# one unit: width 12 with two units cut the valid time 222 -> 57 steps (Toda) and
# 128 -> 15 (wave) for the symplectic one, 1599 -> 270 (Toda; wave 217 -> 234) for the
# linear symplectic one. The standard transformer keeps transformer_dim 10 (Toda: 68
# steps, against 12 at transformer_dim = dim with 1.6 million parameters).
_WIDE = (12, {"width": None, "L": 1})
for _spec in (
    ModelSpec("gsympnet", models.GSympNet, {"n_layers": 4, "width": 16}, "symplectic", True),
    ModelSpec("lasympnet", models.LASympNet, {"n_layers": 3, "n_linear": 2}, "symplectic", True),
    ModelSpec("henonnet", models.HenonNet, {"n_layers": 3, "width": 8}, "symplectic", True),
    ModelSpec("psympnet", models.PSympNet, {"n_layers": 8, "max_degree": 4}, "symplectic", True),
    ModelSpec("rsympnet", models.RSympNet, {"n_layers": 8, "width": 4}, "symplectic", True),
    LiePoissonSpec("lpnet", models.LiePoissonNet, {"n_layers": 6, "width": 2}, "lie-poisson"),
    DegreesOfFreedomSpec("lnn", models.LagrangianNeuralNetwork, {"width": 32, "depth": 2}, "none", True),
    ModelSpec("resnet", models.ResNet, {"width": 16, "depth": 2}, "none"),
    ModelSpec("hnn", models.HamiltonianNeuralNetwork, {"width": 16, "depth": 2}, "symplectic", True),
    ConformalSpec("conformal-sympnet", models.ConformalSympNet, {"n_layers": 4, "width": 16},
                   "conformal factor"),
    PortHamiltonianSpec("phnn", models.PortHamiltonianNN, {"width": 16, "depth": 2}, "energy balance"),
    ModelSpec("vp-feedforward", models.VolumePreservingFeedForward,
              {"n_blocks": 6, "n_linear": 1}, "volume"),
    ModelSpec("transformer", models.Transformer,
              {"n_heads": 1, "L": 2, "n_blocks": 1, "transformer_dim": 10},
              "none", windows=True),
    ModelSpec("vp-transformer", models.VolumePreservingTransformer,
              {"n_blocks": 6, "n_linear": 1, "L": 1}, "volume", windows=True),
    ModelSpec("linear-symplectic-transformer", models.LinearSymplecticTransformer,
              {"n_sympnet": 2, "width": 12, "L": 2}, "symplectic", True, windows=True,
              position_last=True, sizes_above=_WIDE),
    ModelSpec("symplectic-transformer", models.SymplecticTransformer,
              {"n_sympnet": 2, "width": 12, "L": 2}, "symplectic", True, windows=True,
              position_last=True, sizes_above=_WIDE),
    # Model reduction: `reduced_dim` is the constructor argument that `--reduced-dim`
    # overrides. `symplectic-autoencoder` trains the reduction that predicts (measured on
    # the Toda bump, benchmarks/RESULTS.md): a symplectic autoencoder whose decoder is the
    # manifold cotangent lift (fitted in closed form, a symplectic immersion) with a
    # GSympNet on its codes taking 16 data steps per application (8 at 2n >= 4);
    # `cotangent-lift` is the same spec by the name of its construction.
    # `symplectic-autoencoder-network` trains the SymplecticAutoencoder network (Riemannian
    # Adam: plain Adam would break the decoder's symplectic-immersion property; see
    # `ReductionSpec`), whose reduced dynamics do not follow the data.
    LiftSpec("symplectic-autoencoder", models.LiftedIntegrator, _LIFT, "symplectic", True),
    LiftSpec("cotangent-lift", models.LiftedIntegrator, _LIFT, "symplectic", True),
    ReductionSpec("symplectic-autoencoder-network", models.SymplecticAutoencoder,
                  {"reduced_dim": 2, "width": 16}, "symplectic", True),
    ModelSpec("reduced-integrator", models.ReducedIntegrator,
              {"reduced_dim": 2, "integrator": "gsympnet", "n_layers": 4, "width": 16,
               "train_autoencoder": True}, "none", True),
):
    register_model(_spec)
