"""The models the command line knows, by name, with their default configurations.

`MODELS` maps a command-line name to a `ModelSpec`; `geomlearn list` prints it and
`geomlearn train --model NAME` builds `spec.build(dim, key=...)`. A new family becomes
available to the command line by adding one entry (`register_model`), nothing else.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from . import autoencoder, hnn, lagrangian, resnet, ridge_sympnet, sympnet, transformer, volume_preserving

__all__ = ["ModelSpec", "MODELS", "register_model", "resolve_model"]


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """A model the command line can train.

    **Fields:** `name` (the command-line name), `cls` (the model class), `defaults` (its
    constructor arguments besides `dim` and `key`), `structure` (what it preserves, for
    listings), `needs_canonical` (it needs an even-dimensional canonical phase space
    `z = (q, p)`), `windows` (it reads windows `(T, d)`: the command line's
    `--seq-length`, `--prediction-window` and `--positional-encoding` apply).
    """

    name: str
    cls: type
    defaults: dict[str, Any]
    structure: str
    needs_canonical: bool = False
    windows: bool = False

    def build(self, dim: int, *, key, **overrides):
        """`cls(dim, **defaults, **overrides, key=key)`."""
        return self.cls(dim, **{**self.defaults, **overrides}, key=key)

    def build_for(self, system, *, key, seq_length=None, prediction_window=None,
                  positional_encoding=False, reduced_dim=None):
        """`(model, fit_options)`: the model for `system` with the command line's options.

        Window models get `prediction_window = seq_length` by default (the rollout then
        iterates the model map itself and keeps its structure); `fit_options` holds the
        `seq_length`/`prediction_window` to pass to `fit` and `evaluate`. Options that do
        not apply raise `ValueError`.
        """
        params = inspect.signature(self.cls.__init__).parameters
        overrides, options = {}, {}
        if self.windows:
            T = seq_length
            pw = T if prediction_window is None else prediction_window
            if not 1 <= pw <= T:
                raise ValueError(f"--prediction-window must be between 1 and --seq-length={T}, got {pw}")
            if "seq_length" in params:
                overrides["seq_length"] = T
            overrides["positional_encoding"] = bool(positional_encoding)
            options = {"seq_length": T, "prediction_window": pw}
        if reduced_dim is not None:
            if "reduced_dim" not in params:
                raise ValueError(f"--reduced-dim does not apply to {self.name}")
            overrides["reduced_dim"] = reduced_dim
        try:
            return self.build(system.dim, key=key, **overrides), options
        except (TypeError, ValueError) as e:
            raise ValueError(f"cannot build {self.name} for {type(system).__name__}: {e}") from None

    def incompatibility(self, system) -> str | None:
        """Why this model cannot be trained on `system`, or `None`."""
        if self.needs_canonical and (not system.canonical or system.dim % 2):
            return (
                f"{self.cls.__name__} needs a canonical phase space z = (q, p) of even "
                f"dimension 2n; {type(system).__name__} is {system.dim}-dimensional and "
                f"{'not canonical' if not system.canonical else 'odd-dimensional'} (it "
                "preserves volume, not a symplectic form). Use a volume-preserving model "
                "(vp-feedforward, vp-transformer) or an unconstrained one (resnet, transformer)."
            )
        n_heads = self.defaults.get("n_heads")
        if n_heads and system.dim % n_heads:
            return f"{self.cls.__name__} with {n_heads} heads needs dim divisible by {n_heads}"
        return None


class _DegreesOfFreedomSpec(ModelSpec):
    """A model whose first argument is the number of degrees of freedom `n = dim // 2`
    (a Lagrangian network of states `(q, q̇)`), not the state dimension."""

    def build(self, dim: int, *, key, **overrides):
        return self.cls(dim // 2, **{**self.defaults, **overrides}, key=key)


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


for _spec in (
    ModelSpec("gsympnet", sympnet.GSympNet, {"n_layers": 4, "width": 16}, "symplectic", True),
    ModelSpec("lasympnet", sympnet.LASympNet, {"n_layers": 3, "n_linear": 2}, "symplectic", True),
    ModelSpec("henonnet", sympnet.HenonNet, {"n_layers": 3, "width": 8}, "symplectic", True),
    ModelSpec("psympnet", ridge_sympnet.PSympNet, {"n_layers": 8, "max_degree": 4}, "symplectic", True),
    ModelSpec("rsympnet", ridge_sympnet.RSympNet, {"n_layers": 8, "width": 4}, "symplectic", True),
    _DegreesOfFreedomSpec("lnn", lagrangian.LagrangianNeuralNetwork, {"width": 32, "depth": 2}, "none", True),
    ModelSpec("resnet", resnet.ResNet, {"width": 16, "depth": 2}, "none"),
    ModelSpec("hnn", hnn.HamiltonianNeuralNetwork, {"width": 16, "depth": 2}, "symplectic", True),
    ModelSpec("vp-feedforward", volume_preserving.VolumePreservingFeedForward,
              {"n_blocks": 6, "n_linear": 1}, "volume"),
    ModelSpec("transformer", transformer.Transformer, {"n_heads": 1, "L": 2, "n_blocks": 1},
              "none", windows=True),
    ModelSpec("vp-transformer", volume_preserving.VolumePreservingTransformer,
              {"n_blocks": 6, "n_linear": 1, "L": 1}, "volume", windows=True),
    ModelSpec("linear-symplectic-transformer", transformer.LinearSymplecticTransformer,
              {"n_sympnet": 2, "L": 1}, "symplectic", True, windows=True),
    ModelSpec("symplectic-transformer", transformer.SymplecticTransformer,
              {"n_sympnet": 2, "L": 1}, "symplectic", True, windows=True),
):
    register_model(_spec)


# Model reduction (issue 15): `reduced_dim` is the constructor argument that the command
# line's `--reduced-dim` overrides. Train the autoencoder with
# `optimizer=geomlearn.manifolds.riemannian_adam(...)` to keep its Stiefel layers on the
# manifold (plain Adam breaks the decoder's symplectic-immersion property).
for _spec in (
    ModelSpec("symplectic-autoencoder", autoencoder.SymplecticAutoencoder,
              {"reduced_dim": 2, "width": 16}, "symplectic", True),
    ModelSpec("reduced-integrator", autoencoder.ReducedIntegrator,
              {"reduced_dim": 2, "integrator": "gsympnet", "n_layers": 4, "width": 16,
               "train_autoencoder": True}, "none", True),
):
    register_model(_spec)
