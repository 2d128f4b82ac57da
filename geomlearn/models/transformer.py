r"""Transformer integrators: window → window maps built from attention layers.

A transformer integrator is an explicit multi-step method learned from data. It reads a
window $Z \in \mathbb{R}^{T \times d}$ of the last $T$ states (row $t$ the state at time
$t$) and returns a window of the same shape, the input shifted by the prediction window
(training and rollout decide how many of its last rows are the prediction).

Three designs, all `eqx.Module`s acting on one window (batches via `jax.vmap`):

| model | building blocks | structure | window length |
|---|---|---|---|
| [`Transformer`][geomlearn.models.Transformer] | multi-head softmax attention + ResNet layers | none | any |
| [`LinearSymplecticTransformer`][geomlearn.models.LinearSymplecticTransformer] | linear symplectic attention + gradient layers | symplectic | fixed `seq_length` |
| [`SymplecticTransformer`][geomlearn.models.SymplecticTransformer] | matrix-softmax symplectic attention + gradient layers | symplectic | any |

The symplectic ones live in `geomlearn.models.symplectic_transformer` (re-exported here).

"Symplectic" is meant in the product-space sense: the Jacobian on the flattened window
preserves $\Omega = I_T \otimes \mathbb{J}$ (see `geomlearn.geometry`), for every
parameter value. `positional_encoding` lets every model see the order of the rows
without changing its structure (`True` means the family's measured, zero-initialised
position signal of two features: `"amplitude"`, a row-dependent step
$h_t = 1 + g^\top e_t$ scaling the increment of every gradient layer, for the symplectic
transformers, and of every residual layer for the standard one;
`"split-amplitude"`, one step for the lower and one for the upper triangular layers of
each unit, for the volume-preserving one; `"bias-every-layer"` the earlier
bias design, eight features in every row-wise layer; `"input"`, `"scaled"` and
`"conjugate"` translate the window);
the placement becomes an object once, in the constructor (see
`geomlearn.layers._position_signal` and docs/concepts/positional_encoding.md).
"""

from __future__ import annotations

import math
from typing import Callable, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from .._activations import resolve_activation
from .._typing import Array, Float, PRNGKeyArray
from .._validation import check_int, float_dtype
from .._validation import check_bool as _check_bool
from ..layers._position_signal import (
    SHARED_PLACEMENTS,
    AbstractPositionSignal,
    parse_positional_encoding,
    position_amplitude,
    position_bias,
    resnet_layer_with_bias,
)
from ..layers.attention import MultiHeadAttention
from ..layers.positional import PositionalEncoding
from ..layers.resnet import ResNetLayer
from ._integrators import AbstractTransformerIntegrator
from ._window import check_model_window
from .symplectic_transformer import (
    AbstractSymplecticTransformer,
    LinearSymplecticTransformer,
    SymplecticTransformer,
)

__all__ = [
    "Transformer",
    "AbstractSymplecticTransformer",
    "LinearSymplecticTransformer",
    "SymplecticTransformer",
]


class _Dense(eqx.Module):
    """An affine map `x ↦ W x + b` applied to every row of a window (no activation)."""

    weight: Float[Array, "out_dim in_dim"]
    bias: Float[Array, " out_dim"]

    def __init__(self, in_dim: int, out_dim: int, *, key: PRNGKeyArray, dtype):
        std = math.sqrt(2.0 / (in_dim + out_dim))  # Glorot normal
        self.weight = std * jax.random.normal(key, (out_dim, in_dim), dtype)
        self.bias = jnp.zeros((out_dim,), dtype)

    def __call__(self, Z: Float[Array, "T in_dim"]) -> Float[Array, "T out_dim"]:
        dtype = Z.dtype
        return Z @ self.weight.astype(dtype).T + self.bias.astype(dtype)[None, :]


def _transformer_layers(D, n_heads, L, n_blocks, activation, add_connection, keys, dtype):
    """`L` units `[MHA, n_blocks nonlinear residual layers, one linear residual layer]`."""
    layers = []
    for k in keys:
        k_att, *k_res = jax.random.split(k, 2 + n_blocks)
        layers.append(
            MultiHeadAttention(D, n_heads, add_connection=add_connection, key=k_att, dtype=dtype)
        )
        for kr in k_res[:-1]:
            layers.append(ResNetLayer(D, activation, key=kr, dtype=dtype))
        layers.append(ResNetLayer(D, "identity", key=k_res[-1], dtype=dtype))
    return tuple(layers)


# --------------------------------------------------------------------------------------


