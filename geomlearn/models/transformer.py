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

"Symplectic" is meant in the product-space sense: the Jacobian on the flattened window
preserves $\Omega = I_T \otimes \mathbb{J}$ (see `geomlearn.geometry`), for every
parameter value. `positional_encoding` lets every model see the order of the rows
without changing its structure: `True` (the default design, `"bias"`) adds a learned,
zero-initialised, position-dependent bias $G e_t$ to the pre-activation of every
gradient / residual layer of row $t$ (a potential stays a potential), so at
initialisation the model equals the one without encoding; `"input"` adds the
[`PositionalEncoding`][geomlearn.PositionalEncoding] table in front, `"scaled"` a table
of amplitude 0.1 with frequencies $2^{-j}$, and `"conjugate"` maps $Z \mapsto F(Z + P) - P$.
The benchmark `benchmarks/positional_encoding.py` measures them.
"""

from __future__ import annotations

import math
from typing import Callable, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._activations import resolve_activation
from .._typing import Array, Float, PRNGKeyArray
from .._validation import check_even, check_floating, check_int, float_dtype
from .._validation import check_bool as _check_bool
from ..layers.attention import (
    LinearSymplecticAttentionP,
    LinearSymplecticAttentionQ,
    MultiHeadAttention,
    SymplecticAttentionP,
    SymplecticAttentionQ,
)
from ..layers.positional import PositionalEncoding
from ..layers.positional import positional_encoding as _position_table
from ..layers.resnet import ResNetLayer
from ..layers.sympnet import GradientLayerP, GradientLayerQ
from ._base import AbstractTransformerIntegrator

__all__ = ["Transformer", "LinearSymplecticTransformer", "SymplecticTransformer"]


def _check_model_window(name: str, Z, dim: int) -> None:
    check_floating(f"{name} input", Z)
    shape = jnp.shape(Z)
    if len(shape) != 2 or shape[-1] != dim:
        raise ValueError(
            f"{name} expects one window of shape (T, {dim}) (use jax.vmap for a batch), "
            f"got shape {shape}"
        )


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


def _apply_rowwise(layer, Z):
    """Apply a single-point layer `(dim,) -> (dim,)` to every row of a window."""
    return jax.vmap(layer)(Z)


# --------------------------------------------------------------------------------------
# Positional encoding: where the position signal enters (shared with the
# volume-preserving transformer). See docs/concepts/positional_encoding.md and
# benchmarks/positional_encoding.py for the measurements behind the default.

#: The placements `positional_encoding` may name; `True` means `DEFAULT_PLACEMENT`.
PLACEMENTS = ("input", "scaled", "conjugate", "bias")
#: What `positional_encoding=True` means (the placement that won the benchmark).
DEFAULT_PLACEMENT = "bias"
#: The static amplitude of the `"scaled"` placement's table.
SCALED_AMPLITUDE = 0.1
#: The number of position features $e_t \in \mathbb{R}^m$ of the `"bias"` placement.
N_POSITION_FEATURES = 8


def _short_base(m: int) -> float:
    r"""The base for which the $m$ columns of the sinusoidal table have the frequencies
    $\omega_j = 2^{-j}$ ($j = 0, 1, \dots$): wavelengths $2\pi, 4\pi, 8\pi, \dots$ rows,
    matched to windows of a few rows (with base $10^4$ a window of 3–8 rows sees almost
    one frequency)."""
    return float(2.0 ** (m / 2.0))


def check_positional_encoding(value) -> bool | str:
    """`positional_encoding` validated: a bool or a name in `PLACEMENTS`."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, str):
        if value not in PLACEMENTS:
            raise ValueError(
                f"positional_encoding must be a bool or one of {PLACEMENTS}, got {value!r}"
            )
        return value
    raise TypeError(
        f"positional_encoding must be a bool or one of {PLACEMENTS}, got {value!r} "
        f"({type(value).__name__})"
    )


def pe_placement(positional_encoding: bool | str) -> str | None:
    """The placement named by a validated `positional_encoding` (`None`: no encoding)."""
    if positional_encoding is True:
        return DEFAULT_PLACEMENT
    if positional_encoding is False:
        return None
    return positional_encoding


def pe_encoder(placement: str | None, dim: int) -> PositionalEncoding | None:
    """The parameterless table of the placements that translate the window."""
    if placement in ("input", "conjugate"):
        return PositionalEncoding(dim)
    if placement == "scaled":
        return PositionalEncoding(dim, base=_short_base(dim))
    return None


