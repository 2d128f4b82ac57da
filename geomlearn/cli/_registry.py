r"""The models the command line knows, by name, with their default configurations.

`MODELS` maps a command-line name to a `ModelSpec`; `geomlearn list` prints it and
`geomlearn train --model NAME` builds `spec.build(dim, key=...)`. A new family becomes
available to the command line by adding one entry (`register_model`), nothing else.

A spec also says, by its policies, how the command line *uses* its model — which
systems it trains on (`compatibility`), how it is built (`arguments`), prepared, given a
trainer and fitted (`plan`), evaluated, reported and checked (`evaluation`) — so the
command never asks what kind of model it holds.
"""

from __future__ import annotations

from .. import models, reduction
from ._compatibility import (
    Canonical,
    EvenDimensional,
    EvenOrDriven,
    KnownSeparable,
    LiePoissonSO3,
    Unconstrained,
    UnitMassCanonical,
)
from ._evaluations import DissipativeEvaluation, ReductionEvaluation
from ._plans import (
    DegreesOfFreedom,
    ForcingWhenOdd,
    IntegratorPlan,
    LatentStride,
    LiftPlan,
    ReductionPlan,
)
from ._classical_step import ClassicalStep, StableSubsteps
from ._particle_layout import ParticleLayout
from ._specs import ModelSpec

__all__ = ["ModelSpec", "MODELS", "register_model", "resolve_model", "spec_of"]


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
    """The registered spec of `model`'s class, or a plain `ModelSpec` (an integrator of
    any phase space) for a class that is not registered."""
    for spec in MODELS.values():
        if type(model) is spec.cls:
            return spec
    return ModelSpec(name=type(model).__name__.lower(), cls=type(model), defaults={})


# 16 data steps per application at 2n = 2 (8 above: `LatentStride`): as accurate as 8 and
# faster on the Toda bump (the `toda_reduction` benchmark)
_LIFT = {"reduced_dim": 2, "n_features": 16, "stride": 16, "n_layers": 8, "width": 16}

# The transformers' sizes (the `positional_encoding_cli` benchmark): the symplectic and
# linear symplectic transformers take width 12 and two units, the standard one
# transformer_dim 10; at these sizes `--positional-encoding` adds at most 10 % of the
# parameters (tests/test_positional_placement.py), so capacity does not bound its gain
# within the Levenberg–Marquardt budget. The VPT keeps one unit: with two, cut short by
# the budget, it ended less accurate. Above 12 dimensions (the 400-dimensional Toda
# lattice and wave, trained by Adam: the networks exceed Levenberg–Marquardt's 2000
# parameters) the symplectic transformers keep width `dim` and one unit, where width 12
# with two units cut the valid time; the standard transformer keeps transformer_dim 10.
_WIDE = (12, {"width": None, "L": 1})
_SYMPLECTIC_WINDOWS = dict(compatibility=Canonical(), windows=True, sizes_above=_WIDE,
                           plan=IntegratorPlan(position_last=True))
_LIFTED = dict(compatibility=Canonical(), arguments=LatentStride(above_2=8), plan=LiftPlan(),
               evaluation=ReductionEvaluation())
