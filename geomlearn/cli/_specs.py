r"""How the command line uses a model: `ModelSpec` and its variants.

A spec says how to build a model (`build`), prepare it from the data (`prepare`), train it
(`trainer`), evaluate, report and check it. The defaults serve integrators
(`geomlearn.evaluate`, `geomlearn.check_structure`, `geomlearn.plotting.report`);
the dissipative specs serve the conformal and port-Hamiltonian networks, and
`geomlearn.cli._reduction_specs` the reductions. The table of registered specs is `geomlearn.cli._registry.MODELS`.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..evaluation import (
    check_structure,
    dissipation_metrics,
    evaluate,
)
from ..plotting import energy_report, report
from ..systems import AbstractPortHamiltonianSystem
from ..training import choose_trainer, fit, fit_position_last, trains_position_last

__all__ = [
    "parse_model_options",
    "ModelSpec",
    "DegreesOfFreedomSpec",
    "LiePoissonSpec",
    "DissipativeSpec",
    "ConformalSpec",
    "PortHamiltonianSpec",
]


#: Constructor arguments that the command line sets itself, and the flag that sets each.
_OWN_FLAGS = {"key": "--seed", "dtype": "--x64", "seq_length": "--seq-length",
              "prediction_window": "--prediction-window",
              "positional_encoding": "--positional-encoding", "reduced_dim": "--reduced-dim"}


def parse_model_options(pairs) -> dict[str, Any]:
    """`{name: value}` from the strings `NAME=VALUE` of `--model-option`: a value is read
    as a Python literal (`12`, `0.5`, `True`, `None`, `(16, 16)`), otherwise kept as a
    string (`activation=tanh`). `ValueError` for a malformed pair or a name given twice."""
    options: dict[str, Any] = {}
    for pair in pairs or ():
        name, sep, text = str(pair).partition("=")
        if not sep or not name.isidentifier() or not text:
            raise ValueError(f"--model-option expects NAME=VALUE (e.g. width=12), got {pair!r}")
        if name in options:
            raise ValueError(f"--model-option {name} is given twice")
        try:
            options[name] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            options[name] = text
    return options


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """A model the command line can train.

    **Fields:** `name` (the command-line name), `cls` (the model class), `defaults` (its
    constructor arguments besides `dim` and `key`), `structure` (what it preserves, for
    listings), `needs_canonical` (it needs an even-dimensional canonical phase space
    `z = (q, p)`), `windows` (it reads windows `(T, d)`: the command line's
    `--seq-length`, `--prediction-window` and `--positional-encoding` apply),
    `position_last` (with trainable position gains under Levenberg–Marquardt, train the
    model without its position signal for half the budget first:
    `geomlearn.training.fit_position_last`; measured per family, see `fit`),
    `sizes_above` (`(D, options)`: for data of more than `D` dimensions, `options`
    replace those entries of `defaults`; `defaults_for`).
    """

    name: str
    cls: type
    defaults: dict[str, Any]
    structure: str
    needs_canonical: bool = False
    windows: bool = False
    position_last: bool = False
    sizes_above: tuple[int, dict[str, Any]] | None = None

    def defaults_for(self, dim: int) -> dict[str, Any]:
        """The constructor arguments for data of dimension `dim`: `defaults`, with the
        entries of `sizes_above` when `dim` exceeds its bound."""
        if self.sizes_above is not None and dim > self.sizes_above[0]:
            return {**self.defaults, **self.sizes_above[1]}
        return dict(self.defaults)

    def build(self, dim: int, *, key, **overrides):
        """`cls(dim, **defaults_for(dim), **overrides, key=key)`."""
        return self.cls(dim, **{**self.defaults_for(dim), **overrides}, key=key)

    def _window_options(self, params, seq_length, prediction_window, positional_encoding):
        """`(overrides, fit_options)` of a window model: `prediction_window = seq_length`
        by default (the rollout then iterates the model map itself and keeps its
        structure)."""
        T = seq_length
        pw = T if prediction_window is None else prediction_window
        if not 1 <= pw <= T:
            raise ValueError(f"--prediction-window must be between 1 and --seq-length={T}, got {pw}")
        overrides = {"seq_length": T} if "seq_length" in params else {}
        overrides["positional_encoding"] = (positional_encoding if isinstance(positional_encoding, str)
                                            else bool(positional_encoding))
        return overrides, {"seq_length": T, "prediction_window": pw}

    def build_for(self, system, *, key, seq_length=None, prediction_window=None,
                  positional_encoding=False, reduced_dim=None, model_options=None):
        """`(model, fit_options)`: the model for `system` with the command line's options.

        Window models get `prediction_window = seq_length` by default (the rollout then
        iterates the model map itself and keeps its structure); `fit_options` holds the
        `seq_length`/`prediction_window` to pass to `fit` and `evaluate`.
        `model_options` (`--model-option`) replace the spec's `defaults` or set other
        constructor arguments (e.g. `{"width": 12, "L": 2}`). Options that do not apply
        raise `ValueError`.
        """
        params = inspect.signature(self.cls.__init__).parameters
        chosen = self._checked_options(params, model_options or {})
        overrides, options = {}, {}
        if self.windows:
            overrides, options = self._window_options(
                params, seq_length, prediction_window, positional_encoding)
        if reduced_dim is not None:
            if "reduced_dim" not in params:
                raise ValueError(f"--reduced-dim does not apply to {self.name}")
            overrides["reduced_dim"] = reduced_dim
        try:
            return self.build(system.dim, key=key, **chosen, **overrides), options
        except (TypeError, ValueError) as e:
            raise ValueError(f"cannot build {self.name} for {type(system).__name__}: {e}") from None

    def _checked_options(self, params, model_options: dict) -> dict:
        """`model_options`, checked against the constructor's arguments: not the state
        dimension (the data's), not one the command line sets by its own flag."""
        names = [n for n in params if n != "self"]
        accepted = [n for n in names[1:] if n not in _OWN_FLAGS
                    and params[n].kind not in (params[n].VAR_POSITIONAL, params[n].VAR_KEYWORD)]
        for name in model_options:
            if name in _OWN_FLAGS and name in names:
                raise ValueError(f"--model-option {name}: set it with {_OWN_FLAGS[name]}")
            if name not in accepted:
                raise ValueError(f"--model-option {name}: {self.cls.__name__} takes "
                                 f"{', '.join(accepted) or 'no options'}, not {name!r}"
                                 + (" (the dimension comes from the data)" if names and name == names[0] else ""))
        return dict(model_options)

    # ------------------------------------------------ how the command line uses the model

    def prepare(self, model, task, sample, data):
        """The model to train on `data` (a `TrajectoryData`), after checking that it can
        be iterated on a state of the training samples' dtype: an integrator must have a
        one-step map (`TypeError` otherwise). (A sample is not always a state: a
        port-Hamiltonian network's is a pair of states.)"""
        state = jax.ShapeDtypeStruct(model.state_shape(task), sample.dtype)
        jax.eval_shape(lambda z: model.step(z, task), state)
        return model

    def trainer(self, model, n_samples: int, *, batch_size=None, **options):
        """`(optimizer, epochs, time_budget, description)`: `geomlearn.training.choose_trainer`
        (`batch_size`, the minibatch size the command line chose, is not needed here); the
        description says when the model trains position-last (see `fit`)."""
        optimizer, epochs, budget, how = choose_trainer(model, n_samples, **options)
        if self.position_last and trains_position_last(model, optimizer):
            how += "; position-last: the first half without the position signal"
        return optimizer, epochs, budget, how

    def fit(self, model, data, *, system=None, **options):
        """`(model, history)`: `geomlearn.fit(model, data, **options)` (`system`, the
        built-in system of the data or `None` for a user's file, is not needed here) — or,
        for a spec with `position_last` and a model with trainable position gains under
        Levenberg–Marquardt, `geomlearn.training.fit_position_last` (the model without its
        position signal for half the budget, then with it). Measured through the command
        line (ten seeds, benchmarks/RESULTS.md): it turns the symplectic transformers'
        encoding from a gamble (median 1.69× and 1.22× worse on the driven pendulum) into
        a gain (2.3× and 1.7× better, no seed worse); the standard transformer's gain
        fell from 2.7× to 1.1× and the VPT's stayed none, so theirs train from the start."""
        if self.position_last and trains_position_last(model, options.get("optimizer")):
            return fit_position_last(model, data, **options)
        return fit(model, data, **options)

    def evaluate(self, model, system, data, **options):
        """`geomlearn.evaluate(model, system, data, **options)` (the rollout against the data)."""
        return evaluate(model, system, data, **options)

    def report(self, path, *, run: dict, history: dict, evaluation) -> bool:
        """The report figure (`geomlearn.plotting.report`)."""
        return report(path, history=history, evaluation=evaluation,
                      loss_name=run.get("loss", "relative"), labels=run.get("labels") or (),
                      canonical=bool(run.get("canonical", True)))

    def check(self, model, points, *, prediction_window=None, dt=None):
        """`geomlearn.check_structure` of the iterated map (an object with `passed` and
        `report(title=...)`)."""
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
        n_heads = self.defaults_for(system.dim).get("n_heads")
        if n_heads and system.dim % n_heads:
            return f"{self.cls.__name__} with {n_heads} heads needs dim divisible by {n_heads}"
        return None


class DegreesOfFreedomSpec(ModelSpec):
    """A model whose first argument is the number of degrees of freedom `n = dim // 2`
    (a Lagrangian network of states `(q, q̇)`), not the state dimension."""

    def build(self, dim: int, *, key, **overrides):
        return self.cls(dim // 2, **{**self.defaults_for(dim), **overrides}, key=key)

    def incompatibility(self, system) -> str | None:
        r"""Also refuse a system whose canonical momenta are not its velocities: a
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
    r"""Whether $\partial H/\partial p = p$ for `system`, at its first default initial
    conditions perturbed by 0.1·N(0, 1) (float64 when enabled, else float32 tolerances)."""
    z0 = np.asarray(system.default_initial_conditions())[:4]
    z = jnp.asarray(z0 + 0.1 * np.random.default_rng(0).standard_normal(z0.shape).astype(z0.dtype))
    n = system.dim // 2
    # one compiled program per system (`geomlearn list` asks every system; eagerly, every
    # operation of every vector field compiled on its own took seconds)
    qdot = np.asarray(jax.jit(jax.vmap(system.vector_field))(z))[:, :n]
    return bool(np.allclose(qdot, np.asarray(z)[:, n:], rtol=1e-5, atol=1e-6))


class LiePoissonSpec(ModelSpec):
    r"""A Lie–Poisson network of $\mathfrak{so}(3)^* \cong \mathbb{R}^3$: it needs a
    three-dimensional system whose state is a rigid body's angular momentum."""

    def incompatibility(self, system) -> str | None:
        if isinstance(system, AbstractPortHamiltonianSystem):
            return (f"{self.cls.__name__} is a Lie–Poisson map of so(3)*; "
                    f"{type(system).__name__}'s states are (q, p, t) of a damped or driven system")
        if system.dim != 3:
            return (
                f"{self.cls.__name__} is a Lie–Poisson map of so(3)* = R^3 (a rigid body's "
                f"angular momentum); {type(system).__name__} is {system.dim}-dimensional")
        return super().incompatibility(system)


class DissipativeSpec(ModelSpec):
    r"""A model of damped or driven systems. On a port-Hamiltonian system its evaluation
    adds the learned damping against the true one, the energy error and the energy-balance
    residual (`geomlearn.evaluation.dissipation_metrics`), and its report adds
    `energy.png`, the energy against time with the decay the model predicts."""

    def evaluate(self, model, system, data, **options):
        result = evaluate(model, system, data, **options)
        if isinstance(system, AbstractPortHamiltonianSystem):
            metrics, series = dissipation_metrics(model, system, result.rollout, result.reference,
                                                  float(data.dt))
            result.update(metrics)
            result.energy_series = series
        return result

    def report(self, path, *, run, history, evaluation) -> bool:
        wrote = super().report(path, run=run, history=history, evaluation=evaluation)
        series = getattr(evaluation, "energy_series", None)
        if series is not None:
            energy_report(path.with_name("energy.png"), series=series,
                          title=f"{self.cls.__name__} on {run.get('system')}")
        return wrote


class ConformalSpec(DissipativeSpec):
    """A conformally symplectic network: any even-dimensional phase space `z = (q, p)`
    (conservative or damped); its step `dt` is the data's."""

    def prepare(self, model, task, sample, data):
        model = super().prepare(model, task, sample, data)
        return model if model.dt is not None else model.with_dt(float(data.dt))

    def incompatibility(self, system) -> str | None:
        if system.dim % 2:
            return (f"{self.cls.__name__} needs a phase space z = (q, p) of even dimension; "
                    f"{type(system).__name__} is {system.dim}-dimensional")
        return None


class PortHamiltonianSpec(DissipativeSpec):
    """A port-Hamiltonian network: a learned force of the time (`forcing="time"`) on a
    driven system, whose states `(q, p, t)` carry the time last; none otherwise."""

    def build(self, dim: int, *, key, **overrides):
        forcing = "time" if dim % 2 else None
        return self.cls(dim, **{"forcing": forcing, **self.defaults_for(dim), **overrides}, key=key)

    def incompatibility(self, system) -> str | None:
        if system.dim % 2 and not getattr(system, "driven", False):
            return (f"{self.cls.__name__} reads an odd-dimensional state as (q, p, t), a driven "
                    f"system's; {type(system).__name__} is not driven")
        return None
