r"""Symplectic transformer integrators: window → window maps that are exactly symplectic.

[`LinearSymplecticTransformer`][geomlearn.models.LinearSymplecticTransformer] (linear
symplectic attention, fixed `seq_length`) and
[`SymplecticTransformer`][geomlearn.models.SymplecticTransformer] (matrix-softmax
symplectic attention, any window length) share
[`AbstractSymplecticTransformer`][geomlearn.models.AbstractSymplecticTransformer]: the
same units of attention shears and row-wise gradient layers, the same position signal;
only the attention layers differ. "Symplectic" is meant in the product-space sense: the
Jacobian on the flattened window preserves $\Omega = I_T \otimes \mathbb{J}$ (see
`geomlearn.geometry`), for every parameter value. Both are re-exported by
`geomlearn.models.transformer`.

`positional_encoding` places a position signal that keeps the structure exactly: `True`
(= `"amplitude"`, for both) scales the increment of every gradient layer $l$ on row $t$ by a
zero-initialised step $h_t = 1 + g_l^\top e_t$ (two parameters per layer; a potential
times a number is a potential); `"bias-light"` shifts the argument of every gradient
layer by $G_l e_t$ (`True` of layout-2 files); `"bias"` such a shift in the first gradient
layer of each unit only; `"bias-every-layer"` a bias $G e_t$ with eight features in the
pre-activation of every gradient layer (the first bias design); `"input"` the map
$F(Z + P)$ with the sinusoidal table $P$; `"scaled"` $F(Z + 0.1\,P_{\text{short}})$
with frequencies $2^{-j}$; `"conjugate"` $F(Z + P) - P$.
"""

from __future__ import annotations

import abc
from typing import Callable, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from .._activations import resolve_activation
from .._typing import Array, Float, PRNGKeyArray
from .._validation import check_even, check_int, float_dtype
from .._validation import check_bool as _check_bool
from ..layers._position_signal import (
    SHARED_PLACEMENTS,
    AbstractPositionSignal,
    gradient_layer_with_bias,
    parse_positional_encoding,
    position_amplitude,
    position_bias,
)
from ..layers.attention import (
    LinearSymplecticAttentionP,
    LinearSymplecticAttentionQ,
    SymplecticAttentionP,
    SymplecticAttentionQ,
)
from ..layers.positional import PositionalEncoding
from ..layers.sympnet import GradientLayerP, GradientLayerQ
from ._integrators import AbstractTransformerIntegrator
from ._window import check_model_window

__all__ = [
    "AbstractSymplecticTransformer",
    "LinearSymplecticTransformer",
    "SymplecticTransformer",
]


def _gradient_block(dim, width, activation, n_sympnet, init_upper, keys, dtype):
    """`n_sympnet` gradient layers alternating Q/P, starting with Q when `init_upper`."""
    layers = []
    for i, k in enumerate(keys[:n_sympnet]):
        is_q = (i % 2 == 0) == init_upper
        cls = GradientLayerQ if is_q else GradientLayerP
        layers.append(cls(dim, width, activation, key=k, dtype=dtype))
    return layers


def _is_gradient_layer(layer) -> bool:
    return isinstance(layer, (GradientLayerQ, GradientLayerP))


def _biased_gradient_layers(signal, L: int, n_sympnet: int) -> tuple[int, ...]:
    """The indices (counting gradient layers only) of the gradient layers that take a
    position bias: of the `2 n_sympnet` gradient layers of each of the `L` units, those
    `signal.select` names (a placement without gains: none)."""
    per_unit = 2 * n_sympnet
    return tuple(
        i for u in range(L) for i in signal.select(range(u * per_unit, (u + 1) * per_unit))
    )


def _layer_bias(layer, gain, T: int, through_argument: bool):
    r"""The bias `(T, width)` of a gradient layer on the rows of a window: $G e_t$, or
    $K G e_t$ (`through_argument`: a shift $G e_t \in \mathbb{R}^n$ of the layer's
    argument, $\sigma(K(x + G e_t) + b)$)."""
    C = position_bias(gain, T)
    return C @ layer.K.astype(C.dtype).T if through_argument else C


