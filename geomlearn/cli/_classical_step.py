"""How the command line builds a corrected integrator (`corrected`): the classical step
of the known system and the corrections that start as the identity."""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

from ..integrators import fastest_frequency
from ..models import GSympNet, PairSympNet
from ..symmetries import Particles
from ..systems import AbstractSystem
from ._frequency import frequency_states
from ._plans import AbstractArguments, AbstractSizing

__all__ = ["ClassicalStep", "StableSubsteps", "STABLE_STEP"]

STABLE_STEP = 1.0
r"""The product $h\,\omega_{\max}$ that a corrected step's classical substeps stay at or
below by default: half Störmer–Verlet's stability limit $h\omega < 2$, which holds at
the data's states only, not between them."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClassicalStep(AbstractArguments):
    """`cls(system, correction, ...)` of a corrected integrator: the classical step of
    the `system` it is built for, between corrections that start as the identity, each a
    `GSympNet(dim, n_layers, width, identity_init=True)` (keeping `--symmetry` when
    given); the spec's defaults and `--model-option` set the placement, the method and
    the substeps (without `substeps=`, `StableSubsteps` sizes them by the data).

    For a system of identical particles (its `group` a `Particles`) without
    `--symmetry`, the correction is one `PairSympNet(N, k, pair_layers, pair_width,
    identity_init=True)` placed `pair_placement` (unless `--model-option placement=`
    says otherwise), and the model keeps the group: it conserves the total and the
    angular momentum exactly. It is small on purpose: the state of many particles has
    many components, and a Levenberg–Marquardt iteration costs one Jacobian-vector
    product per parameter (or per component, the fewer) for every sample."""

    holds_system: ClassVar[bool] = True
    n_layers: int = 2
    width: int = 16
    pair_layers: int = 1
    pair_width: int = 8
    pair_placement: str = "after"

    def build(self, cls, dim, *, defaults, overrides, key, system=None):
        group = system.group if isinstance(system, AbstractSystem) else None  # not a DataFile
        if overrides.get("symmetry") is None and isinstance(group, Particles):
            correction = PairSympNet(group.n_particles, group.spatial_dim, n_layers=self.pair_layers,
                                     width=self.pair_width, identity_init=True, key=key)
            overrides = {"placement": self.pair_placement, **overrides, "symmetry": group}
        else:
            correction = GSympNet(dim, n_layers=self.n_layers, width=self.width,
                                  identity_init=True, symmetry=overrides.get("symmetry"), key=key)
        return cls(system, correction, **{**defaults, **overrides})


@dataclasses.dataclass(frozen=True)
class StableSubsteps(AbstractSizing):
    r"""A corrected integrator with the fewest substeps $s$ whose step $h = \Delta t / s$
    keeps $h\,\omega_{\max} \le$ `stable_step` at the data's states (`fastest_frequency`):
    a long `--stride` asks for several. Unless `--model-option substeps=` sets them, or
    the system has no such limit (not separable, or nothing oscillates)."""

    stable_step: float = STABLE_STEP

    def for_data(self, model, data, overrides):
        if "substeps" in overrides:
            return model
        try:
            omega = fastest_frequency(model.system, frequency_states(data))
        except ValueError:  # not a separable canonical system
            return model
        needed = math.ceil(float(data.dt) * omega / self.stable_step)
        return model.with_substeps(needed) if needed > model.substeps else model