class Transformer(AbstractTransformerIntegrator):
    r"""The standard transformer integrator (softmax attention; preserves no structure).

    $$\mathcal{T} = \Big(\mathcal{D}_{\downarrow} \circ
      \big(\mathcal{R}^{\mathrm{lin}} \circ \mathcal{R}_{n_\text{blocks}} \circ \cdots
      \circ \mathcal{R}_1 \circ \mathrm{MHA}\big)^{L} \circ \mathcal{D}_{\uparrow}\Big),$$

    applied to a window $Z \in \mathbb{R}^{T \times d}$:

    - $\mathcal{D}_{\uparrow}$, $\mathcal{D}_{\downarrow}$: affine maps of each row from
      `dim` up to `transformer_dim` and back (only when `transformer_dim != dim`);
    - $\mathrm{MHA}$: [`MultiHeadAttention`][geomlearn.layers.MultiHeadAttention] with `n_heads`
      heads on `transformer_dim` features (with the input added when `add_connection`);
    - $\mathcal{R}_i$: `n_blocks` [`ResNetLayer`][geomlearn.layers.ResNetLayer]s
      $x \leftarrow x + \sigma(W_i x + b_i)$ with the given `activation`, applied row by
      row, followed by one linear residual layer
      $\mathcal{R}^{\mathrm{lin}}: x \leftarrow x + W x + b$.

    This is the construction of GeometricMachineLearning.jl's standard transformer
    integrator, whose feed-forward part is its `ResNet` architecture: `n_blocks`
    nonlinear residual layers and a final linear one. Per unit, with
    $D$ = `transformer_dim`, that is $3D^2 + (n_\text{blocks} + 1)(D^2 + D)$ parameters,
    plus $2\,d D + d + D$ for the lift when $D \ne d$. For `dim=4, n_heads=2, L=1,
    n_blocks=2` this gives $48 + 3 \cdot 20 = 108$, the count of the Julia tutorial.

    The attention scores are scaled by $1/\sqrt{D/H}$ (per-head dimension; the Julia
    package uses $1/\sqrt{D}$). Without positional encoding the map is
    permutation-equivariant along time.

    **Position bias** (`"bias-light"`; `True` until 2026-12-04, in files of layout 2,
    which load as it): the rows entering the first attention layer (after the lift)
    become $x_t + G_0 e_t$, and every residual layer $i$ of row $t$ becomes
    $x_t + \sigma(W_i x_t + b_i + G_i e_t)$, with the two
    centred features $e_t = (\sin t, \cos t) - \text{mean}$ and gains
    $G_i \in \mathbb{R}^{D \times 2}$ initialised to zero: $2D\,(1 + L(n_\text{blocks}
    + 1))$ parameters. `"bias"` keeps only $G_0$ ($2D$; measured to recover none of the
    order dependence on the driven pendulum); `"bias-every-layer"`, the earlier design,
    put eight features into each gain, $8D\,(1 + L(n_\text{blocks} + 1))$. Under
    Levenberg–Marquardt an iteration costs $\propto P^2$, so $\Delta P$ added parameters
    make it up to $(1 + \Delta P/P)^2$ times dearer: at the command line's size
    (`transformer_dim=10` since 2026-12-03) at `dim=4`, `"bias-light"` takes $1134 \to 1234$
    parameters ($1.18\times$ per iteration at most); at `transformer_dim = dim = 4` (its
    size until then) $176 \to 216$ ($1.51\times$), `"bias"` $176 \to 184$
    ($1.09\times$), the earlier design $176 \to 336$ ($3.6\times$).

    **Position amplitude** (`positional_encoding=True`, `"amplitude"`): no input gain;
    every residual layer $i$ of row $t$ becomes $x_t + h_{i,t}\,\sigma(W_i x_t + b_i)$
    with the step $h_{i,t} = 1 + g_i^\top e_t$, $g_i \in \mathbb{R}^2$ initialised to
    zero: $2L(n_\text{blocks} + 1)$ parameters whatever $D$ — at the command line's size
    at `dim=4`, $1134 \to 1142$ ($1.01\times$ per iteration at most), at
    `dim = transformer_dim = 4` $176 \to 184$ ($1.09\times$). Measured through
    `geomlearn train` (benchmarks/RESULTS.md, "The standard transformer's `True` is the
    amplitude"): on the driven pendulum, where the order matters, 22× more accurate than
    no encoding (ten seeds, none worse; `"bias-light"`, `True` until 2026-12-04, 4.6×),
    and on the Markov systems free on the median (rigid body 1.00×, Hénon–Heiles 0.90×
    over three seeds; coupled oscillator 1.02× over eight, three of which ended 1.4–2.7×
    worse). At `transformer_dim = dim` it cost 2.28× on the rigid body (20 s, three
    seeds): the measurement is of the command line's size.

    **Arguments:**

    - `dim`: the state dimension $d$ (any `dim ≥ 1`).
    - `n_heads`: attention heads; must divide `transformer_dim` (default 1).
    - `L`: the number of units `[attention, residual layers]` (default 2).
    - `n_blocks`: nonlinear residual layers per unit (default 1).
    - `transformer_dim`: the internal feature dimension; `None` means `dim` (no lift).
    - `activation`: the residual layers' activation, a callable or a name (default tanh).
    - `add_connection`: add the input to each attention output (default `True`).
    - `positional_encoding`: `False` (default: no position signal), `True` (this family's
      default placement, `"amplitude"`: a zero-initialised, row-dependent step of every
      residual layer's increment) or a placement by name,
      `"bias"`, `"bias-light"`, `"bias-every-layer"`, `"amplitude"`, `"input"`,
      `"scaled"` or `"conjugate"` (see the module documentation).
    - `key`: a JAX PRNG key (keyword-only).
    - `dtype`: parameter dtype; `None` means JAX's default float.

    **Call:** a window `Z` of shape `(T, dim)`, any `T`; returns `(T, dim)` in `Z`'s dtype.

    ```python
    model = Transformer(4, n_heads=2, L=1, n_blocks=2, key=jax.random.PRNGKey(0))
    model(jnp.ones((3, 4))).shape   # (3, 4)
    ```

    References: A. Vaswani et al., *Attention is all you need*, NeurIPS 2017; the
    transformer integrator of B. Brantner's dissertation and GeometricMachineLearning.jl.
    """

    structure: ClassVar[str] = "none"
    #: What `positional_encoding=True` means for this family (measured; see the docs).
    default_placement: ClassVar[str] = "amplitude"

    lift: _Dense | None
    layers: tuple[eqx.Module, ...]
    project: _Dense | None
    encoder: PositionalEncoding | None
    position_gains: tuple[Float[Array, "rows m"], ...] | None
    dim: int = eqx.field(static=True)
    n_heads: int = eqx.field(static=True)
    L: int = eqx.field(static=True)
    n_blocks: int = eqx.field(static=True)
    transformer_dim: int = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)
    add_connection: bool = eqx.field(static=True)
    positional_encoding: bool | str = eqx.field(static=True)
    signal: AbstractPositionSignal = eqx.field(static=True)
    seq_length: None = eqx.field(static=True)

    def __init__(
        self,
        dim: int,
        *,
        n_heads: int = 1,
        L: int = 2,
        n_blocks: int = 1,
        transformer_dim: int | None = None,
        activation: Callable | str = jnp.tanh,
        add_connection: bool = True,
        positional_encoding: bool | str = False,
        key: PRNGKeyArray,
        dtype=None,
    ):
        self.dim = check_int("dim", dim, minimum=1)
        self.n_heads = check_int("n_heads", n_heads, minimum=1)
        self.L = check_int("L", L, minimum=1)
        self.n_blocks = check_int("n_blocks", n_blocks, minimum=0)
        D = self.dim if transformer_dim is None else transformer_dim
        self.transformer_dim = D = check_int("transformer_dim", D, minimum=1)
        if D % self.n_heads:
            raise ValueError(
                f"n_heads must divide transformer_dim: got transformer_dim={D}, "
                f"n_heads={self.n_heads} (remainder {D % self.n_heads}, expected 0)"
            )
        resolve_activation(activation)
        self.activation = activation
        self.add_connection = _check_bool("add_connection", add_connection)
        self.positional_encoding, self.signal = parse_positional_encoding(
            positional_encoding, self.default_placement, SHARED_PLACEMENTS)
        self.seq_length = None
        dtype = float_dtype(dtype)

        k_lift, k_project, *unit_keys = jax.random.split(key, 2 + self.L)
        if D != self.dim:
            self.lift = _Dense(self.dim, D, key=k_lift, dtype=dtype)
            self.project = _Dense(D, self.dim, key=k_project, dtype=dtype)
        else:
            self.lift = None
            self.project = None
        self.layers = _transformer_layers(
            D, self.n_heads, self.L, self.n_blocks, activation, self.add_connection,
            unit_keys, dtype,
        )
        self.encoder = self.signal.encoder(self.dim)
        # One gain for the input of the first attention layer (so attention sees the
        # positions too; every later layer is residual and carries it on), and with
        # `"bias-light"` or `"bias-every-layer"` one per residual layer besides.
        # `"amplitude"` scales the increment of every residual layer instead (one scalar
        # per row, no input gain).
        n_resnet = sum(isinstance(layer, ResNetLayer) for layer in self.layers)
        if self.signal.scales_increment():
            self.position_gains = self.signal.zero_gains((1,) * n_resnet, dtype)
        else:
            n_gains = 1 + (n_resnet if self.signal.layerwise() else 0)
            self.position_gains = self.signal.zero_gains((D,) * n_gains, dtype)

    def __call__(self, Z: Float[Array, "T dim"]) -> Float[Array, "T dim"]:
        check_model_window("Transformer", Z, self.dim)
        Z = self.signal.encode(self.encoder, Z)
        if self.lift is not None:
            Z = self.lift(Z)
        gains = () if self.position_gains is None else self.position_gains
        amplitude = self.signal.scales_increment()
        if gains and not amplitude:
            Z = Z + position_bias(gains[0], Z.shape[0]).astype(Z.dtype)
        k = 0 if amplitude else 1
        for layer in self.layers:  # a short fixed stack of different layers
            if k < len(gains) and isinstance(layer, ResNetLayer) and amplitude:
                Z = resnet_layer_with_bias(layer, Z, H=position_amplitude(gains[k], Z.shape[0]))
                k += 1
            elif k < len(gains) and isinstance(layer, ResNetLayer):
                Z = resnet_layer_with_bias(layer, Z, position_bias(gains[k], Z.shape[0]))
                k += 1
            else:
                Z = layer(Z)
        if self.project is not None:
            Z = self.project(Z)
        return self.signal.decode(self.encoder, Z)
