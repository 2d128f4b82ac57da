r"""A learned integrator in the reduced space of a symplectic autoencoder (see
`geomlearn.models.autoencoder`)."""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax

from .._typing import PRNGKeyArray
from .._validation import check_int
from ._integrators import point_pairs
from ._latent import AbstractLatentIntegrator
from ._symplectic_autoencoder import SymplecticAutoencoder
from ._task import Task
from .resnet import ResNet
from .sympnet import GSympNet, LASympNet

__all__ = ["ReducedIntegrator"]


# The reduced integrators by the name `ReducedIntegrator(integrator=...)` stores, each built
# on R^{2n} from (dim, n_layers, width, activation, key, dtype).
_INTEGRATORS: dict[str, Callable[..., eqx.Module]] = {
    "gsympnet": lambda d, n, w, a, k, t: GSympNet(d, n_layers=n, width=w, activation=a, key=k, dtype=t),
    "lasympnet": lambda d, n, w, a, k, t: LASympNet(d, n_layers=n, key=k, dtype=t),
    "resnet": lambda d, n, w, a, k, t: ResNet(d, width=w, depth=n, activation=a, key=k, dtype=t),
}


def _sizes(integrator_net) -> tuple[int, int]:
    """`(n_layers, width)` of a reduced integrator of one of the kinds `ReducedIntegrator`
    builds (a `LASympNet` has no width: the default 16 is recorded)."""
    if isinstance(integrator_net, ResNet):
        return integrator_net.depth, integrator_net.width
    if isinstance(integrator_net, GSympNet):
        return integrator_net.n_layers, integrator_net.width
    if isinstance(integrator_net, LASympNet):
        return integrator_net.n_layers, 16
    raise TypeError(
        "from_parts reads n_layers and width from a GSympNet, LASympNet or ResNet; pass "
        f"n_layers= and width= for a {type(integrator_net).__name__}"
    )


