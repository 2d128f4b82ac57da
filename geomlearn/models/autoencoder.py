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
rollout iterates $\mathcal{N}$ in the reduced space and decodes once.
"""

from __future__ import annotations

from typing import Callable, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._activations import resolve_activation
from .._typing import Array, Float, PRNGKeyArray
from .._validation import check_even, check_int, float_dtype
from ..manifolds import StiefelMatrix
from ..reduction import immersion_residual, proper_symplectic_decomposition
from ._base import map_residuals, scan_rollout
from ._integrators import AbstractPointModel, point_pairs
from ._task import Snapshots, Task, check_data_dim, no_options, sample_arrays
from .resnet import ResNet
from .sympnet import GSympNet, LASympNet

__all__ = ["PSDLayer", "SymplecticAutoencoder", "ReducedIntegrator", "initialize_from_psd"]


class PSDLayer(eqx.Module):
    r"""A PSD-like layer between $\mathbb{R}^{2m}$ and $\mathbb{R}^{2M}$, $m \le M$.

    `up(y) = (Φ y_q, Φ y_p)` is a linear symplectic immersion, `down(z) = (Φᵀ z_q, Φᵀ
    z_p)` its symplectic inverse ($\text{down}\circ\text{up} = \text{id}$), with $\Phi$ a
    [`StiefelMatrix`][geomlearn.manifolds.StiefelMatrix] `(M, m)` drawn at random on the
    manifold.

    **Arguments:** `small_dim = 2m`, `large_dim = 2M` (even, `small_dim ≤ large_dim`),
    `key`, `dtype`.
    """

    weight: StiefelMatrix
    small_dim: int = eqx.field(static=True)
    large_dim: int = eqx.field(static=True)

    def __init__(self, small_dim: int, large_dim: int, *, key: PRNGKeyArray, dtype=None):
        self.small_dim = check_even("small_dim", small_dim)
        self.large_dim = check_even("large_dim", large_dim)
        if self.small_dim > self.large_dim:
            raise ValueError(f"small_dim must be <= large_dim, got {small_dim} > {large_dim}")
        self.weight = StiefelMatrix.random(self.large_dim // 2, self.small_dim // 2, key=key,
                                           dtype=dtype)

    def up(self, y: Float[Array, " 2m"]) -> Float[Array, " 2M"]:
        _check_point("PSDLayer.up", y, self.small_dim)
        m = self.small_dim // 2
        Phi = self.weight.value.astype(y.dtype)
        return jnp.concatenate([Phi @ y[:m], Phi @ y[m:]])

    def down(self, z: Float[Array, " 2M"]) -> Float[Array, " 2m"]:
        _check_point("PSDLayer.down", z, self.large_dim)
        M = self.large_dim // 2
        Phi = self.weight.value.astype(z.dtype)
        return jnp.concatenate([Phi.T @ z[:M], Phi.T @ z[M:]])


def _half_dims(full_half: int, reduced_half: int, n_blocks: int) -> list[int]:
    """`n_blocks + 1` half-dimensions from `full_half` down to `reduced_half`, linearly
    spaced (strictly decreasing where possible)."""
    dims = np.linspace(full_half, reduced_half, n_blocks + 1).round().astype(int).tolist()
    dims[0], dims[-1] = full_half, reduced_half
    return [int(d) for d in dims]


def _check_point(name, z, size):
    if z.shape != (size,):
        raise ValueError(
            f"{name}: expected one point of shape ({size},), got {z.shape} (use jax.vmap "
            "for a batch)"
        )


class SymplecticAutoencoder(AbstractPointModel):
    r"""A symplectic autoencoder $\mathbb{R}^{2N} \to \mathbb{R}^{2n} \to \mathbb{R}^{2N}$
    whose decoder is a symplectic immersion for every parameter value.

    **Encoder** (`n_encoder_blocks = B_e` blocks, half-dimensions $N = m_0 > m_1 > \dots >
    m_{B_e} = n$ linearly spaced): for each block a [`GSympNet`][geomlearn.models.GSympNet]
    of `n_encoder_layers` gradient layers on $\mathbb{R}^{2m_b}$, then the PSD-like
    projection $(q, p) \mapsto (\Phi_b^\top q, \Phi_b^\top p)$ to $\mathbb{R}^{2m_{b+1}}$.

    **Decoder** (`n_decoder_blocks = B_d` blocks, $n = m'_0 < \dots < m'_{B_d} = N$): for
    each block a GSympNet of `n_decoder_layers` layers on $\mathbb{R}^{2m'_b}$, then the
    PSD-like immersion $(q, p) \mapsto (\Phi'_b q, \Phi'_b p)$; finally a GSympNet on
    $\mathbb{R}^{2N}$. Each factor $F$ satisfies $DF^\top\mathbb{J}DF = \mathbb{J}$, hence
    so does the decoder (Brantner & Kraus, *Symplectic autoencoders for model reduction
    of Hamiltonian systems*, 2023). The encoder is not constrained beyond its layers.

    Every gradient layer has `width` hidden units (the reference package uses a width
    proportional to the dimension; a fixed width keeps the 400-dimensional layers cheap
    on a CPU).

    **Training** (`geomlearn.fit`): the samples are the *snapshots* — every state of a
    `TrajectoryData`, or a tuple `(X, X)` of arrays `(M, full_dim)` — and the prediction
    is the reconstruction `decode(encode(x))`. Use
    `optimizer=geomlearn.manifolds.riemannian_adam(...)` so the Stiefel matrices stay
    orthonormal. An autoencoder is not an integrator: `iterate` refuses it.
    `structure` is `"symplectic"`: the *decoder* is a symplectic immersion.

    **Arguments:** `full_dim = 2N`, `reduced_dim = 2n` (even, `reduced_dim ≤ full_dim`);
    `n_encoder_layers = 4`, `n_encoder_blocks = 2`, `n_decoder_layers = 1`,
    `n_decoder_blocks = 3` (the reference package's defaults), `width = 16`,
    `activation = "tanh"`, `key`, `dtype`.

    ```python
    ae = SymplecticAutoencoder(400, 2, key=jax.random.PRNGKey(0))
    y = ae.encode(z)          # (2,)
    z_hat = ae.decode(y)      # (400,)
    ```
    """

    structure: ClassVar[str] = "symplectic"

    encoder_blocks: tuple[tuple[GSympNet, PSDLayer], ...]
    decoder_blocks: tuple[tuple[GSympNet, PSDLayer], ...]
    decoder_head: GSympNet
    full_dim: int = eqx.field(static=True)
    reduced_dim: int = eqx.field(static=True)
    n_encoder_layers: int = eqx.field(static=True)
    n_encoder_blocks: int = eqx.field(static=True)
    n_decoder_layers: int = eqx.field(static=True)
    n_decoder_blocks: int = eqx.field(static=True)
    width: int = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)

    def __init__(
        self,
        full_dim: int,
        reduced_dim: int,
        *,
        n_encoder_layers: int = 4,
        n_encoder_blocks: int = 2,
        n_decoder_layers: int = 1,
        n_decoder_blocks: int = 3,
        width: int = 16,
        activation: Callable | str = "tanh",
        key: PRNGKeyArray,
        dtype=None,
    ):
        self.full_dim = check_even("full_dim", full_dim)
        self.reduced_dim = check_even("reduced_dim", reduced_dim)
        if self.reduced_dim < 2 or self.reduced_dim > self.full_dim:
            raise ValueError(
                f"reduced_dim must be between 2 and full_dim={full_dim}, got {reduced_dim}"
            )
        self.n_encoder_layers = check_int("n_encoder_layers", n_encoder_layers, minimum=1)
        self.n_encoder_blocks = check_int("n_encoder_blocks", n_encoder_blocks, minimum=1)
        self.n_decoder_layers = check_int("n_decoder_layers", n_decoder_layers, minimum=1)
        self.n_decoder_blocks = check_int("n_decoder_blocks", n_decoder_blocks, minimum=1)
        self.width = check_int("width", width, minimum=1)
        resolve_activation(activation)
        self.activation = activation
        dtype = float_dtype(dtype)
        N, n = self.full_dim // 2, self.reduced_dim // 2
        k_enc, k_dec, k_head = jax.random.split(key, 3)

        enc_dims = _half_dims(N, n, self.n_encoder_blocks)
        blocks = []
        for b, k in enumerate(jax.random.split(k_enc, self.n_encoder_blocks)):
            k1, k2 = jax.random.split(k)
            net = GSympNet(2 * enc_dims[b], n_layers=self.n_encoder_layers, width=self.width,
                           activation=activation, key=k1, dtype=dtype)
            blocks.append((net, PSDLayer(2 * enc_dims[b + 1], 2 * enc_dims[b], key=k2,
                                         dtype=dtype)))
        self.encoder_blocks = tuple(blocks)

        dec_dims = _half_dims(N, n, self.n_decoder_blocks)[::-1]
        blocks = []
        for b, k in enumerate(jax.random.split(k_dec, self.n_decoder_blocks)):
            k1, k2 = jax.random.split(k)
            net = GSympNet(2 * dec_dims[b], n_layers=self.n_decoder_layers, width=self.width,
                           activation=activation, key=k1, dtype=dtype)
            blocks.append((net, PSDLayer(2 * dec_dims[b], 2 * dec_dims[b + 1], key=k2,
                                         dtype=dtype)))
        self.decoder_blocks = tuple(blocks)
        self.decoder_head = GSympNet(self.full_dim, n_layers=self.n_decoder_layers,
                                     width=self.width, activation=activation, key=k_head,
                                     dtype=dtype)

    @property
    def dim(self) -> int:
        return self.full_dim

    # ------------------------------------------------------------------ the maps

    def encode(self, z: Float[Array, " 2N"]) -> Float[Array, " 2n"]:
        """The reduced coordinates of one state `z` `(full_dim,)`."""
        _check_point("SymplecticAutoencoder.encode", z, self.full_dim)
        for net, psd in self.encoder_blocks:
            z = psd.down(net(z))
        return z

    def decode(self, y: Float[Array, " 2n"]) -> Float[Array, " 2N"]:
        """The full state of reduced coordinates `y` `(reduced_dim,)`: a symplectic
        immersion."""
        _check_point("SymplecticAutoencoder.decode", y, self.reduced_dim)
        for net, psd in self.decoder_blocks:
            y = psd.up(net(y))
        return self.decoder_head(y)

    def __call__(self, z: Float[Array, " 2N"]) -> Float[Array, " 2N"]:
        """`decode(encode(z))`."""
        return self.decode(self.encode(z))

    # ------------------------------------------------------------------ protocol

    def task(self, *, seq_length=None, prediction_window=None, dt=None, data_dt=None) -> Task:
        no_options(self, seq_length=seq_length, prediction_window=prediction_window, dt=dt)
        return Task(samples=Snapshots())

    def rollout_task(self, initial_shape, *, prediction_window=None, dt=None) -> Task:
        return self.task(prediction_window=prediction_window, dt=dt)

    def training_samples(self, data, task: Task, *, what: str = "data"):
        """Snapshots `(x, x)`: every state of a `TrajectoryData` (flattened over
        trajectories and time), or a tuple `(X, X)` of arrays `(M, full_dim)`."""
        arrays = sample_arrays(data, what)
        if arrays is None:
            check_data_dim(self, data, what)
            X = jnp.asarray(data.states).reshape(-1, self.full_dim)
            return X, X, Task(samples=Snapshots())
        x, y = arrays
        if x.ndim != 2 or x.shape[-1] != self.full_dim:
            raise ValueError(
                f"{what}: expected snapshots of shape (M, {self.full_dim}), got {x.shape}"
            )
        return x, y, Task(samples=Snapshots())

    def predict(self, x, task: Task):
        return self(x)

    def target(self, y, task: Task):
        return y

    def step(self, state, task: Task):
        """No step: an autoencoder is not an integrator (`TypeError`)."""
        raise TypeError(f"{type(self).__name__} is not an integrator: it has no one-step map")

    def rollout(self, initial, n_points: int, task: Task):
        """No rollout: an autoencoder is not an integrator (`TypeError`)."""
        return self.step(initial, task)

    def structure_residuals(self, points, task: Task) -> dict:
        """`{"immersion"}`: the maximum over `points` (full states, encoded first) of
        the decoder's immersion residual (see `geomlearn.reduction.immersion_residual`)."""
        ys = jax.vmap(self.encode)(points)
        res = jax.jit(jax.vmap(lambda y: immersion_residual(self.decode, y)))(ys)
        return {"immersion": float(np.max(np.asarray(res, dtype=np.float64)))}

    def describe_step(self, task: Task) -> str:
        return (f"no step: an autoencoder {self.full_dim} → {self.reduced_dim} → "
                f"{self.full_dim} (decoder a symplectic immersion)")


def initialize_from_psd(autoencoder: SymplecticAutoencoder, snapshots) -> SymplecticAutoencoder:
    r"""`autoencoder` with its outermost PSD-like layers set from the PSD of `snapshots`.

    The first encoder projection and the last decoder immersion get the leading PSD
    modes (as many as their intermediate dimension); every inner PSD-like layer becomes
    the coordinate embedding $[I; 0]$. The SympNet blocks start close to the identity, so
    the autoencoder starts close to the PSD of size `reduced_dim` and training refines
    it. The Stiefel matrices stay on the manifold (orthonormal SVD vectors)."""
    ae = autoencoder
    X = jnp.asarray(snapshots).reshape(-1, ae.full_dim)
    enc_first = ae.encoder_blocks[0][1]
    dec_last = ae.decoder_blocks[-1][1]
    m = max(enc_first.small_dim, dec_last.small_dim)
    basis = proper_symplectic_decomposition(X, m).basis

    def embed(layer):
        M, k = layer.large_dim // 2, layer.small_dim // 2
        return jnp.eye(M, k, dtype=layer.weight.value.dtype)

    new = ae
    for b, (_, psd) in enumerate(ae.encoder_blocks):
        value = basis[:, : psd.small_dim // 2] if b == 0 else embed(psd)
        new = eqx.tree_at(lambda a, b=b: a.encoder_blocks[b][1].weight.value, new,
                          value.astype(psd.weight.value.dtype))
    last = len(ae.decoder_blocks) - 1
    for b, (_, psd) in enumerate(ae.decoder_blocks):
        value = basis[:, : psd.small_dim // 2] if b == last else embed(psd)
        new = eqx.tree_at(lambda a, b=b: a.decoder_blocks[b][1].weight.value, new,
                          value.astype(psd.weight.value.dtype))
    return new


# The reduced integrators by the name `ReducedIntegrator(integrator=...)` stores, each built
# on R^{2n} from (dim, n_layers, width, activation, key, dtype).
_INTEGRATORS: dict[str, Callable[..., eqx.Module]] = {
    "gsympnet": lambda d, n, w, a, k, t: GSympNet(d, n_layers=n, width=w, activation=a, key=k, dtype=t),
    "lasympnet": lambda d, n, w, a, k, t: LASympNet(d, n_layers=n, key=k, dtype=t),
    "resnet": lambda d, n, w, a, k, t: ResNet(d, width=w, depth=n, activation=a, key=k, dtype=t),
}


class ReducedIntegrator(AbstractPointModel):
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

    structure: ClassVar[str] = "none"

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
        n_layers = n_layers if n_layers is not None else getattr(
            integrator_net, "n_layers", getattr(integrator_net, "depth", 1))
        width = width if width is not None else getattr(integrator_net, "width", 16)
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

    @property
    def dim(self) -> int:
        return self.full_dim

    @property
    def reduced_structure(self) -> str:
        """What the reduced map $\\mathcal{N}$ preserves."""
        return self.integrator_net.structure

    def _ae(self):
        if self.train_autoencoder:
            return self.autoencoder
        params, static = eqx.partition(self.autoencoder, eqx.is_inexact_array)
        return eqx.combine(jax.lax.stop_gradient(params), static)

    def encode(self, z):
        return self._ae().encode(z)

    def decode(self, y):
        return self._ae().decode(y)

    def __call__(self, z: Float[Array, " 2N"]) -> Float[Array, " 2N"]:
        """One step $\\Psi^d(\\mathcal{N}(\\Psi^e(z)))$ of one full state."""
        ae = self._ae()
        return ae.decode(self.integrator_net(ae.encode(z)))

    def task(self, *, seq_length=None, prediction_window=None, dt=None, data_dt=None) -> Task:
        """Takes none of the options: a one-step map of full states."""
        no_options(self, seq_length=seq_length, prediction_window=prediction_window, dt=dt)
        return Task()

    def rollout_task(self, initial_shape, *, prediction_window=None, dt=None) -> Task:
        return self.task(prediction_window=prediction_window, dt=dt)

    def training_samples(self, data, task: Task, *, what: str = "data"):
        """One-step pairs of full states (a `TrajectoryData`, or a tuple of arrays
        `(M, full_dim)`)."""
        return point_pairs(self, data, task, what=what)

    def predict(self, x, task: Task):
        return self(x)

    def target(self, y, task: Task):
        return y

    def step(self, state, task: Task):
        return self(state)

    def structure_residuals(self, points, task: Task) -> dict:
        """`{"symplecticity", "volume", "condition"}` of the full-space step (which claims
        nothing: its rank is `reduced_dim`)."""
        return map_residuals(self, points, self.dim)

    def reduced_rollout(self, y0: Float[Array, " 2n"], n_points: int) -> Float[Array, "T 2n"]:
        """`n_points` reduced states: `y0` and iterates of $\\mathcal{N}$ (one scan)."""
        return scan_rollout(self.integrator_net, y0, n_points)

    def rollout(self, initial, n_points: int, task: Task):
        ae = self._ae()
        ys = self.reduced_rollout(ae.encode(initial), n_points)
        return jax.vmap(ae.decode)(ys)

    def describe_step(self, task: Task) -> str:
        return (f"z ↦ decode({type(self.integrator_net).__name__}(encode(z))) through a "
                f"{self.reduced_dim}-dimensional reduced space (rolled out there)")
