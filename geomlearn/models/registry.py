"""The models the command line knows, by name, with their default configurations.

`MODELS` maps a command-line name to a `ModelSpec`; `geomlearn list` prints it and
`geomlearn train --model NAME` builds `spec.build(dim, key=...)`. A new family becomes
available to the command line by adding one entry (`register_model`), nothing else.

A spec also says how the command line *uses* its model — `prepare` (check, and start from
the data), `trainer`, `evaluate`, `report` and `check` — so the command never asks what
kind of model it holds. The defaults serve integrators (`geomlearn.evaluate`,
`geomlearn.check_structure`, `geomlearn.plotting.report`); `ReductionSpec` serves
reductions (`geomlearn.reduction.evaluate_reduction`, `check_immersion`,
`geomlearn.plotting.reduction_report`).
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from . import autoencoder, hnn, lagrangian, resnet, ridge_sympnet, sympnet, transformer, volume_preserving

__all__ = ["ModelSpec", "ReductionSpec", "MODELS", "register_model", "resolve_model", "spec_of"]


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

    # ------------------------------------------------ how the command line uses the model

    def prepare(self, model, task, sample, data):
        """The model to train on `data` (a `TrajectoryData`), after checking that it can
        be used on a training sample like `sample`: an integrator must have a one-step
        map (`TypeError` otherwise)."""
        import jax

        jax.eval_shape(lambda z: model.step(z, task), sample)
        return model

    def trainer(self, model, n_samples: int, *, batch_size=None, **options):
        """`(optimizer, epochs, time_budget, description)`: `geomlearn.training.choose_trainer`
        (`batch_size`, the minibatch size the command line chose, is not needed here)."""
        from ..training import choose_trainer

        return choose_trainer(model, n_samples, **options)

    def evaluate(self, model, system, data, **options):
        """`geomlearn.evaluate(model, system, data, **options)` (the rollout against the data)."""
        from ..evaluation import evaluate

        return evaluate(model, system, data, **options)

    def report(self, path, *, run: dict, history: dict, evaluation) -> bool:
        """The report figure (`geomlearn.plotting.report`)."""
        from ..plotting import report

        return report(path, history=history, evaluation=evaluation,
                      loss_name=run.get("loss", "relative"), labels=run.get("labels") or (),
                      canonical=bool(run.get("canonical", True)))

    def check(self, model, points, *, prediction_window=None, dt=None):
        """`geomlearn.check_structure` of the iterated map (an object with `passed` and
        `report(title=...)`)."""
        from ..evaluation import check_structure

        return check_structure(model, points, prediction_window=prediction_window, dt=dt)

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

    def incompatibility(self, system) -> str | None:
        """Also refuse a system whose canonical momenta are not its velocities: a
        Lagrangian network reads the states as $(q, \dot q)$, and the data of the command
        line are the system's canonical $(q, p)$. They agree only where $\dot q =
        \partial H/\partial p = p$ (unit masses, kinetic energy $|p|^2/2$), checked on
        perturbed default initial conditions."""
        why = super().incompatibility(system)
        if why or _momenta_are_velocities(system):
            return why
        return (
            f"{self.cls.__name__} learns from states (q, q̇), but {type(system).__name__}'s "
            "data are canonical (q, p) with p ≠ q̇ (its kinetic energy is not |p|²/2), so "
            "it would fit the wrong dynamics. Use a system with unit masses (pendulum, "
            "harmonic_oscillator, henon_heiles, kepler, ...), or convert the momenta to "
            "velocities (q̇ = ∂H/∂p) and train in Python."
        )


def _momenta_are_velocities(system) -> bool:
    """Whether $\partial H/\partial p = p$ for `system`, at its first default initial
    conditions perturbed by 0.1·N(0, 1) (float64 when enabled, else float32 tolerances)."""
    import jax
    import jax.numpy as jnp

    z0 = jnp.asarray(system.default_initial_conditions())[:4]
    z = z0 + 0.1 * jax.random.normal(jax.random.PRNGKey(0), z0.shape, z0.dtype)
    n = system.dim // 2
    qdot = jax.vmap(system.vector_field)(z)[:, :n]
    return bool(jnp.allclose(qdot, z[:, n:], rtol=1e-5, atol=1e-6))


class ReductionSpec(ModelSpec):
    r"""A model reduction (an encoder/decoder pair, not an integrator), e.g. the
    `SymplecticAutoencoder`.

    The command line starts it from the PSD of the training snapshots
    (`initialize_from_psd`), trains the reconstruction with Riemannian Adam under a
    cosine learning-rate schedule over the run (`epochs` default `default_epochs`),
    evaluates the projection and reduction errors against the full solution
    (`geomlearn.reduction.evaluate_reduction`), draws the wave packet of the full and the
    reduced model (`geomlearn.plotting.reduction_report`), and checks that the decoder is
    a symplectic immersion, $(D\Psi^d)^\top\mathbb{J}_{2N}D\Psi^d = \mathbb{J}_{2n}$
    (`geomlearn.reduction.check_immersion`).
    """

    default_epochs: int = 60
    learning_rate: float = 1e-2

    def prepare(self, model, task, sample, data):
        import jax

        from .autoencoder import initialize_from_psd

        jax.eval_shape(model, sample)  # the reconstruction of one snapshot
        return initialize_from_psd(model, data.states)

    def trainer(self, model, n_samples: int, *, batch_size=256, trainer="auto", epochs=None,
                time_budget=None):
        import optax

        from ..manifolds import riemannian_adam

        if trainer == "lm":
            raise ValueError(f"{self.name} trains with Riemannian Adam (its Stiefel "
                             "matrices must stay on the manifold); --trainer lm does not apply")
        epochs = self.default_epochs if epochs is None else epochs
        steps = epochs * max(1, n_samples // batch_size)  # optimizer updates (fit drops the remainder)
        schedule = optax.cosine_decay_schedule(self.learning_rate, steps, alpha=1e-2)
        return riemannian_adam(schedule), epochs, time_budget, (
            f"Riemannian Adam, cosine learning rate {self.learning_rate:g} → "
            f"{self.learning_rate * 1e-2:g}, {epochs} epochs, started from the PSD")

    def evaluate(self, model, system, data, **options):
        from ..reduction import evaluate_reduction

        return evaluate_reduction(model, system, data)

    def report(self, path, *, run, history, evaluation) -> bool:
        from ..plotting import reduction_report

        return reduction_report(path, history=history, evaluation=evaluation,
                                loss_name=run.get("loss", "relative"))

    def check(self, model, points, *, prediction_window=None, dt=None):
        from ..reduction import check_immersion

        return check_immersion(model, points)


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
# line's `--reduced-dim` overrides. The autoencoder trains with Riemannian Adam (plain
# Adam would break the decoder's symplectic-immersion property); see `ReductionSpec`.
for _spec in (
    ReductionSpec("symplectic-autoencoder", autoencoder.SymplecticAutoencoder,
                  {"reduced_dim": 2, "width": 16}, "symplectic", True),
    ModelSpec("reduced-integrator", autoencoder.ReducedIntegrator,
              {"reduced_dim": 2, "integrator": "gsympnet", "n_layers": 4, "width": 16,
               "train_autoencoder": True}, "none", True),
):
    register_model(_spec)
