r"""Structure-preserving model reduction of large Hamiltonian systems.

A *reduction* of a canonical system on $\mathbb{R}^{2N}$ is a pair of maps, an encoder
$\Psi^e: \mathbb{R}^{2N} \to \mathbb{R}^{2n}$ and a decoder $\Psi^d: \mathbb{R}^{2n} \to
\mathbb{R}^{2N}$, $n \ll N$. It is **symplectic** when the decoder is a *symplectic
immersion*,

$$ (D\Psi^d(y))^\top\, \mathbb{J}_{2N}\, D\Psi^d(y) = \mathbb{J}_{2n}
\quad\text{for every } y, $$

so that the reduced system with Hamiltonian $\tilde H = H \circ \Psi^d$ is again
canonical and conserves $\tilde H$ (Peng & Mohseni, *Symplectic model reduction of
Hamiltonian systems*, SIAM J. Sci. Comput. 38 (2016); Buchfink, Glas & Haasdonk,
*Symplectic model reduction of Hamiltonian systems on nonlinear manifolds*, 2023).

- **Reductions**: the proper symplectic decomposition ([`PSD`][geomlearn.reduction.PSD],
  fitted by one SVD), the manifold cotangent lift
  ([`ManifoldCotangentLift`][geomlearn.reduction.ManifoldCotangentLift], fitted by least
  squares) and the [`SymplecticAutoencoder`][geomlearn.reduction.SymplecticAutoencoder]
  (trained; `geomlearn.training.fit_autoencoder` adds the reduced dynamics to its loss).
- **The reduced system** [`ReducedHamiltonianSystem`][geomlearn.reduction.ReducedHamiltonianSystem]
  and the measures of a reduction: projection, reduction and latent-field errors, the
  immersion residual, and the symplectic area $\oint p\cdot dq$ of an orbit
  ([`loop_action`][geomlearn.reduction.loop_action]), which a latent Hamiltonian flow
  behind a symplectic decoder must reproduce to follow the data.
- **Learned integrators of the codes**, $z \mapsto \Psi^d(\mathcal{N}(\Psi^e(z)))$:
  [`ReducedIntegrator`][geomlearn.reduction.ReducedIntegrator] (an autoencoder's codes)
  and [`LiftedIntegrator`][geomlearn.reduction.LiftedIntegrator] (a lift's codes).
- **Evaluation**: `geomlearn.evaluation.evaluate_reduction` measures a reduction against
  a full solution, `geomlearn.evaluation.check_immersion` its decoder.

The package spans the layers of geomlearn: the reductions and their measures are
foundations, the autoencoder and the latent integrators are models, and the evaluation
and training of a reduction belong to the pipeline, whose packages publish them.
"""

from ._autoencoder import PSDLayer, SymplecticAutoencoder, initialize_from_psd
from ._integrators import LiftedIntegrator, ReducedIntegrator
from ._latent import (
    AbstractLatentIntegrator,
    AbstractLatentMap,
    LatentGSympNet,
    LatentLASympNet,
    LatentResNet,
)
from ._lift import ManifoldCotangentLift, manifold_cotangent_lift
from ._psd import PSD, AbstractReduction, proper_symplectic_decomposition, snapshot_mean
from ._reduced_system import (
    ReducedHamiltonianSystem,
    immersion_residual,
    latent_vector_field_error,
    loop_action,
    orbit_period,
    projection_error,
    projection_error_parts,
    reduction_error,
    symplectic_inverse,
)

__all__ = [
    # the reductions
    "AbstractReduction", "PSD", "proper_symplectic_decomposition", "snapshot_mean",
    "ManifoldCotangentLift", "manifold_cotangent_lift",
    "SymplecticAutoencoder", "PSDLayer", "initialize_from_psd",
    # the reduced system and the measures of a reduction
    "ReducedHamiltonianSystem", "symplectic_inverse", "immersion_residual",
    "projection_error", "projection_error_parts", "reduction_error",
    "latent_vector_field_error", "orbit_period", "loop_action",
    # learned integrators of the reduced codes
    "AbstractLatentIntegrator", "ReducedIntegrator", "LiftedIntegrator",
    "AbstractLatentMap", "LatentGSympNet", "LatentLASympNet", "LatentResNet",
]

# The evaluation and training of a reduction are published by the pipeline's packages
# (which import this one's modules), so they cannot be re-exported here.
_PUBLISHED_ELSEWHERE = {
    "evaluate_reduction": "evaluation", "check_immersion": "evaluation",
    "ImmersionCheck": "evaluation", "ReductionEvaluation": "evaluation",
    "IMMERSION_TOLERANCE": "evaluation", "fit_autoencoder": "training",
}


def __getattr__(name):
    if name in _PUBLISHED_ELSEWHERE:
        where = _PUBLISHED_ELSEWHERE[name]
        raise AttributeError(
            f"geomlearn.reduction.{name} has moved: use geomlearn.{where}.{name} "
            f"(or geomlearn.{name})"
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
