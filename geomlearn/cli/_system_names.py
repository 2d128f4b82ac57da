"""The built-in systems by their command-line names (`geomlearn list`, `--system`)."""

from __future__ import annotations

from ..systems import (
    AbstractSystem,
    CoupledHarmonicOscillator,
    DampedPendulum,
    DoublePendulum,
    Duffing,
    ForcedMassSpring,
    ForcedRigidBody,
    HarmonicOscillator,
    HenonHeiles,
    Kepler,
    LennardJonesCluster,
    LinearWave,
    ParametricPendulum,
    Pendulum,
    RigidBody,
    ThreeBody,
    TodaLattice,
)

__all__ = ["SYSTEMS", "resolve_system"]

SYSTEMS: dict[str, type[AbstractSystem]] = {
    "harmonic_oscillator": HarmonicOscillator,
    "pendulum": Pendulum,
    "double_pendulum": DoublePendulum,
    "coupled_oscillator": CoupledHarmonicOscillator,
    "henon_heiles": HenonHeiles,
    "kepler": Kepler,
    "three_body": ThreeBody,
    "rigid_body": RigidBody,
    "parametric_pendulum": ParametricPendulum,
    "forced_rigid_body": ForcedRigidBody,
    "toda_lattice": TodaLattice,
    "linear_wave": LinearWave,
    "lennard_jones": LennardJonesCluster,
    "damped_pendulum": DampedPendulum,
    "duffing": Duffing,
    "forced_mass_spring": ForcedMassSpring,
}
"""The systems by their command-line name; each class is constructible with no arguments."""


def resolve_system(name: str) -> str:
    """The `SYSTEMS` key of a system name or class name (case-insensitive, `-` or `_`);
    `ValueError` listing the valid names otherwise."""
    key = name.strip().lower().replace("-", "_")
    for sys_name, cls in SYSTEMS.items():
        if key in (sys_name, cls.__name__.lower()):
            return sys_name
    raise ValueError(f"unknown system {name!r}; valid systems: {', '.join(SYSTEMS)}")
