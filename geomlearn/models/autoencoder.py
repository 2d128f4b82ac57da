r"""Symplectic autoencoders and integrators in their reduced space.

[`SymplecticAutoencoder`][geomlearn.models.SymplecticAutoencoder] compresses a state
$z \in \mathbb{R}^{2N}$ of a large Hamiltonian system to $y \in \mathbb{R}^{2n}$ and
back. Following Brantner & Kraus (*Symplectic autoencoders for model reduction of
Hamiltonian systems*, 2023) it alternates gradient-SympNet blocks (symplectic
diffeomorphisms of the current space) with *PSD-like layers*

$$ \mathbb{R}^{2m} \to \mathbb{R}^{2M}: (q, p) \mapsto (\Phi q, \Phi p), \qquad
\Phi \in St(m, M) \ (\Phi^\top\Phi = I), $$

which are linear symplectic immersions. A composition of symplectic diffeomorphisms and
symplectic immersions is a symplectic immersion, so the **decoder satisfies
$(D\Psi^d)^\top\mathbb{J}_{2N}D\Psi^d = \mathbb{J}_{2n}$ for every parameter value**;
the encoder uses the transposed layers $(q, p) \mapsto (\Phi^\top q, \Phi^\top p)$. The
matrices $\Phi$ are [`StiefelMatrix`][geomlearn.manifolds.StiefelMatrix] parameters:
train with [`riemannian_adam`][geomlearn.manifolds.riemannian_adam] to keep them on the
manifold (plain Adam would break the immersion property).

[`ReducedIntegrator`][geomlearn.models.ReducedIntegrator] is a one-step integrator of the
full space that works in the reduced one, $z \mapsto \Psi^d(\mathcal{N}(\Psi^e(z)))$ with
a SympNet (or another feed-forward integrator) $\mathcal{N}$ on $\mathbb{R}^{2n}$; its
rollout iterates $\mathcal{N}$ in the reduced space, and `rollout_at` decodes only the
states asked for. With `train_autoencoder=True` it trains encoder, decoder and
$\mathcal{N}$ together against full-space one-step targets.
[`LiftedIntegrator`][geomlearn.models.LiftedIntegrator] is the same construction on the
codes of a manifold cotangent lift (`geomlearn.cotangent_lift`, fitted in closed form,
not trained), its SympNet trained on pairs of codes several data steps apart.

Both carry an affine **reference state** $\bar x$ (the encoder subtracts it, the decoder
adds it; a translation keeps the decoder a symplectic immersion) and per-block **loss
weights** $w_q, w_p$ on the centred positions and momenta;
[`initialize_from_psd`][geomlearn.models.initialize_from_psd] sets them from the data
(the snapshot mean and the reciprocal root-mean-square variations). Files written before
these existed load with $\bar x = 0$ and unit weights.
"""

from __future__ import annotations

from ._lifted_integrator import LiftedIntegrator
from ._reduced_integrator import ReducedIntegrator
from ._symplectic_autoencoder import (
    PSDLayer,
    SymplecticAutoencoder,
    initialize_from_psd,
)

__all__ = ["LiftedIntegrator", "PSDLayer", "ReducedIntegrator", "SymplecticAutoencoder", "initialize_from_psd"]
