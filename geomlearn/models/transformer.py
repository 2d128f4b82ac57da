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
without changing its structure: a position signal chosen once, in the constructor
(`geomlearn.layers._position_signal`), whose resolved name the model stores.
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
    RowSlot,
    resnet_layer_with_bias,
    resolve_position_signal,
)
from ..layers._real_angles import check_times
from ..layers._row_steps import check_steps, with_row_steps
from ..layers.attention import MultiHeadAttention
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

    $$\mathcal{T} = \mathcal{D}_{\downarrow} \circ \big(\mathcal{R}^{\mathrm{lin}} \circ
      \mathcal{R}_{n_\text{blocks}} \circ \cdots \circ \mathcal{R}_1 \circ \mathrm{MHA}\big)^{L}
      \circ \mathcal{D}_{\uparrow}$$

    on a window $Z \in \mathbb{R}^{T \times d}$: $\mathcal{D}_{\uparrow\downarrow}$ affine
    maps of each row from `dim` to `transformer_dim` $= D$ and back (when $D \ne d$);
    [`MultiHeadAttention`][geomlearn.layers.MultiHeadAttention] with `n_heads` heads
    (scores scaled by $1/\sqrt{D/H}$; the input added when `add_connection`);
    $\mathcal{R}_i$ residual layers $x \leftarrow x + \sigma(W_i x + b_i)$ row by row,
    and a linear one $\mathcal{R}^{\mathrm{lin}}$ (the design of B. Brantner's
    dissertation and GeometricMachineLearning.jl, after Vaswani et al., NeurIPS 2017):
    $3D^2 + (n_\text{blocks} + 1)(D^2 + D)$ parameters per unit, $2dD + d + D$ for the
    lift ($108$ for `dim=4, n_heads=2, L=1, n_blocks=2`). Without a position signal
    the map is permutation-equivariant along time.

    **Position signal.** `True` is `"amplitude"`: every residual layer $i$ of row $t$
    becomes $x_t + h_{i,t}\,\sigma(W_i x_t + b_i)$ with $h_{i,t} = 1 + g_i^\top e_t$,
    $e_t = (\sin t, \cos t) - \text{mean}$ and $g_i \in \mathbb{R}^2$ initialised to
    zero: $2L(n_\text{blocks} + 1)$ parameters whatever $D$. `"bias"` adds $G_0 e_t$,
    $G_0 \in \mathbb{R}^{D \times 2}$, to the rows entering the first attention layer.

    **Arguments:**

    - `dim`: the state dimension $d \ge 1$; `transformer_dim`: $D$ (`None`: `dim`).
    - `n_heads` (dividing $D$; default 1), `L` (units; 2), `n_blocks` (nonlinear
      residual layers per unit; 1), `activation` (tanh), `add_connection` (`True`).
    - `positional_encoding`: `False`/`None` (default: none), `True` (`"amplitude"`), a
      name in the class's `placements` or a signal object; stored resolved.
    - `key`: a JAX PRNG key (keyword-only); `dtype`: parameter dtype (`None`: default).

    **Call:** `model(Z, times=None, steps=None)`: `(T, dim)` in `Z`'s dtype; `times` for
    the signal, `steps` `(T,)` scaling each row's residual increments.

    ```python
    model = Transformer(4, n_heads=2, L=1, n_blocks=2, key=jax.random.PRNGKey(0))
    model(jnp.ones((3, 4))).shape   # (3, 4)
    ```
    """

    structure: ClassVar[str] = "none"
    #: What `positional_encoding=True` resolves to for this family.
    default_placement: ClassVar[str] = "amplitude"
    #: The shorthands `positional_encoding` accepts for this family.
    placements: ClassVar[tuple[str, ...]] = SHARED_PLACEMENTS

    lift: _Dense | None
    layers: tuple[eqx.Module, ...]
    project: _Dense | None
    encoder: eqx.Module | None  # the signal's encoder: a table, rotary frequencies or None
    position_gains: tuple[Float[Array, "rows m"], ...] | None
    dim: int = eqx.field(static=True)
    n_heads: int = eqx.field(static=True)
    L: int = eqx.field(static=True)
    n_blocks: int = eqx.field(static=True)
    transformer_dim: int = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)
    add_connection: bool = eqx.field(static=True)
    positional_encoding: str | None = eqx.field(static=True)
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
        positional_encoding: bool | str | AbstractPositionSignal | None = False,
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
        self.signal = resolve_position_signal(
            positional_encoding, self.default_placement, self.placements)
        self.positional_encoding = self.signal.name
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
        self.position_gains = self.signal.init(self._slots(), dtype)

    def _slots(self) -> tuple[RowSlot, ...]:
        """The row-wise places of a position signal, all of one unit: the rows entering
        the first attention layer (a bias only; every later layer is residual and
        carries it on), then every residual layer."""
        D = self.transformer_dim
        n_resnet = sum(isinstance(layer, ResNetLayer) for layer in self.layers)
        return (RowSlot(unit=0, width=D, steps=False),) + (RowSlot(unit=0, width=D),) * n_resnet

    def __call__(
        self, Z: Float[Array, "T dim"], times: Float[Array, " T"] | None = None,
        steps: Float[Array, " T"] | None = None,
    ) -> Float[Array, "T dim"]:
        check_model_window("Transformer", Z, self.dim)
        if times is not None:
            check_times(times, Z.shape[0], "Transformer")
        slots = self._slots()
        terms = self.signal.row_terms(self.position_gains, slots, Z.shape[0], times)
        if steps is not None:  # every residual increment on a row scaled by its step
            terms = with_row_steps(terms, slots, check_steps(steps, Z.shape[0], "Transformer"))
        Z = self.signal.encode(self.encoder, Z, times)
        if self.lift is not None:
            Z = self.lift(Z)
        entry, *terms = terms
        if entry.bias is not None:
            Z = Z + entry.bias.astype(Z.dtype)
        terms = iter(terms)
        for layer in self.layers:  # a short fixed stack of different layers
            if isinstance(layer, ResNetLayer):
                t = next(terms)
                Z = layer(Z) if t.empty() else resnet_layer_with_bias(layer, Z, t.bias, t.step)
            else:
                Z = layer(Z)
        if self.project is not None:
            Z = self.project(Z)
        return self.signal.decode(self.encoder, Z, times)
