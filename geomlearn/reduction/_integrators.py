r"""The learned integrators of reduced codes, $z \mapsto \Psi^d(\mathcal{N}(\Psi^e(z)))$:
`ReducedIntegrator` on the codes of a symplectic autoencoder, `LiftedIntegrator` on the
codes of a manifold cotangent lift (see `geomlearn.reduction`).

**Training a lifted integrator's network alone.** `fit(model, data)` trains a
`LiftedIntegrator` on its code pairs, but differentiates the lift's (constant) arrays
too, with zero gradients; under Levenberg–Marquardt, whose cost grows with the square of
the parameter count, train the integrator alone and put it back:

```python
model = gl.LiftedIntegrator(400, 2, key=jax.random.PRNGKey(0)).with_lift(data)
x, y, _ = model.training_samples(data, model.task())
net, history = gl.fit(model.integrator_net, (x, y), epochs=400,
                      optimizer=gl.LevenbergMarquardt(), key=jax.random.PRNGKey(1))
model = model.with_integrator(net)
```

**Pairs around the trajectory.** On one trajectory the codes lie on a curve, and a
network trained on its pairs alone learns the map near that curve only;
`LiftedIntegrator.reduced_system_pairs` adds pairs around it from the lift's reduced
Hamiltonian system (the command line adds 4000 of them when `reduced_dim` is 4 or more:
a loop in the plane keeps nearby codes near it under an area-preserving map, a loop in
$\mathbb{R}^{2n \ge 4}$ does not).
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._typing import Array, Float, PRNGKeyArray
from .._validation import check_even, check_int
from ..data import TrajectoryData
from ..integrators import integrate
from ..models._integrators import point_pairs
from ..models._task import Task, check_data_dim, sample_arrays
from ..models.sympnet import GSympNet
from ._autoencoder import SymplecticAutoencoder
from ._latent import AbstractLatentIntegrator, AbstractLatentMap, latent_map_named
from ._lift import ManifoldCotangentLift, manifold_cotangent_lift
from ._reduced_system import ReducedHamiltonianSystem

__all__ = ["ReducedIntegrator", "LiftedIntegrator"]


def _sizes(latent_map: AbstractLatentMap, integrator_net) -> tuple[int, int]:
    """`(n_layers, width)` of `integrator_net`, a map of the kind `latent_map` builds;
    `TypeError` asking for `n_layers=` and `width=` otherwise."""
    if not isinstance(integrator_net, latent_map.network):
        raise TypeError(
            f"from_parts reads n_layers and width from a {latent_map.network.__name__} "
            f"(integrator={latent_map.name!r}); pass n_layers= and width= for a "
            f"{type(integrator_net).__name__}")
    return latent_map.sizes(integrator_net)


class ReducedIntegrator(AbstractLatentIntegrator):
    r"""A learned integrator in the reduced space of a symplectic autoencoder.

    The one-step map of the full space is $z \mapsto \Psi^d(\mathcal{N}(\Psi^e(z)))$,
    with $\Psi^{e,d}$ a [`SymplecticAutoencoder`][geomlearn.reduction.SymplecticAutoencoder]
    `full_dim → reduced_dim` and $\mathcal{N}$ a feed-forward integrator on
    $\mathbb{R}^{2n}$ (`integrator`: `"gsympnet"` — symplectic —, `"lasympnet"` or
    `"resnet"`). `fit` trains it on one-step pairs of full states with the loss
    $\lVert\Psi^d(\mathcal{N}(\Psi^e(x))) - y\rVert / \lVert y\rVert$. The rollout
    encodes once, iterates $\mathcal{N}$ in the reduced space (cost independent of $N$)
    and decodes each state.

    `train_autoencoder = False` (default) stops gradients into the autoencoder: train
    the autoencoder first, put it in with
    [`ReducedIntegrator.from_parts`][geomlearn.reduction.ReducedIntegrator.from_parts], then
    `fit` trains $\mathcal{N}$ alone by a first-order optimiser (Levenberg–Marquardt
    is refused: the model holds Stiefel parameters). `True` trains both (`riemannian_adam`).

    `structure` is `"none"`: the full-space step has rank `reduced_dim` and is not a
    symplectic map of $\mathbb{R}^{2N}$. The *reduced* map $\mathcal{N}$ is symplectic
    for `"gsympnet"`/`"lasympnet"` (`reduced_structure`), and the decoder is a symplectic
    immersion.

    **Arguments:** `full_dim`, `reduced_dim`; `integrator = "gsympnet"` (or
    `"lasympnet"`, `"resnet"`, or an `AbstractLatentMap` such as `LatentResNet()`; the
    configuration stores its name), `n_layers = 4`,
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
        integrator: str | AbstractLatentMap = "gsympnet",
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
        latent_map = latent_map_named(integrator)
        k_ae, k_nn = jax.random.split(key)
        self.autoencoder = SymplecticAutoencoder(
            full_dim, reduced_dim, n_encoder_layers=n_encoder_layers,
            n_encoder_blocks=n_encoder_blocks, n_decoder_layers=n_decoder_layers,
            n_decoder_blocks=n_decoder_blocks, width=autoencoder_width, activation=activation,
            key=k_ae, dtype=dtype,
        )
        self.full_dim, self.reduced_dim = self.autoencoder.full_dim, self.autoencoder.reduced_dim
        self.integrator = latent_map.name  # the resolved option, as saved
        self.n_layers = check_int("n_layers", n_layers, minimum=1)
        self.width = check_int("width", width, minimum=1)
        self.autoencoder_width = autoencoder_width
        self.n_encoder_layers, self.n_encoder_blocks = n_encoder_layers, n_encoder_blocks
        self.n_decoder_layers, self.n_decoder_blocks = n_decoder_layers, n_decoder_blocks
        self.activation = activation
        if not isinstance(train_autoencoder, bool):
            raise TypeError(f"train_autoencoder must be a bool, got {train_autoencoder!r}")
        self.train_autoencoder = train_autoencoder
        self.integrator_net = latent_map.build(
            self.reduced_dim, n_layers=self.n_layers, width=self.width, activation=activation,
            key=k_nn, dtype=dtype)

    @classmethod
    def from_parts(cls, autoencoder: SymplecticAutoencoder, integrator_net, *,
                   integrator: str | AbstractLatentMap = "gsympnet",
                   n_layers: int | None = None,
                   width: int | None = None, train_autoencoder: bool = False):
        """A `ReducedIntegrator` made of a (trained) autoencoder and a (trained or fresh)
        reduced integrator, with the configuration read from both (so it can be saved)."""
        cfg = autoencoder.config()
        if n_layers is None or width is None:
            read_layers, read_width = _sizes(latent_map_named(integrator), integrator_net)
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