class ReducedIntegrator(AbstractLatentIntegrator):
    r"""A learned integrator in the reduced space of a symplectic autoencoder.

    The one-step map of the full space is $z \mapsto \Psi^d(\mathcal{N}(\Psi^e(z)))$,
    with $\Psi^{e,d}$ a [`SymplecticAutoencoder`][geomlearn.models.SymplecticAutoencoder]
    `full_dim → reduced_dim` and $\mathcal{N}$ a feed-forward integrator on
    $\mathbb{R}^{2n}$ (`integrator`: `"gsympnet"` — symplectic —, `"lasympnet"` or
    `"resnet"`). `fit` trains it on one-step pairs of full states with the loss
    $\lVert\Psi^d(\mathcal{N}(\Psi^e(x))) - y\rVert / \lVert y\rVert$. The rollout
    encodes once, iterates $\mathcal{N}$ in the reduced space (cost independent of $N$)
    and decodes each state.

    `train_autoencoder = False` (default) stops gradients into the autoencoder: train
    the autoencoder first, put it in with
    [`ReducedIntegrator.from_parts`][geomlearn.models.ReducedIntegrator.from_parts], then
    `fit` trains $\mathcal{N}$ alone by a first-order optimiser (Levenberg–Marquardt
    is refused: the model holds Stiefel parameters). `True` trains both (`riemannian_adam`).

    `structure` is `"none"`: the full-space step has rank `reduced_dim` and is not a
    symplectic map of $\mathbb{R}^{2N}$. The *reduced* map $\mathcal{N}$ is symplectic
    for `"gsympnet"`/`"lasympnet"` (`reduced_structure`), and the decoder is a symplectic
    immersion.

    **Arguments:** `full_dim`, `reduced_dim`; `integrator = "gsympnet"`, `n_layers = 4`,
    `width = 16` (of $\mathcal{N}$); `autoencoder_width = 16`, `n_encoder_layers = 4`,
    `n_encoder_blocks = 2`, `n_decoder_layers = 1`, `n_decoder_blocks = 3`,
    `activation = "tanh"`, `train_autoencoder = False`, `key`, `dtype`. Every argument
    is stored, so `geomlearn.save`/`load` round-trip the model.
    """

    autoencoder: SymplecticAutoencoder
    integrator_net: eqx.Module
    full_dim: int = eqx.field(static=True)
    reduced_dim: int = eqx.field(static=True)
    integrator: str = eqx.field(static=True)
    n_layers: int = eqx.field(static=True)
    width: int = eqx.field(static=True)
    autoencoder_width: int = eqx.field(static=True)
    n_encoder_layers: int = eqx.field(static=True)
    n_encoder_blocks: int = eqx.field(static=True)
    n_decoder_layers: int = eqx.field(static=True)
    n_decoder_blocks: int = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)
    train_autoencoder: bool = eqx.field(static=True)

    def __init__(
        self,
        full_dim: int,
        reduced_dim: int,
        *,
        integrator: str = "gsympnet",
        n_layers: int = 4,
        width: int = 16,
        autoencoder_width: int = 16,
        n_encoder_layers: int = 4,
        n_encoder_blocks: int = 2,
        n_decoder_layers: int = 1,
        n_decoder_blocks: int = 3,
        activation: Callable | str = "tanh",
        train_autoencoder: bool = False,
        key: PRNGKeyArray,
        dtype=None,
    ):
        if integrator not in _INTEGRATORS:
            raise ValueError(f"integrator must be one of {tuple(_INTEGRATORS)}, got {integrator!r}")
        k_ae, k_nn = jax.random.split(key)
        self.autoencoder = SymplecticAutoencoder(
            full_dim, reduced_dim, n_encoder_layers=n_encoder_layers,
            n_encoder_blocks=n_encoder_blocks, n_decoder_layers=n_decoder_layers,
            n_decoder_blocks=n_decoder_blocks, width=autoencoder_width, activation=activation,
            key=k_ae, dtype=dtype,
        )
        self.full_dim, self.reduced_dim = self.autoencoder.full_dim, self.autoencoder.reduced_dim
        self.integrator = integrator
        self.n_layers = check_int("n_layers", n_layers, minimum=1)
        self.width = check_int("width", width, minimum=1)
        self.autoencoder_width = autoencoder_width
        self.n_encoder_layers, self.n_encoder_blocks = n_encoder_layers, n_encoder_blocks
        self.n_decoder_layers, self.n_decoder_blocks = n_decoder_layers, n_decoder_blocks
        self.activation = activation
        if not isinstance(train_autoencoder, bool):
            raise TypeError(f"train_autoencoder must be a bool, got {train_autoencoder!r}")
        self.train_autoencoder = train_autoencoder
        self.integrator_net = _INTEGRATORS[integrator](
            self.reduced_dim, self.n_layers, self.width, activation, k_nn, dtype)

    @classmethod
    def from_parts(cls, autoencoder: SymplecticAutoencoder, integrator_net, *,
                   integrator: str = "gsympnet", n_layers: int | None = None,
                   width: int | None = None, train_autoencoder: bool = False):
        """A `ReducedIntegrator` made of a (trained) autoencoder and a (trained or fresh)
        reduced integrator, with the configuration read from both (so it can be saved)."""
        cfg = autoencoder.config()
        if n_layers is None or width is None:
            read_layers, read_width = _sizes(integrator_net)
            n_layers = read_layers if n_layers is None else n_layers
            width = read_width if width is None else width
        skeleton = eqx.filter_eval_shape(
            lambda: cls(cfg["full_dim"], cfg["reduced_dim"], integrator=integrator,
                        n_layers=n_layers, width=width, autoencoder_width=cfg["width"],
                        n_encoder_layers=cfg["n_encoder_layers"],
                        n_encoder_blocks=cfg["n_encoder_blocks"],
                        n_decoder_layers=cfg["n_decoder_layers"],
                        n_decoder_blocks=cfg["n_decoder_blocks"],
                        activation=cfg["activation"], train_autoencoder=train_autoencoder,
                        key=jax.random.PRNGKey(0), dtype=cfg["dtype"])
        )
        return eqx.tree_at(lambda m: (m.autoencoder, m.integrator_net), skeleton,
                           (autoencoder, integrator_net))

    def _ae(self):
        if self.train_autoencoder:
            return self.autoencoder
        params, static = eqx.partition(self.autoencoder, eqx.is_inexact_array)
        return eqx.combine(jax.lax.stop_gradient(params), static)

    def encode(self, z):
        return self._ae().encode(z)

    def decode(self, y):
        return self._ae().decode(y)

    def training_samples(self, data, task: Task, *, what: str = "data"):
        """One-step pairs of full states (a `TrajectoryData`, or a tuple of arrays
        `(M, full_dim)`)."""
        return point_pairs(self, data, task, what=what)

    def predict(self, x, task: Task):
        r"""The step, centred and weighted per block like the autoencoder's
        reconstruction: $w\odot(\Psi^d(\mathcal{N}(\Psi^e(x))) - \bar x)$."""
        return self._ae()._weighted(self(x))

    def target(self, y, task: Task):
        r"""$w\odot(y - \bar x)$ (the autoencoder's reference state and loss weights)."""
        return self._ae()._weighted(y)

    def describe_step(self, task: Task) -> str:
        return (f"z ↦ decode({type(self.integrator_net).__name__}(encode(z))) through a "
                f"{self.reduced_dim}-dimensional reduced space (rolled out there)")