def pe_encode(placement: str | None, encoder, Z):
    r"""The translation in front of the map: $Z + P$ (`"input"`, `"conjugate"`) or
    $Z + s P_{\text{short}}$ (`"scaled"`); the identity for the other placements."""
    if placement in ("input", "conjugate"):
        return encoder(Z)
    if placement == "scaled":
        return Z + jnp.asarray(SCALED_AMPLITUDE, Z.dtype) * encoder(jnp.zeros_like(Z))
    return Z


def pe_decode(placement: str | None, encoder, Y):
    r"""The translation behind the map: $Y - P$ for `"conjugate"` (the same table, rounded
    once to `Y`'s dtype), so the output carries no offset; the identity otherwise."""
    if placement == "conjugate":
        return Y - _position_table(Y.shape[0], encoder.dim, dtype=Y.dtype)
    return Y


def _position_features(T: int, dtype, m: int = N_POSITION_FEATURES):
    r"""The features $e_t \in \mathbb{R}^m$ of the rows $t = 0, \dots, T-1$, shape
    `(T, m)`: the sinusoidal table with frequencies $2^{-j}$, **centred over the window**
    (its mean row subtracted). The constant part of a bias is the layer's own $b$;
    centring keeps the gains from duplicating it, which made Levenberg–Marquardt converge
    markedly slower per iteration (README rigid-body example: final loss 3.0e-3
    uncentred, 1.8e-3 centred, same time budget)."""
    E = _position_table(T, m, dtype=dtype, base=_short_base(m))
    return E - jnp.mean(E, axis=0, keepdims=True)


def pe_zero_gain(rows: int, dtype, m: int = N_POSITION_FEATURES):
    """A zero-initialised position gain `(rows, m)` ($m$ position features)."""
    return jnp.zeros((rows, m), dtype)


def pe_position_bias(gain, T: int):
    r"""The per-row bias $c_t = G e_t$, shape `(T, rows)`, in the gain's dtype (the number
    of features $m$ is the gain's second dimension)."""
    E = _position_features(T, gain.dtype, gain.shape[-1])
    return E @ gain.T


def _gradient_layer_with_bias(layer, z, c):
    r"""A gradient layer with its bias $b$ replaced by $b + c$ for one point `z`.

    The increment is still the gradient of $\sum_i a_i \Sigma\big((Kx + b + c)_i\big)$, a
    potential of the unchanged half $x$, so the layer stays a symplectic shear."""
    return eqx.tree_at(lambda l: l.b, layer, layer.b + c)(z)