def _apply_symplectic_stack(layers, Z, gains=(), biased=(), through_argument=False,
                            amplitude=False):
    r"""The stack on a window; the gradient layers numbered in `biased` (counting
    gradient layers only) get the position signal of row $t$ from the gains in `gains`
    (one per such layer, in order): a bias in their pre-activation (see `_layer_bias`),
    or with `amplitude` the step $h_t = 1 + g^\top e_t$ scaling their increment."""
    gain_of = dict(zip(biased, gains or ()))
    k = 0
    for layer in layers:  # a short fixed stack of different layers
        if not _is_gradient_layer(layer):
            Z = layer(Z)  # attention: acts on the whole window
            continue
        if k in gain_of and amplitude:
            # A gradient layer's second argument is its step: it scales the increment.
            Z = jax.vmap(layer)(Z, position_amplitude(gain_of[k], Z.shape[0]).astype(Z.dtype))
        elif k in gain_of:
            C = _layer_bias(layer, gain_of[k], Z.shape[0], through_argument)
            Z = jax.vmap(lambda z, c, layer=layer: gradient_layer_with_bias(layer, z, c))(Z, C)
        else:
            Z = jax.vmap(layer)(Z)  # one point at a time, vmapped over the rows
        k += 1
    return Z


class AbstractSymplecticTransformer(AbstractTransformerIntegrator):
    r"""The symplectic transformers: $L$ units, each

    $$\big(\mathcal{G}_{n_s} \circ \cdots \circ \mathcal{G}_1\big) \circ \mathcal{A}_P
      \circ \big(\mathcal{G}_{n_s} \circ \cdots \circ \mathcal{G}_1\big) \circ
      \mathcal{A}_Q \qquad (\text{rightmost first}),$$

    with symplectic attention shears $\mathcal{A}_Q: Q \leftarrow Q + \nabla_P F(P)$,
    $\mathcal{A}_P: P \leftarrow P + \nabla_Q F'(Q)$ (what differs between the final
    classes, `attention_q` and `attention_p`) and `n_sympnet` SympNet gradient layers
    $\mathcal{G}_i$ ([`GradientLayerQ`][geomlearn.layers.GradientLayerQ] /
    [`GradientLayerP`][geomlearn.layers.GradientLayerP], alternating, starting with a
    Q-layer when `init_upper`) applied to every row. Every factor is a symplectic shear
    of the product space, so the model is exactly symplectic on windows for every
    parameter value.

    **Position amplitude** (`positional_encoding=True`, `"amplitude"`): every gradient
    layer $l$ takes the step $h_t = 1 + g_l^\top e_t$ on row $t$,
    $$q_t \leftarrow q_t + h_t\,K^\top\big(a \odot \sigma(K p_t + b)\big),$$
    with the two centred features $e_t = (\sin t, \cos t) - \text{mean}$ and a gain
    $g_l \in \mathbb{R}^2$ per gradient layer, initialised to zero ($h_t = 1$: the model
    without encoding). The increment is the gradient of the potential
    $h_t \sum_i a_i \Sigma\big((K p + b)_i\big)$ of row $t$: still a symplectic shear,
    for every parameter value. It adds $2 \cdot 2n_s L$ parameters, independent of the
    dimension and the width. A forcing that modulates the strength of a potential, as the
    driven pendulum's $(1 + \varepsilon\cos\Omega t)(1 - \cos q)$, is of this form.

    **Position bias** (`"bias-light"`, `True` in files of layout 2, which load as it):
    every gradient layer $l$ sees its argument (the unchanged half, $p$ for a Q-layer)
    shifted by $s_t = G_l e_t$ on row $t$,
    $$q_t \leftarrow q_t + K^\top\big(a \odot \sigma(K(p_t + G_l e_t) + b)\big),$$
    with a gain $G_l \in \mathbb{R}^{n \times 2}$ per gradient layer, initialised to
    zero: the gradient of the potential $\sum_i a_i\Sigma\big((K(p + s_t) + b)_i\big)$,
    again a symplectic shear. It adds $2n \cdot 2n_s L$ parameters, independent of the
    width. `"bias"` shifts only the first gradient layer of each unit ($2nL$; the later
    layers then see the position only through the row's state, which was measured to
    recover little of the order dependence); `"bias-every-layer"` (the first bias design)
    adds a bias $G e_t$ with eight features to every gradient layer: $8 w \cdot 2 n_s L$
    parameters.

    **Under Levenberg–Marquardt** an iteration costs $\propto P^2$ (the $P \times P$
    Gauss–Newton matrix of the $P$ parameters), so $\Delta P$ added parameters make
    each iteration up to $(1 + \Delta P/P)^2$ times dearer and fewer iterations fit in a
    time budget: at `dim=4, width=12, L=2` (the command line's size since 2026-12-03),
    `True` takes $396 \to 412$ ($1.08\times$), `"bias-light"` $396 \to 428$
    ($1.17\times$); at the command line's earlier `dim=4, n_sympnet=2, width=4, L=1`,
    `True` (`"amplitude"`) takes $70 \to 78$ parameters ($1.24\times$ per iteration at
    most), `"bias-light"` $70 \to 86$ ($1.51\times$), `"bias"` $70 \to 74$
    ($1.12\times$), the first bias design $70 \to 198$ ($8\times$).
    Trained with its gains from the first iteration, such a small model often stops above
    the loss of the model without encoding; `geomlearn.training.fit_position_last` (the
    model without its position signal for half the budget, then with it — what `geomlearn
    train` does for both symplectic transformers) made no seed of ten worse and gained
    2.3× (1.7× for the linear symplectic one) on the driven pendulum
    (docs/concepts/positional_encoding.md).
    """

    structure: ClassVar[str] = "symplectic"
    #: What `positional_encoding=True` means for this family (measured; see the docs).
    default_placement: ClassVar[str] = "amplitude"

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
    signal: AbstractPositionSignal = eqx.field(static=True)

    @abc.abstractmethod
    def attention_q(self, key: PRNGKeyArray, dtype) -> eqx.Module:
        r"""A new attention layer $\mathcal{A}_Q$ (changes $Q$)."""

    @abc.abstractmethod
    def attention_p(self, key: PRNGKeyArray, dtype) -> eqx.Module:
        r"""A new attention layer $\mathcal{A}_P$ (changes $P$)."""

    @abc.abstractmethod
    def check_window(self, Z) -> None:
        """`ValueError` for a window the model does not accept."""

    def _build(self, dim, n_sympnet, width, L, activation, init_upper, positional_encoding,
               key, dtype) -> None:
        """Validate and store the shared arguments and build the layers (called once,
        from the final class's `__init__`)."""
        self.dim = check_even("dim", dim)
        self.n_sympnet = check_int("n_sympnet", n_sympnet, minimum=0)
        self.width = self.dim if width is None else check_int("width", width, minimum=1)
        self.L = check_int("L", L, minimum=1)
        resolve_activation(activation)
        self.activation = activation
        self.init_upper = _check_bool("init_upper", init_upper)
        self.positional_encoding, self.signal = parse_positional_encoding(
            positional_encoding, self.default_placement, SHARED_PLACEMENTS)
        dtype = float_dtype(dtype)
        n_s = self.n_sympnet
        layers = []
        for k in jax.random.split(key, self.L):
            k_aq, k_ap, *k_grad = jax.random.split(k, 2 + 2 * n_s)
            attention_q, attention_p = self.attention_q(k_aq, dtype), self.attention_p(k_ap, dtype)
            for attention, keys in ((attention_q, k_grad[:n_s]), (attention_p, k_grad[n_s:])):
                layers.append(attention)
                layers.extend(
                    _gradient_block(self.dim, self.width, activation, n_s, self.init_upper,
                                    keys, dtype)
                )
        self.layers = tuple(layers)
        self.encoder = self.signal.encoder(self.dim)
        # A shift of a gradient layer's argument has a gain G ∈ R^{n×m}; the earlier
        # design ("bias-every-layer") biases each gradient layer directly, G ∈ R^{w×m};
        # an amplitude is one scalar per row, g ∈ R^{1×m}.
        rows = self.dim // 2 if self.signal.shifts_argument() else self.width
        rows = 1 if self.signal.scales_increment() else rows
        biased = _biased_gradient_layers(self.signal, self.L, n_s)
        self.position_gains = self.signal.zero_gains(tuple(rows for _ in biased), dtype)

    def __call__(self, Z: Float[Array, "T dim"]) -> Float[Array, "T dim"]:
        self.check_window(Z)
        Z = self.signal.encode(self.encoder, Z)
        Z = _apply_symplectic_stack(
            self.layers, Z, self.position_gains,
            _biased_gradient_layers(self.signal, self.L, self.n_sympnet),
            through_argument=self.signal.shifts_argument(),
            amplitude=self.signal.scales_increment(),
        )
        return self.signal.decode(self.encoder, Z)