for _spec in (
    ModelSpec(name="gsympnet", cls=models.GSympNet, defaults={"n_layers": 4, "width": 16},
              compatibility=Canonical()),
    ModelSpec(name="lasympnet", cls=models.LASympNet, defaults={"n_layers": 3, "n_linear": 2},
              compatibility=Canonical()),
    ModelSpec(name="henonnet", cls=models.HenonNet, defaults={"n_layers": 3, "width": 8},
              compatibility=Canonical()),
    ModelSpec(name="psympnet", cls=models.PSympNet, defaults={"n_layers": 8, "max_degree": 4},
              compatibility=Canonical()),
    ModelSpec(name="pair-sympnet", cls=models.PairSympNet, defaults={"n_layers": 4, "width": 16},
              compatibility=Canonical(), arguments=ParticleLayout()),
    ModelSpec(name="rsympnet", cls=models.RSympNet, defaults={"n_layers": 8, "width": 4},
              compatibility=Canonical()),
    ModelSpec(name="lpnet", cls=models.LiePoissonNet, defaults={"n_layers": 6, "width": 2},
              compatibility=LiePoissonSO3()),
    ModelSpec(name="lnn", cls=models.LagrangianNeuralNetwork, defaults={"width": 32, "depth": 2},
              compatibility=UnitMassCanonical(), arguments=DegreesOfFreedom()),
    ModelSpec(name="resnet", cls=models.ResNet, defaults={"width": 16, "depth": 2},
              compatibility=Unconstrained()),
    ModelSpec(name="hnn", cls=models.HamiltonianNeuralNetwork, defaults={"width": 16, "depth": 2},
              compatibility=Canonical()),
    # Störmer–Verlet of the known system between two G-SympNets that start as the identity
    ModelSpec(name="corrected", cls=models.CorrectedIntegrator,
              defaults={"placement": "around", "substeps": 1}, compatibility=KnownSeparable(),
              arguments=ClassicalStep(), sizing=StableSubsteps()),
    ModelSpec(name="conformal-sympnet", cls=models.ConformalSympNet,
              defaults={"n_layers": 4, "width": 16}, compatibility=EvenDimensional(),
              plan=IntegratorPlan(step_from_data=True), evaluation=DissipativeEvaluation()),
    ModelSpec(name="phnn", cls=models.PortHamiltonianNN, defaults={"width": 16, "depth": 2},
              compatibility=EvenOrDriven(), arguments=ForcingWhenOdd(),
              evaluation=DissipativeEvaluation()),
    ModelSpec(name="vp-feedforward", cls=models.VolumePreservingFeedForward,
              defaults={"n_blocks": 6, "n_linear": 1}, compatibility=Unconstrained()),
    ModelSpec(name="transformer", cls=models.Transformer,
              defaults={"n_heads": 1, "L": 2, "n_blocks": 1, "transformer_dim": 10},
              compatibility=Unconstrained(), windows=True),
    ModelSpec(name="vp-transformer", cls=models.VolumePreservingTransformer,
              defaults={"n_blocks": 6, "n_linear": 1, "L": 1}, compatibility=Unconstrained(),
              windows=True),
    ModelSpec(name="linear-symplectic-transformer", cls=models.LinearSymplecticTransformer,
              defaults={"n_sympnet": 2, "width": 12, "L": 2}, **_SYMPLECTIC_WINDOWS),
    ModelSpec(name="symplectic-transformer", cls=models.SymplecticTransformer,
              defaults={"n_sympnet": 2, "width": 12, "L": 2}, **_SYMPLECTIC_WINDOWS),
    # Model reduction: `reduced_dim` is the constructor argument that `--reduced-dim`
    # overrides. `symplectic-autoencoder` trains the reduction that predicts (the
    # `toda_reduction` benchmark): a symplectic autoencoder whose decoder is the manifold
    # cotangent lift (fitted in closed form, a symplectic immersion) with a GSympNet on
    # its codes; `cotangent-lift` is the same spec by the name of its construction.
    # `symplectic-autoencoder-network` trains the SymplecticAutoencoder network
    # (Riemannian Adam: plain Adam would break the decoder's symplectic-immersion
    # property), whose reduced dynamics do not follow the data.
    ModelSpec(name="symplectic-autoencoder", cls=reduction.LiftedIntegrator, defaults=_LIFT, **_LIFTED),
    ModelSpec(name="cotangent-lift", cls=reduction.LiftedIntegrator, defaults=_LIFT, **_LIFTED),
    ModelSpec(name="symplectic-autoencoder-network", cls=reduction.SymplecticAutoencoder,
              defaults={"reduced_dim": 2, "width": 16}, compatibility=Canonical(),
              plan=ReductionPlan(), evaluation=ReductionEvaluation()),
    ModelSpec(name="reduced-integrator", cls=reduction.ReducedIntegrator,
              defaults={"reduced_dim": 2, "integrator": "gsympnet", "n_layers": 4, "width": 16,
                        "train_autoencoder": True}, compatibility=Canonical()),
):
    register_model(_spec)
