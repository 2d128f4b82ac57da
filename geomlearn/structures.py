r"""The structures a model's iterated map can claim, as objects.

A model names what its iterated map $\Phi$ preserves for every parameter value by a
string, `model.structure` (the name is what files, `metrics.json` and the command line
show). Code that has to *act* on the claim — which residuals must vanish, whether a
window update keeps anything — turns the name into one of these objects once, with
`structure_named`, and asks it; it never compares the string.

| name | property of $\Phi$ | residuals that must vanish |
|---|---|---|
| `"symplectic"` | $D\Phi^\top \mathbb{J} D\Phi = \mathbb{J}$ | symplecticity, volume |
| `"volume"` | $\lvert\det D\Phi\rvert = 1$ | volume |
| `"lie-poisson"` | $D\Phi\,\hat z\,D\Phi^\top = \widehat{\Phi(z)}$ on $\mathfrak{so}(3)^*$, $\lvert\Phi(z)\rvert = \lvert z\rvert$ | poisson, casimir, volume |
| `"conformal-symplectic"` | $D\Phi^\top \mathbb{J} D\Phi = c\,\mathbb{J}$, one constant $c$ (the model's, e.g. $e^{-\gamma h}$) | conformal symplecticity |
| `"energy-balance"` | $H(z_{n+1}) - H(z_n) = -h\,\bar\nabla H^\top R\,\bar\nabla H + h\,\bar\nabla H^\top F$ (discrete gradient) | energy balance |
| `"none"` | nothing | none |

A symplectic map preserves volume too ($\det D\Phi = \pm 1$ follows from
$D\Phi^\top \mathbb{J} D\Phi = \mathbb{J}$, and $+1$ by continuity from the identity), so
the symplectic structure claims both residuals.
"""

from __future__ import annotations

import abc
from typing import ClassVar

__all__ = [
    "AbstractStructure",
    "Symplectic",
    "VolumePreserving",
    "LiePoisson",
    "ConformalSymplectic",
    "EnergyBalance",
    "NoStructure",
    "STRUCTURE_NAMES",
    "structure_named",
]


class AbstractStructure(abc.ABC):
    """What a map preserves: its `name` and the residuals (of `geomlearn.geometry`) that
    the claim says are zero."""

    name: ClassVar[str]
    residuals: ClassVar[frozenset[str]]

    def claims(self, residual: str) -> bool:
        """Whether the residual named `residual` must vanish under this structure."""
        return residual in self.residuals

    @property
    def preserves_anything(self) -> bool:
        """`False` only for the structure that claims nothing."""
        return bool(self.residuals)

    def __eq__(self, other) -> bool:
        return type(self) is type(other)

    def __hash__(self) -> int:
        return hash(type(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Symplectic(AbstractStructure):
    r"""$D\Phi^\top \mathbb{J} D\Phi = \mathbb{J}$ (and hence $\det D\Phi = 1$)."""

    name = "symplectic"
    residuals = frozenset({"symplecticity", "volume"})


class VolumePreserving(AbstractStructure):
    r"""$\lvert\det D\Phi\rvert = 1$."""

    name = "volume"
    residuals = frozenset({"volume"})


class LiePoisson(AbstractStructure):
    r"""A Lie–Poisson map of $\mathfrak{so}(3)^* \cong \mathbb{R}^3$ that is a Hamiltonian
    flow (or a composition of such flows): $D\Phi(z)\,\hat z\,D\Phi(z)^\top =
    \widehat{\Phi(z)}$ (`geomlearn.geometry.poisson_residual`), the Casimir kept,
    $|\Phi(z)|^2 = |z|^2$ (`casimir_residual`), and volume kept (the Lie–Poisson flows of
    the unimodular $\mathfrak{so}(3)$ are divergence-free)."""

    name = "lie-poisson"
    residuals = frozenset({"poisson", "casimir", "volume"})


class ConformalSymplectic(AbstractStructure):
    r"""$D\Phi^\top \mathbb{J} D\Phi = c\,\mathbb{J}$ with one constant $c > 0$ for
    every point (the model's conformal factor, $c = e^{-\gamma h}$ for a linearly damped
    step; `geomlearn.geometry.conformal_symplecticity_residual`). The map contracts
    volume by $c^n$, so neither symplecticity nor volume is claimed."""

    name = "conformal-symplectic"
    residuals = frozenset({"conformal_symplecticity"})


class EnergyBalance(AbstractStructure):
    r"""The discrete energy balance of a port-Hamiltonian step with a discrete gradient
    $\bar\nabla H$: $H(z_{n+1}) - H(z_n) = -h\,\bar\nabla H^\top R\,\bar\nabla H +
    h\,\bar\nabla H^\top F$ with $R \succeq 0$, to round-off (the learned energy is
    dissipated and supplied exactly as the learned $R$ and $F$ say)."""

    name = "energy-balance"
    residuals = frozenset({"energy_balance"})


class NoStructure(AbstractStructure):
    """No claim: every residual is reported, none is required to vanish."""

    name = "none"
    residuals = frozenset()


_BY_NAME: dict[str, AbstractStructure] = {s.name: s for s in (Symplectic(), VolumePreserving(), LiePoisson(), ConformalSymplectic(),
                                                   EnergyBalance(), NoStructure())}

#: The structure names a model may claim.
STRUCTURE_NAMES: tuple[str, ...] = tuple(_BY_NAME)


def structure_named(name: str) -> AbstractStructure:
    """The structure object for the name `name`; `ValueError` naming the known names
    otherwise."""
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown structure {name!r}; expected one of {STRUCTURE_NAMES}") from None