def _resnet_layer_with_bias(layer, Z, C):
    r"""A residual layer $x_t \mapsto x_t + \sigma(W x_t + b + c_t)$ on every row $t$."""
    dtype = Z.dtype
    sigma = resolve_activation(layer.activation)
    pre = Z @ layer.weight.astype(dtype).T
    if layer.bias is not None:
        pre = pre + layer.bias.astype(dtype)[None, :]
    return Z + sigma(pre + C.astype(dtype))



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

    **Arguments:**

    - `dim`: the state dimension $d$ (any `dim ≥ 1`).
    - `n_heads`: attention heads; must divide `transformer_dim` (default 1).
    - `L`: the number of units `[attention, residual layers]` (default 2).
    - `n_blocks`: nonlinear residual layers per unit (default 1).
    - `transformer_dim`: the internal feature dimension; `None` means `dim` (no lift).
    - `activation`: the residual layers' activation, a callable or a name (default tanh).
    - `add_connection`: add the input to each attention output (default `True`).
    - `positional_encoding`: how the model sees the order of the rows: `False` (default,
      not at all), `True` (the measured default, `"bias"`), or a placement by name —
      `"bias"` (a position-dependent bias $G e_t$ in the pre-activation of every residual layer,
      with learned gains $G$ initialised to zero, so the model starts equal to the one
      without encoding), `"input"` (the table added in front, $Z + P$), `"scaled"`
      ($Z + 0.1\,P_{\text{short}}$ with frequencies $2^{-j}$) or `"conjugate"`
      ($F(Z + P) - P$). Every placement keeps the structure exactly.
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
        self.transformer_dim = (
            self.dim
            if transformer_dim is None
            else check_int("transformer_dim", transformer_dim, minimum=1)
        )
        D = self.transformer_dim
        if D % self.n_heads:
            raise ValueError(
                f"n_heads must divide transformer_dim: got transformer_dim={D}, "
                f"n_heads={self.n_heads} (remainder {D % self.n_heads}, expected 0)"
            )
        resolve_activation(activation)
        self.activation = activation
        self.add_connection = _check_bool("add_connection", add_connection)
        self.positional_encoding = check_positional_encoding(positional_encoding)
        self.seq_length = None
        dtype = float_dtype(dtype)

        k_lift, k_project, *unit_keys = jax.random.split(key, 2 + self.L)
        if D != self.dim:
            self.lift = _Dense(self.dim, D, key=k_lift, dtype=dtype)
            self.project = _Dense(D, self.dim, key=k_project, dtype=dtype)
        else:
            self.lift = None
            self.project = None
        layers = []
        for k in unit_keys:
            k_att, *k_res = jax.random.split(k, 2 + self.n_blocks)
            layers.append(
                MultiHeadAttention(
                    D, self.n_heads, add_connection=self.add_connection, key=k_att, dtype=dtype
                )
            )
            for kr in k_res[:-1]:
                layers.append(ResNetLayer(D, activation, key=kr, dtype=dtype))
            layers.append(ResNetLayer(D, "identity", key=k_res[-1], dtype=dtype))
        self.layers = tuple(layers)
        placement = pe_placement(self.positional_encoding)
        self.encoder = pe_encoder(placement, self.dim)
        # One gain for the input of the first attention layer (so attention sees the
        # positions too), then one per residual layer.
        self.position_gains = (
            (pe_zero_gain(D, dtype),)
            + tuple(pe_zero_gain(D, dtype) for layer in layers if isinstance(layer, ResNetLayer))
            if placement == "bias"
            else None
        )

    def __call__(self, Z: Float[Array, "T dim"]) -> Float[Array, "T dim"]:
        _check_model_window("Transformer", Z, self.dim)
        placement = pe_placement(self.positional_encoding)
        Z = pe_encode(placement, self.encoder, Z)
        if self.lift is not None:
            Z = self.lift(Z)
        k = 0
        if self.position_gains is not None:
            Z = Z + pe_position_bias(self.position_gains[0], Z.shape[0]).astype(Z.dtype)
            k = 1
        for layer in self.layers:  # a short fixed stack of different layers
            if self.position_gains is not None and isinstance(layer, ResNetLayer):
                C = pe_position_bias(self.position_gains[k], Z.shape[0])
                Z = _resnet_layer_with_bias(layer, Z, C)
                k += 1
            else:
                Z = layer(Z)
        if self.project is not None:
            Z = self.project(Z)
        return pe_decode(placement, self.encoder, Z)


# --------------------------------------------------------------------------------------


def _gradient_block(dim, width, activation, n_sympnet, init_upper, keys, dtype):
    """`n_sympnet` gradient layers alternating Q/P, starting with Q when `init_upper`."""
    layers = []
    for i, k in enumerate(keys[:n_sympnet]):
        is_q = (i % 2 == 0) == init_upper
        cls = GradientLayerQ if is_q else GradientLayerP
        layers.append(cls(dim, width, activation, key=k, dtype=dtype))
    return layers


def _symplectic_units(attention_q, attention_p, dim, width, activation, n_sympnet, L,
                      init_upper, key, dtype):
    """`L` units `[attention Q, n_sympnet gradient layers, attention P, n_sympnet ...]`."""
    layers = []
    for k in jax.random.split(key, L):
        k_aq, k_ap, *k_grad = jax.random.split(k, 2 + 2 * n_sympnet)
        layers.append(attention_q(k_aq))
        layers.extend(
            _gradient_block(dim, width, activation, n_sympnet, init_upper, k_grad[:n_sympnet],
                            dtype)
        )
        layers.append(attention_p(k_ap))
        layers.extend(
            _gradient_block(dim, width, activation, n_sympnet, init_upper, k_grad[n_sympnet:],
                            dtype)
        )
    return tuple(layers)


def _apply_symplectic_stack(layers, Z, gains=None):
    """The stack on a window; with `gains` (one per gradient layer, in order), each
    gradient layer gets the position bias $c_t = G e_t$ of row $t$ in its pre-activation."""
    k = 0
    for layer in layers:  # a short fixed stack of different layers
        if isinstance(layer, (GradientLayerQ, GradientLayerP)):
            if gains is None:
                Z = _apply_rowwise(layer, Z)  # one point at a time, vmapped over the rows
            else:
                C = pe_position_bias(gains[k], Z.shape[0])
                Z = jax.vmap(lambda z, c, layer=layer: _gradient_layer_with_bias(layer, z, c))(
                    Z, C
                )
                k += 1
        else:
            Z = layer(Z)  # attention: acts on the whole window
    return Z


