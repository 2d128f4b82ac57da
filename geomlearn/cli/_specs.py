r"""How the command line uses a model: `ModelSpec`, one final description built from policies.

A spec names a model class and its default size, and takes four small policy objects
(each an abstract base with final implementations, as Optimistix builds its solvers from
a descent and a search): `compatibility` (which systems it trains on:
`geomlearn.cli._compatibility`), `arguments` (how its constructor is called for data of
dimension `dim`) and `plan` (prepare, trainer, fit: `geomlearn.cli._plans`), and
`evaluation` (evaluate, report, check: `geomlearn.cli._evaluations`). The table of
registered specs is `geomlearn.cli.MODELS`.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, final

from ..symmetries import resolve_symmetry
from ._compatibility import AbstractCompatibility, Unconstrained
from ._evaluations import AbstractEvaluation, IntegratorEvaluation
from ._plans import (AbstractArguments, AbstractPlan, AbstractSizing, AsBuilt, IntegratorPlan,
                     StateDimension)

__all__ = ["ModelSpec"]


#: Constructor arguments that the command line sets itself, and the flag that sets each.
_OWN_FLAGS = {"key": "--seed", "dtype": "--x64", "seq_length": "--seq-length",
             "prediction_window": "--prediction-window",
             "positional_encoding": "--positional-encoding", "reduced_dim": "--reduced-dim"}


@final
@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """A model the command line can train (final: vary it by its policies).

    **Arguments:**

    - `name`: the command-line name; `cls`: the model class; `defaults`: its
      constructor arguments besides the dimension and `key`.
    - `compatibility`: which systems it trains on (default `Unconstrained()`).
    - `arguments`: how it is built for a dimension (default `StateDimension()`).
    - `sizing`: how the built model is sized by its training data (default `AsBuilt()`).
    - `plan`: how it is prepared, given a trainer and fitted (default `IntegratorPlan()`).
    - `evaluation`: how it is evaluated, reported and checked (default
      `IntegratorEvaluation()`).
    - `windows`: it reads windows `(T, d)`: `--seq-length`, `--prediction-window` and
      `--positional-encoding` apply.
    - `sizes_above`: `(D, options)`: for data of more than `D` dimensions, `options`
      replace those entries of `defaults` (`defaults_for`).

    What it preserves, `structure`, is read from the model class (through the
    evaluation policy: a reduction shows the symplectic immersion that `check` verifies).
    """

    name: str
    cls: type
    defaults: dict[str, Any]
    compatibility: AbstractCompatibility = Unconstrained()
    arguments: AbstractArguments = StateDimension()
    sizing: AbstractSizing = AsBuilt()
    plan: AbstractPlan = IntegratorPlan()
    evaluation: AbstractEvaluation = IntegratorEvaluation()
    windows: bool = False
    sizes_above: tuple[int, dict[str, Any]] | None = None

    def __init_subclass__(cls, **kwargs):
        raise TypeError("ModelSpec is final: pass policies (compatibility, arguments, sizing, "
                        "plan, evaluation) instead of subclassing it")

    @property
    def structure(self) -> str:
        """What the model preserves, as `geomlearn list` shows it: its class's `structure`
        (for a reduction, the symplectic immersion of its decoder)."""
        return self.evaluation.structure(self.cls)

    @property
    def needs_canonical(self) -> bool:
        """Whether the model needs an even-dimensional canonical phase space `z = (q, p)`."""
        return self.compatibility.needs_canonical

    def defaults_for(self, dim: int) -> dict[str, Any]:
        """The constructor arguments for data of dimension `dim`: `defaults`, with the
        entries of `sizes_above` when `dim` exceeds its bound."""
        if self.sizes_above is not None and dim > self.sizes_above[0]:
            return {**self.defaults, **self.sizes_above[1]}
        return dict(self.defaults)

    def build(self, dim: int, *, key, system=None, **overrides):
        """The model for states of dimension `dim` (of `system`, where the model needs
        it): `defaults_for(dim)` with `overrides`, as `arguments` calls the constructor."""
        return self.arguments.build(self.cls, dim, defaults=self.defaults_for(dim),
                                    overrides=overrides, key=key, system=system)

    def build_for(self, system, *, key, seq_length=None, prediction_window=None,
                  positional_encoding=False, reduced_dim=None, model_options=None, symmetry=None):
        """`(model, fit_options)`: the model for `system` with the command line's options.

        Window models get `prediction_window = seq_length` by default (the rollout then
        iterates the model map itself and keeps its structure); `fit_options` holds the
        `seq_length`/`prediction_window` to pass to `fit` and `evaluate`.
        `model_options` (`--model-option`) replace the spec's `defaults` or set other
        constructor arguments (e.g. `{"width": 12, "L": 2}`); `symmetry` (`--symmetry`, a
        spec of `geomlearn.symmetries`) must fit the system's positions. Options that do
        not apply raise `ValueError`.
        """
        params = inspect.signature(self.cls.__init__).parameters
        chosen = self._checked_options(params, model_options or {})
        if symmetry is not None:
            chosen["symmetry"] = _checked_symmetry(self.name, params, symmetry, system.dim)
        overrides, options = {}, {}
        if self.windows:
            overrides, options = _window_options(params, seq_length, prediction_window,
                                                 positional_encoding)
        if reduced_dim is not None:
            if "reduced_dim" not in params:
                raise ValueError(f"--reduced-dim does not apply to {self.name}")
            overrides["reduced_dim"] = reduced_dim
        try:
            return self.build(system.dim, key=key, system=system, **chosen, **overrides), options
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

    # ------------------------------------------------ the policies, asked for this model

    def incompatibility(self, system) -> str | None:
        """Why this model cannot be trained on `system` (or a `DataFile`), or `None`: the
        `compatibility` policy's answer, then the attention heads of `defaults`."""
        why = self.compatibility.incompatibility(self.cls, system)
        if why:
            return why
        n_heads = self.defaults_for(system.dim).get("n_heads")
        if n_heads and system.dim % n_heads:
            return f"{self.cls.__name__} with {n_heads} heads needs dim divisible by {n_heads}"
        return None

    def prepare(self, model, task, sample, data, overrides=None):
        """`sizing.for_data`, then `plan.prepare`: the model to train on `data`
        (`overrides`: the caller's constructor arguments, `--model-option`)."""
        model = self.sizing.for_data(model, data, dict(overrides or {}))
        return self.plan.prepare(model, task, sample, data)

    def trainer(self, model, n_samples: int, **options):
        """`plan.trainer`: `(optimizer, epochs, time_budget, description)`; `options` are
        `batch_size`, `trainer`, `epochs`, `time_budget`."""
        return self.plan.trainer(model, n_samples, name=self.name, **options)

    def fit(self, model, data, **options):
        """`plan.fit`: `(model, history)`."""
        return self.plan.fit(model, data, **options)

    def evaluate(self, model, system, data, **options):
        """`evaluation.evaluate`."""
        return self.evaluation.evaluate(model, system, data, **options)

    def report(self, path, *, run: dict, history: dict, evaluation) -> bool:
        """`evaluation.report`: whether the figure was written."""
        return self.evaluation.report(path, run=run, history=history, evaluation=evaluation,
                                      title=self.cls.__name__)

    def check(self, model, points, *, prediction_window=None, dt=None):
        """`evaluation.check`."""
        return self.evaluation.check(model, points, prediction_window=prediction_window, dt=dt)


def _checked_symmetry(name: str, params, symmetry: str, dim: int) -> str:
    """`symmetry`, once it fits `dim // 2` positions of a model that takes one."""
    if "symmetry" not in params:
        raise ValueError(f"--symmetry does not apply to {name} (its constructor takes no symmetry=)")
    try:
        resolve_symmetry(symmetry, dim // 2)
    except ValueError as e:
        raise ValueError(f"--symmetry {symmetry}: {e}") from None
    return symmetry


def _window_options(params, seq_length, prediction_window, positional_encoding):
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