class LiftedIntegrator(AbstractLatentIntegrator):
    r"""A learned symplectic integrator in the reduced space of a manifold cotangent lift.

    The reduction $\Psi^{e,d}$ is a
    [`ManifoldCotangentLift`][geomlearn.reduction.ManifoldCotangentLift] (the
    centred PSD bent along its leading direction, its decoder a symplectic immersion for
    every coefficient value), fitted to snapshots in closed form by
    [`with_lift`][geomlearn.reduction.LiftedIntegrator.with_lift] — it is not trained. The
    integrator $\mathcal{N}$ is a [`GSympNet`][geomlearn.models.GSympNet] on
    $\mathbb{R}^{2n}$ trained on pairs of codes `stride` $= S$ steps of the data apart,

    $$ \mathcal{N}(\Psi^e(x_k)) \approx \Psi^e(x_{k+S}), $$

    so **one application of the model advances $S$ steps of the data**: the full-space
    map is $z \mapsto \Psi^d(\mathcal{N}(\Psi^e(z)))$ with time step $S\,\Delta t$. The
    rollout encodes once, iterates $\mathcal{N}$ in $\mathbb{R}^{2n}$ (a cost
    independent of the full dimension) and decodes each state;
    [`rollout_at`][geomlearn.reduction.LiftedIntegrator.rollout_at] decodes only the
    states asked for.

    **Training.** `training_samples` gives the code pairs $(\Psi^e(x_k),
    \Psi^e(x_{k+S}))$ of each trajectory (never across two); `predict` is
    $\mathcal{N}$, `target` the later code (the module documentation shows how to train
    the integrator alone, and why to add pairs from `reduced_system_pairs`). Before
    `with_lift` the lift is the coordinate reduction onto the first $n$ positions and
    momenta (a linear symplectic immersion, unbent).

    `structure` is `"none"`: the full-space step has rank `reduced_dim`. The reduced map
    $\mathcal{N}$ is symplectic for every parameter value (`reduced_structure`) and the
    decoder is a symplectic immersion (`geomlearn.evaluation.check_immersion`).

    **Arguments:** `full_dim` $= 2N$, `reduced_dim` $= 2n$ (even, below `full_dim`;
    default 2); `n_features` (the lift's bumps, default 16); `stride` (data steps per
    application, default 8); `n_layers = 8`, `width = 16`, `activation = "tanh"` (of
    $\mathcal{N}$); `key`, `dtype`. Every argument is stored, so `geomlearn.save`/`load`
    round-trip the model, the fitted lift included.
    """

    lift: ManifoldCotangentLift
    integrator_net: GSympNet
    full_dim: int = eqx.field(static=True)
    reduced_dim: int = eqx.field(static=True)
    n_features: int = eqx.field(static=True)
    stride: int = eqx.field(static=True)
    n_layers: int = eqx.field(static=True)
    width: int = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)

    def __init__(self, full_dim: int, reduced_dim: int = 2, *, n_features: int = 16,
                 stride: int = 8, n_layers: int = 8, width: int = 16,
                 activation: Callable | str = "tanh", key: PRNGKeyArray, dtype=None):
        self.full_dim = check_even("full_dim", check_int("full_dim", full_dim, minimum=2))
        self.reduced_dim = check_even("reduced_dim", check_int("reduced_dim", reduced_dim, minimum=2))
        if self.reduced_dim >= self.full_dim:
            raise ValueError(f"reduced_dim must be below full_dim={self.full_dim}, got {reduced_dim}")
        self.n_features = check_int("n_features", n_features, minimum=2)
        self.stride = check_int("stride", stride, minimum=1)
        self.n_layers = check_int("n_layers", n_layers, minimum=1)
        self.width = check_int("width", width, minimum=1)
        self.activation = activation
        self.integrator_net = GSympNet(self.reduced_dim, n_layers=self.n_layers, width=self.width,
                                       activation=activation, key=key, dtype=dtype)
        dt = jax.tree_util.tree_leaves(eqx.filter(self.integrator_net, eqx.is_inexact_array))[0].dtype
        N, n = self.full_dim // 2, self.reduced_dim // 2
        self.lift = ManifoldCotangentLift(jnp.eye(N, n, dtype=dt), jnp.zeros(2 * N, dt),
                                          jnp.zeros((self.n_features, N), dt), 0.0, 1.0)

    # ----------------------------------------------------------------- the two parts

    def with_lift(self, snapshots, *, margin: float = 0.1, ridge: float = 0.0) -> LiftedIntegrator:
        """This model with its lift fitted to `snapshots` (a `TrajectoryData`, all of
        whose states are used, or an array `(M, full_dim)`) by
        [`manifold_cotangent_lift`][geomlearn.reduction.manifold_cotangent_lift]
        (`reduced_dim`, `n_features`, `margin`, `ridge`); the integrator is kept."""
        if isinstance(snapshots, TrajectoryData):
            check_data_dim(self, snapshots, "snapshots")
            X = np.concatenate([np.asarray(t) for t in snapshots.trajectories])
        else:
            X = np.asarray(snapshots)
            if X.ndim != 2 or X.shape[1] != self.full_dim:
                raise ValueError(f"snapshots: expected states of shape (M, {self.full_dim}), got {X.shape}")
        lift = manifold_cotangent_lift(X, self.reduced_dim, n_features=self.n_features,
                                       margin=margin, ridge=ridge)
        dt = self.lift.basis.dtype
        lift = jax.tree_util.tree_map(lambda a: jnp.asarray(a, dt) if eqx.is_inexact_array(a) else a, lift)
        return eqx.tree_at(lambda m: m.lift, self, lift)

    def with_integrator(self, integrator_net: GSympNet) -> LiftedIntegrator:
        """This model with the reduced integrator `integrator_net` (a `GSympNet` of
        `reduced_dim` with this model's `n_layers`, `width` and `activation`, e.g. one
        trained by `fit` on the code pairs)."""
        old = self.integrator_net
        if (not isinstance(integrator_net, GSympNet)
                or jax.tree_util.tree_structure(integrator_net) != jax.tree_util.tree_structure(old)
                or any(a.shape != b.shape for a, b in zip(jax.tree_util.tree_leaves(integrator_net),
                                                          jax.tree_util.tree_leaves(old)))):
            raise ValueError(
                f"integrator_net must be a GSympNet({self.reduced_dim}, n_layers={self.n_layers}, "
                f"width={self.width}, activation={self.activation!r}) like the model's, got "
                f"{type(integrator_net).__name__}")
        return eqx.tree_at(lambda m: m.integrator_net, self, integrator_net)

    def reduced_system_pairs(self, system, data, *, n_samples: int, key: PRNGKeyArray,
                             spread: float = 0.05, method: str = "implicit_midpoint"):
        r"""`(x, y)`, each `(n_samples, reduced_dim)`: codes near the data's and where the
        lift's reduced Hamiltonian system takes them in `stride` steps of the data's
        $\Delta t$ — training pairs off the curve of the data's own codes.

        The codes of one trajectory lie on a curve in $\mathbb{R}^{2n}$; a network
        trained on them alone learns the map near that curve only, and its rollout can
        leave it (on the Toda bump at $2n = 4$ it diverges). The reduced system
        $\dot y = \mathbb{J}_{2n}\nabla(H\circ\Psi^d)(y)$
        ([`ReducedHamiltonianSystem`][geomlearn.reduction.ReducedHamiltonianSystem] of
        `system` and the lift), whose solution follows the full one where the lift's
        image holds the data, defines the map around the curve too: $x$ are the codes of
        `n_samples` states drawn from `data` (a `TrajectoryData`) plus
        $\mathcal{N}(0, (\text{spread}\,\sigma_i)^2)$ in component $i$ ($\sigma_i$ the
        codes' standard deviation), $y$ the reduced system's state `stride` steps of
        `method` later. Fit the lift first (`with_lift`).
        """
        n = check_int("n_samples", n_samples, minimum=1)
        spread = float(spread)
        if not (np.isfinite(spread) and spread >= 0):
            raise ValueError(f"spread must be finite and >= 0, got {spread}")
        check_data_dim(self, data, "data")
        if system.dim != self.full_dim:
            raise ValueError(f"system has dim={system.dim}, the model full_dim={self.full_dim}")
        codes = jax.vmap(self.lift.encode)(jnp.concatenate(list(data.trajectories)))
        k_pick, k_noise = jax.random.split(key)
        picked = codes[jax.random.randint(k_pick, (n,), 0, codes.shape[0])]
        noise = jax.random.normal(k_noise, picked.shape, picked.dtype)
        x = picked + spread * jnp.std(codes, axis=0)[None, :] * noise
        path = integrate(ReducedHamiltonianSystem(system, self.lift), x, data.dt, self.stride,
                         method=method)
        return x, path[:, -1]

    def encode(self, z: Float[Array, " 2N"]) -> Float[Array, " 2n"]:
        return self.lift.encode(z)

    def decode(self, y: Float[Array, " 2n"]) -> Float[Array, " 2N"]:
        return self.lift.decode(y)

    # ---------------------------------------------------------------------- protocol

    def training_samples(self, data, task: Task, *, what: str = "data"):
        r"""`(x, y, task)`: the code pairs $(\Psi^e(x_k), \Psi^e(x_{k+S}))$, `(M, 2n)`
        each, of every trajectory of a `TrajectoryData` (never across two), or of a tuple
        `(inputs, targets)` of full states `(M, full_dim)` that lie `stride` steps apart
        (encoded here) or of codes `(M, reduced_dim)` (used as they are)."""
        arrays = sample_arrays(data, what)
        encode = jax.jit(jax.vmap(self.lift.encode))
        if arrays is None:
            check_data_dim(self, data, what)
            S = self.stride
            parts = [(t[:-S], t[S:]) for t in data.trajectories if t.shape[0] > S]
            if not parts:
                raise ValueError(f"{what}: no trajectory has more than stride={S} steps, so "
                                 f"there are no pairs {S} steps apart (lengths {data.lengths})")
            x = jnp.concatenate([p[0] for p in parts])
            y = jnp.concatenate([p[1] for p in parts])
            return encode(x), encode(y), task
        x, y = arrays
        if x.ndim == 2 and x.shape[1] == self.full_dim:
            return encode(x), encode(y), task
        if x.ndim != 2 or x.shape[1] != self.reduced_dim:
            raise ValueError(f"{what}: expected full states (M, {self.full_dim}) or codes "
                             f"(M, {self.reduced_dim}), got {x.shape}")
        return x, y, task

    def predict(self, x, task: Task):
        """$\\mathcal{N}$ of one code."""
        return self.integrator_net(x)

    def target(self, y, task: Task):
        return y

    def describe_step(self, task: Task) -> str:
        return (f"z ↦ decode(GSympNet(encode(z))) through the {self.reduced_dim}-dimensional "
                f"codes of a manifold cotangent lift; one step is {self.stride} steps of the "
                "data (rolled out in the codes)")