class LinearSymplecticTransformer(AbstractSymplecticTransformer):
    r"""A symplectic transformer with *linear* symplectic attention (fixed window length).

    The units of
    [`AbstractSymplecticTransformer`][geomlearn.models.AbstractSymplecticTransformer] with
    $\mathcal{A}_Q: Q \leftarrow Q + A P$ and $\mathcal{A}_P: P \leftarrow P + A' Q$,
    [`LinearSymplecticAttentionQ`][geomlearn.layers.LinearSymplecticAttentionQ] /
    [`…P`][geomlearn.layers.LinearSymplecticAttentionP] with learned symmetric $T \times T$
    matrices (they mix the time steps): **exactly symplectic on windows** (Jacobian
    preserving $I_T \otimes \mathbb{J}$) for every parameter value.

    The attention matrices are indexed by position, so the model knows the order of the
    states in the window (it is not permutation-equivariant, even without positional
    encoding) and accepts only windows of length `seq_length`.

    **Parameters** (`dim = 2n`, `width = w`, `seq_length = T`): per unit
    $2 \cdot T(T+1)/2 + 2 n_s\, w (n + 2)$. For `dim=4, seq_length=4, n_sympnet=2,
    width=4, L=1`: $20 + 64 = 84$. `positional_encoding=True` is `"amplitude"`, as for
    the symplectic transformer: a step $h_t = 1 + g_l^\top e_t$ scaling every gradient
    layer's increment, $2 \cdot 2n_s L$ parameters (here 8; a Levenberg–Marquardt
    iteration, of cost $\propto P^2$, costs at most $(1 + \Delta P/P)^2 = 1.20\times$ as
    much). Its attention already sees the positions, and a shift of the gradient layers'
    argument (`"bias"`, `"bias-light"`) gained nothing where order matters; the amplitude
    gained 5.0× (fast-driven pendulum) and 2.3× (driven pendulum) in validation at equal
    wall time under LM and cost nothing on Markov data (1.00–1.01×; medians of three
    seeds, `benchmarks/RESULTS.md`). Files of layout 3, saved with
    `positional_encoding=True` when it meant `"bias"` here, load as `"bias"`; those of
    layout 2, when it meant `"bias-light"`, as `"bias-light"`.

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
    - `positional_encoding`: `False` (default: no position signal), `True` (this family's
      default placement, `"amplitude"`: a zero-initialised step $h_t = 1 + g_l^\top e_t$
      scaling every gradient layer's increment, $2 \cdot 2n_s L$ parameters; see
      [`AbstractSymplecticTransformer`][geomlearn.models.AbstractSymplecticTransformer])
      or a placement by name, `"bias"`, `"bias-light"`, `"bias-every-layer"`,
      `"amplitude"`, `"input"`, `"scaled"` or `"conjugate"` (see the module
      documentation). Every placement keeps the structure exactly.
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

    seq_length: int = eqx.field(static=True)

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
        self.seq_length = check_int("seq_length", seq_length, minimum=1)
        self._build(dim, n_sympnet, width, L, activation, init_upper, positional_encoding,
                    key, dtype)

    def attention_q(self, key, dtype):
        return LinearSymplecticAttentionQ(self.dim, self.seq_length, key=key, dtype=dtype)

    def attention_p(self, key, dtype):
        return LinearSymplecticAttentionP(self.dim, self.seq_length, key=key, dtype=dtype)

    def check_window(self, Z) -> None:
        check_model_window("LinearSymplecticTransformer", Z, self.dim)
        if Z.shape[0] != self.seq_length:
            raise ValueError(
                f"LinearSymplecticTransformer was built for windows of length "
                f"seq_length={self.seq_length}, got a window of length {Z.shape[0]} "
                f"(shape {Z.shape})"
            )


class SymplecticTransformer(AbstractSymplecticTransformer):
    r"""A symplectic transformer with nonlinear (matrix-softmax) symplectic attention.

    The units of
    [`AbstractSymplecticTransformer`][geomlearn.models.AbstractSymplecticTransformer] with
    $\mathcal{A}_Q: Q \leftarrow Q + \nabla_P F(P)$ and
    $\mathcal{A}_P: P \leftarrow P + \nabla_Q F'(Q)$,
    [`SymplecticAttentionQ`][geomlearn.layers.SymplecticAttentionQ] /
    [`…P`][geomlearn.layers.SymplecticAttentionP] (gradients of the potential
    $F(X) = \tfrac{T}{2}\log\sum_{s,t}\exp\big((XAX^\top)_{st}\big)$ with a symmetric
    $n \times n$ matrix $A$): **exactly symplectic on windows** for every parameter value
    and every window length $T$.

    Without positional encoding the model is permutation-equivariant along time
    (reordering the input rows reorders the output rows the same way); with
    `positional_encoding=True` it can learn to use the order (its position gains start
    at zero, so at initialisation it is still equivariant). The position gains of `True`
    (`"amplitude"`) add $2 \cdot 2n_s L$ parameters, whatever the dimension and width
    ($16$ to the $396$ of `dim=4, width=12, L=2`, the command line's size, $8$ to the
    $70$ of `width=4, L=1`;
    `"bias-light"`, the `True` of layout-2 files, added $32$ and $16$; the first bias
    design, `"bias-every-layer"`, $768$), so a Levenberg–Marquardt iteration, of cost
    $\propto P^2$, costs at most $(1 + \Delta P/P)^2$ times as much.

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
    - `positional_encoding`: `False` (default: no position signal), `True` (this family's
      default placement, `"amplitude"`: a zero-initialised step $h_t = 1 + g_l^\top e_t$
      scaling every gradient layer's increment, $2 \cdot 2n_s L$ parameters; see
      [`AbstractSymplecticTransformer`][geomlearn.models.AbstractSymplecticTransformer])
      or a placement by name, `"bias"`, `"bias-light"`, `"bias-every-layer"`,
      `"amplitude"`, `"input"`, `"scaled"` or `"conjugate"` (see the module
      documentation). Every placement keeps the structure exactly.
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
        self.seq_length = None
        self._build(dim, n_sympnet, width, L, activation, init_upper, positional_encoding,
                    key, dtype)

    def attention_q(self, key, dtype):
        return SymplecticAttentionQ(self.dim, key=key, dtype=dtype)

    def attention_p(self, key, dtype):
        return SymplecticAttentionP(self.dim, key=key, dtype=dtype)

    def check_window(self, Z) -> None:
        check_model_window("SymplecticTransformer", Z, self.dim)
