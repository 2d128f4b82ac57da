"""How the command line builds a model of identical particles (`pair-sympnet`)."""

from __future__ import annotations

import dataclasses

from ._plans import AbstractArguments

__all__ = ["ParticleLayout"]


@dataclasses.dataclass(frozen=True)
class ParticleLayout(AbstractArguments):
    r"""`cls(n_particles, spatial_dim, ...)` for states $z = (q, p)$ of $N$ particles in
    $k$ dimensions, $\dim z = 2Nk$: $k$ is the system's `particle_dimension` (with
    `--data`, `--particles K`), or `--model-option spatial_dim=K`; $N = \dim z / 2k$."""

    def build(self, cls, dim, *, defaults, overrides, key, system=None):
        overrides = dict(overrides)
        k = overrides.pop("spatial_dim", None) or (0 if system is None else system.particle_dimension)
        if not k:
            raise ValueError("the positions must be particles: a system of particles (e.g. "
                             "lennard_jones), --data with --particles K, or --model-option "
                             "spatial_dim=K")
        if dim % (2 * k):
            raise ValueError(f"a state of dimension {dim} is not (q, p) of particles in {k} "
                             f"dimensions (2·N·{k} coordinates)")
        return cls(dim // (2 * k), k, **{**defaults, **overrides}, key=key)
