r"""The symplectic autoencoder and its PSD-like layers.

[`SymplecticAutoencoder`][geomlearn.reduction.SymplecticAutoencoder] compresses a state
$z \in \mathbb{R}^{2N}$ of a large Hamiltonian system to $y \in \mathbb{R}^{2n}$ and
back. Following Brantner & Kraus (*Symplectic autoencoders for model reduction of
Hamiltonian systems*, 2023) it alternates gradient-SympNet blocks (symplectic
diffeomorphisms of the current space) with *PSD-like layers*

$$ \mathbb{R}^{2m} \to \mathbb{R}^{2M}: (q, p) \mapsto (\Phi q, \Phi p), \qquad
\Phi \in St(m, M) \ (\Phi^\top\Phi = I), $$

which are linear symplectic immersions. A composition of symplectic diffeomorphisms and
symplectic immersions is a symplectic immersion, so the **decoder satisfies
$(D\Psi^d)^\top\mathbb{J}_{2N}D\Psi^d = \mathbb{J}_{2n}$ for every parameter value**.
The matrices $\Phi$ are [`StiefelMatrix`][geomlearn.manifolds.StiefelMatrix]
parameters: train with [`riemannian_adam`][geomlearn.manifolds.riemannian_adam] to keep
them on the manifold (plain Adam would break the immersion property).

**Reference state.** `initialize_from_psd` sets the reference state $\bar x$ of a
`SymplecticAutoencoder` to the snapshot mean, so that no mode is spent on the conserved
mean position; it is then trained with the other parameters. It sets the loss weights
$w_q$, $w_p$ to the reciprocal root-mean-square variation of the positions and of the
momenta, so the relative loss weighs the motion of $q$ and of $p$ alike (where a large
constant part of $q$ and small momenta would otherwise let the loss ignore $p$; see the
concepts page on model reduction).

**Width.** Every gradient layer has `width` hidden units (the reference package uses a
width proportional to the dimension; a fixed width keeps the 400-dimensional layers
cheap on a CPU).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._activations import resolve_activation
from .._typing import Array, Float, PRNGKeyArray
from .._validation import check_even, check_int, float_dtype
from ..manifolds import StiefelMatrix
from ..models._integrators import AbstractPointModel
from ..models._task import Snapshots, Task, check_data_dim, no_options, sample_arrays
from ..models.sympnet import GSympNet
from ._psd import proper_symplectic_decomposition
from ._reduced_system import immersion_residual

__all__ = ["PSDLayer", "SymplecticAutoencoder", "initialize_from_psd"]


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

    **Reference state and weights.** The encoder first subtracts, and the decoder finally
    adds, a reference state $\bar x$ (`reference`; a translation keeps the decoder a
    symplectic immersion), and the reconstruction is compared centred and weighted per
    block, $w\odot(\Psi^d(\Psi^e(x)) - \bar x)$ against $w\odot(x - \bar x)$ with
    $w = (w_q\mathbf 1_N, w_p\mathbf 1_N)$ (`loss_weights`, not trained). A new
    autoencoder has $\bar x = 0$ and unit weights;
    [`initialize_from_psd`][geomlearn.reduction.initialize_from_psd] sets them from the data.

    **Training** (`geomlearn.fit`): the samples are the snapshots — every state of a
    `TrajectoryData`, or a tuple `(X, X)` of arrays `(M, full_dim)` — and the prediction
    is the reconstruction; use `optimizer=geomlearn.manifolds.riemannian_adam(...)` so the
    Stiefel matrices stay orthonormal. An autoencoder is not an integrator: `iterate`
    refuses it. `structure` is `"symplectic"`: the *decoder* is a symplectic immersion.

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
    reference: Float[Array, " 2N"]
    loss_weights: Float[Array, " 2"]
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
        self.reference = jnp.zeros(self.full_dim, dtype)
        self.loss_weights = jnp.ones(2, dtype)

    @property
    def dim(self) -> int:
        return self.full_dim

    # ------------------------------------------------------------------ the maps

    def encode(self, z: Float[Array, " 2N"]) -> Float[Array, " 2n"]:
        """The reduced coordinates of one state `z` `(full_dim,)`."""
        _check_point("SymplecticAutoencoder.encode", z, self.full_dim)
        z = z - self.reference.astype(z.dtype)
        for net, psd in self.encoder_blocks:
            z = psd.down(net(z))
        return z

    def decode(self, y: Float[Array, " 2n"]) -> Float[Array, " 2N"]:
        """The full state of reduced coordinates `y` `(reduced_dim,)`: a symplectic
        immersion."""
        _check_point("SymplecticAutoencoder.decode", y, self.reduced_dim)
        for net, psd in self.decoder_blocks:
            y = psd.up(net(y))
        return self.reference.astype(y.dtype) + self.decoder_head(y)

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

    def _weighted(self, z):
        r"""$w \odot (z - \bar x)$: the centred state with the positions scaled by
        $w_q$ and the momenta by $w_p$ (`loss_weights`; no gradient into either)."""
        w = jax.lax.stop_gradient(self.loss_weights).astype(z.dtype)
        ref = jax.lax.stop_gradient(self.reference).astype(z.dtype)
        return jnp.repeat(w, self.full_dim // 2) * (z - ref)

    def predict(self, x, task: Task):
        r"""The weighted, centred reconstruction $w\odot(\Psi^d(\Psi^e(x)) - \bar x)$."""
        return self._weighted(self(x))

    def target(self, y, task: Task):
        r"""$w\odot(y - \bar x)$, so the relative loss is
        $\lVert w\odot(\hat Y - Y)\rVert / \lVert w\odot(Y - \bar x)\rVert$."""
        return self._weighted(y)

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


def _block_rms(X):
    """The root-mean-square variation of the positions and of the momenta of snapshots
    `X` `(M, 2N)` about their mean (a floor of the dtype's tiny for a constant block)."""
    N = X.shape[-1] // 2
    C = X - X.mean(axis=0, keepdims=True)
    tiny = jnp.finfo(X.dtype).tiny
    return jnp.stack([jnp.sqrt(jnp.mean(C[:, :N] ** 2)), jnp.sqrt(jnp.mean(C[:, N:] ** 2))]) + tiny


def initialize_from_psd(autoencoder: SymplecticAutoencoder, snapshots, *, centred: bool = True,
                        normalise: bool = True) -> SymplecticAutoencoder:
    r"""`autoencoder` started from the PSD of `snapshots`.

    The first encoder projection and the last decoder immersion get the leading modes of
    the PSD (as many as their intermediate dimension); every inner PSD-like layer becomes
    the coordinate embedding $[I; 0]$. The SympNet blocks start close to the identity, so
    the autoencoder starts close to the PSD of size `reduced_dim` and training refines
    it. The Stiefel matrices stay on the manifold (orthonormal SVD vectors).

    **Arguments:** `autoencoder`; `snapshots` `(M, full_dim)` (any leading axes);
    `centred = True`: the reference state $\bar x$ is the snapshot mean
    (`geomlearn.reduction.snapshot_mean`) and the PSD is the centred one (`False`: $\bar x
    = 0$, the plain PSD); `normalise = True`: the loss weights $w_q, w_p$ are the
    reciprocal root-mean-square variations of the positions and the momenta (`False`:
    ones, the plain relative loss)."""
    ae = autoencoder
    X = jnp.asarray(snapshots).reshape(-1, ae.full_dim)
    enc_first = ae.encoder_blocks[0][1]
    dec_last = ae.decoder_blocks[-1][1]
    m = max(enc_first.small_dim, dec_last.small_dim)
    base = proper_symplectic_decomposition(X, m, centred=centred)
    basis = base.basis

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
    dtype = ae.reference.dtype
    weights = 1.0 / _block_rms(X) if normalise else jnp.ones(2)
    return eqx.tree_at(lambda a: (a.reference, a.loss_weights), new,
                       (base.reference.astype(dtype), weights.astype(dtype)))