def _symplectic_gains(layers, placement, dtype):
    """Zero gains `(width, m)`, one per gradient layer, for the `"bias"` placement."""
    if placement != "bias":
        return None
    return tuple(
        pe_zero_gain(layer.width, dtype)
        for layer in layers
        if isinstance(layer, (GradientLayerQ, GradientLayerP))
    )


class LinearSymplecticTransformer(AbstractTransformerIntegrator):
    r"""A symplectic transformer with *linear* symplectic attention (fixed window length).

    $L$ units, each

    $$\big(\mathcal{G}_{n_s} \circ \cdots \circ \mathcal{G}_1\big) \circ \mathcal{A}_P
      \circ \big(\mathcal{G}_{n_s} \circ \cdots \circ \mathcal{G}_1\big) \circ
      \mathcal{A}_Q \qquad (\text{rightmost first}),$$

    where $\mathcal{A}_Q: Q \leftarrow Q + A P$ and $\mathcal{A}_P: P \leftarrow P + A' Q$
    are [`LinearSymplecticAttentionQ`][geomlearn.layers.LinearSymplecticAttentionQ] /
    [`…P`][geomlearn.layers.LinearSymplecticAttentionP] with learned symmetric $T \times T$
    matrices (they mix the time steps), and $\mathcal{G}_i$ are `n_sympnet` SympNet
    gradient layers ([`GradientLayerQ`][geomlearn.layers.GradientLayerQ] /
    [`GradientLayerP`][geomlearn.layers.GradientLayerP], alternating, starting with a Q-layer when
    `init_upper`) applied to every row of the window. Every factor is a symplectic shear
    of the product space, so the model is **exactly symplectic on windows** (Jacobian
    preserving $I_T \otimes \mathbb{J}$) for every parameter value.

    The attention matrices are indexed by position, so the model knows the order of the
    states in the window (it is not permutation-equivariant, even without positional
    encoding) and accepts only windows of length `seq_length`.

    **Parameters** (`dim = 2n`, `width = w`, `seq_length = T`): per unit
    $2 \cdot T(T+1)/2 + 2 n_s\, w (n + 2)$. For `dim=4, seq_length=4, n_sympnet=2,
    width=4, L=1`: $20 + 64 = 84$.

    **Arguments:**

    - `dim`: the phase-space dimension $2n$ (even).
    - `seq_length`: the window length $T \ge 1$.
    - `n_sympnet`: gradient layers after each attention layer (default 2).
    - `width`: hidden width of the gradient layers; `None` means `dim`.
    - `L`: the number of units (default 1).
    - `activation`: the gradient layers' activation, a callable or a name (any works;
      default tanh).
    - `init_upper`: whether each group of gradient layers starts with a Q-layer
      (default `True`).
    - `positional_encoding`: how the model sees the order of the rows: `False` (default,
      not at all), `True` (the measured default, `"bias"`), or a placement by name —
      `"bias"` (a position-dependent bias $G e_t$ in the pre-activation of every gradient layer,
      with learned gains $G$ initialised to zero, so the model starts equal to the one
      without encoding), `"input"` (the table added in front, $Z + P$), `"scaled"`
      ($Z + 0.1\,P_{\text{short}}$ with frequencies $2^{-j}$) or `"conjugate"`
      ($F(Z + P) - P$). Every placement keeps the structure exactly.
    - `key`: a JAX PRNG key (keyword-only).
    - `dtype`: parameter dtype; `None` means JAX's default float.

    **Call:** a window `Z` of shape `(seq_length, dim)`; returns the same shape in `Z`'s
    dtype. A window of another length raises `ValueError` naming both lengths.

    ```python
    model = LinearSymplecticTransformer(4, 4, key=jax.random.PRNGKey(0))
    model(jnp.ones((4, 4))).shape   # (4, 4)
    ```

    References: the linear symplectic transformer of B. Brantner's dissertation and
    GeometricMachineLearning.jl; gradient layers from Jin et al., *SympNets*, Neural
    Networks 132 (2020).
    """

    structure: ClassVar[str] = "symplectic"

    layers: tuple[eqx.Module, ...]
    encoder: PositionalEncoding | None
    position_gains: tuple[Float[Array, "rows m"], ...] | None
    dim: int = eqx.field(static=True)
    seq_length: int = eqx.field(static=True)
    n_sympnet: int = eqx.field(static=True)
    width: int = eqx.field(static=True)
    L: int = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)
    init_upper: bool = eqx.field(static=True)
    positional_encoding: bool | str = eqx.field(static=True)

    def __init__(
        self,
        dim: int,
        seq_length: int,
        *,
        n_sympnet: int = 2,
        width: int | None = None,
        L: int = 1,
        activation: Callable | str = jnp.tanh,
        init_upper: bool = True,
        positional_encoding: bool | str = False,
        key: PRNGKeyArray,
        dtype=None,
    ):
        self.dim = check_even("dim", dim)
        self.seq_length = check_int("seq_length", seq_length, minimum=1)
        self.n_sympnet = check_int("n_sympnet", n_sympnet, minimum=0)
        self.width = self.dim if width is None else check_int("width", width, minimum=1)
        self.L = check_int("L", L, minimum=1)
        resolve_activation(activation)
        self.activation = activation
        self.init_upper = _check_bool("init_upper", init_upper)
        self.positional_encoding = check_positional_encoding(positional_encoding)
        dtype = float_dtype(dtype)
        T = self.seq_length
        self.layers = _symplectic_units(
            lambda k: LinearSymplecticAttentionQ(self.dim, T, key=k, dtype=dtype),
            lambda k: LinearSymplecticAttentionP(self.dim, T, key=k, dtype=dtype),
            self.dim, self.width, activation, self.n_sympnet, self.L, self.init_upper,
            key, dtype,
        )
        placement = pe_placement(self.positional_encoding)
        self.encoder = pe_encoder(placement, self.dim)
        self.position_gains = _symplectic_gains(self.layers, placement, dtype)

    def __call__(self, Z: Float[Array, "T dim"]) -> Float[Array, "T dim"]:
        _check_model_window("LinearSymplecticTransformer", Z, self.dim)
        if Z.shape[0] != self.seq_length:
            raise ValueError(
                f"LinearSymplecticTransformer was built for windows of length "
                f"seq_length={self.seq_length}, got a window of length {Z.shape[0]} "
                f"(shape {Z.shape})"
            )
        placement = pe_placement(self.positional_encoding)
        Z = pe_encode(placement, self.encoder, Z)
        Z = _apply_symplectic_stack(self.layers, Z, self.position_gains)
        return pe_decode(placement, self.encoder, Z)


class SymplecticTransformer(AbstractTransformerIntegrator):
    r"""A symplectic transformer with nonlinear (matrix-softmax) symplectic attention.

    $L$ units, each

    $$\big(\mathcal{G}_{n_s} \circ \cdots \circ \mathcal{G}_1\big) \circ \mathcal{S}_P
      \circ \big(\mathcal{G}_{n_s} \circ \cdots \circ \mathcal{G}_1\big) \circ
      \mathcal{S}_Q \qquad (\text{rightmost first}),$$

    where $\mathcal{S}_Q: Q \leftarrow Q + \nabla_P F(P)$ and
    $\mathcal{S}_P: P \leftarrow P + \nabla_Q F'(Q)$ are
    [`SymplecticAttentionQ`][geomlearn.layers.SymplecticAttentionQ] /
    [`…P`][geomlearn.layers.SymplecticAttentionP] (gradients of the potential
    $F(X) = \tfrac{T}{2}\log\sum_{s,t}\exp\big((XAX^\top)_{st}\big)$ with a symmetric
    $n \times n$ matrix $A$), and $\mathcal{G}_i$ are `n_sympnet` SympNet gradient layers
    ([`GradientLayerQ`][geomlearn.layers.GradientLayerQ] /
    [`GradientLayerP`][geomlearn.layers.GradientLayerP], alternating, starting with a Q-layer when
    `init_upper`) applied to every row. Every factor is a symplectic shear of the product
    space, so the model is **exactly symplectic on windows** for every parameter value
    and every window length $T$.

    Without positional encoding the model is permutation-equivariant along time
    (reordering the input rows reorders the output rows the same way); with
    `positional_encoding=True` it can learn to use the order (its position gains start
    at zero, so at initialisation it is still equivariant). On a problem where the order
    matters (a driven pendulum with period-aligned windows) the encoding improved its
    validation error about 8× at equal budget (`benchmarks/positional_encoding.py`).
    The position gains add $8w$ parameters per gradient layer.

    **Parameters** (`dim = 2n`, `width = w`): per unit $2 \cdot n(n+1)/2 + 2 n_s\,
    w(n + 2)$. For `dim=4, n_sympnet=2, width=4, L=4`: $4 \cdot (6 + 64) = 280$.

    **Arguments:**

    - `dim`: the phase-space dimension $2n$ (even).
    - `n_sympnet`: gradient layers after each attention layer (default 2).
    - `width`: hidden width of the gradient layers; `None` means `dim`.
    - `L`: the number of units (default 1).
    - `activation`: the gradient layers' activation, a callable or a name (default tanh).
    - `init_upper`: whether each group of gradient layers starts with a Q-layer
      (default `True`).
    - `positional_encoding`: how the model sees the order of the rows: `False` (default,
      not at all), `True` (the measured default, `"bias"`), or a placement by name —
      `"bias"` (a position-dependent bias $G e_t$ in the pre-activation of every gradient layer,
      with learned gains $G$ initialised to zero, so the model starts equal to the one
      without encoding), `"input"` (the table added in front, $Z + P$), `"scaled"`
      ($Z + 0.1\,P_{\text{short}}$ with frequencies $2^{-j}$) or `"conjugate"`
      ($F(Z + P) - P$). Every placement keeps the structure exactly.
    - `key`: a JAX PRNG key (keyword-only).
    - `dtype`: parameter dtype; `None` means JAX's default float.

    **Call:** a window `Z` of shape `(T, dim)`, any `T ≥ 1`; returns the same shape in
    `Z`'s dtype.

    ```python
    model = SymplecticTransformer(4, L=2, key=jax.random.PRNGKey(0))
    model(jnp.ones((7, 4))).shape   # (7, 4)
    ```

    References: the symplectic transformer of B. Brantner's dissertation and
    GeometricMachineLearning.jl; gradient layers from Jin et al., *SympNets*, Neural
    Networks 132 (2020).
    """

    structure: ClassVar[str] = "symplectic"

    layers: tuple[eqx.Module, ...]
    encoder: PositionalEncoding | None
    position_gains: tuple[Float[Array, "rows m"], ...] | None
    dim: int = eqx.field(static=True)
    n_sympnet: int = eqx.field(static=True)
    width: int = eqx.field(static=True)
    L: int = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)
    init_upper: bool = eqx.field(static=True)
    positional_encoding: bool | str = eqx.field(static=True)
    seq_length: None = eqx.field(static=True)

    def __init__(
        self,
        dim: int,
        *,
        n_sympnet: int = 2,
        width: int | None = None,
        L: int = 1,
        activation: Callable | str = jnp.tanh,
        init_upper: bool = True,
        positional_encoding: bool | str = False,
        key: PRNGKeyArray,
        dtype=None,
    ):
        self.dim = check_even("dim", dim)
        self.n_sympnet = check_int("n_sympnet", n_sympnet, minimum=0)
        self.width = self.dim if width is None else check_int("width", width, minimum=1)
        self.L = check_int("L", L, minimum=1)
        resolve_activation(activation)
        self.activation = activation
        self.init_upper = _check_bool("init_upper", init_upper)
        self.positional_encoding = check_positional_encoding(positional_encoding)
        self.seq_length = None
        dtype = float_dtype(dtype)
        self.layers = _symplectic_units(
            lambda k: SymplecticAttentionQ(self.dim, key=k, dtype=dtype),
            lambda k: SymplecticAttentionP(self.dim, key=k, dtype=dtype),
            self.dim, self.width, activation, self.n_sympnet, self.L, self.init_upper,
            key, dtype,
        )
        placement = pe_placement(self.positional_encoding)
        self.encoder = pe_encoder(placement, self.dim)
        self.position_gains = _symplectic_gains(self.layers, placement, dtype)

    def __call__(self, Z: Float[Array, "T dim"]) -> Float[Array, "T dim"]:
        _check_model_window("SymplecticTransformer", Z, self.dim)
        placement = pe_placement(self.positional_encoding)
        Z = pe_encode(placement, self.encoder, Z)
        Z = _apply_symplectic_stack(self.layers, Z, self.position_gains)
        return pe_decode(placement, self.encoder, Z)
