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

`positional_encoding` places a position signal that keeps the structure exactly (see
`geomlearn.layers._position_signal`): `True` is `"amplitude"`, a zero-initialised step
$h_t = 1 + g_l^\top e_t$ scaling the increment of every gradient layer $l$ on row $t$
(a potential times a number is a potential); `"bias"` shifts the argument of the first
gradient layer of each unit by $G e_t$; `"input"`, `"scaled"`, `"conjugate"` translate
the window.
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
    RowSlot,
    gradient_layer_with_bias,
    resolve_position_signal,
)
from ..layers._real_angles import check_times
from ..layers._row_steps import check_steps, with_row_steps
from ..layers.attention import (
    LinearSymplecticAttentionP,
    LinearSymplecticAttentionQ,
    SymplecticAttentionP,
    SymplecticAttentionQ,
)
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


def _gradient_rows(layer, Z, terms):
    r"""A gradient layer on every row of a window with the position terms of its slot: a
    shift $s_t$ of its argument ($K s_t$ in its pre-activation), a bias $c_t$ of its
    pre-activation, a step $h_t$ of its increment (its second argument)."""
    if terms.empty():
        return jax.vmap(layer)(Z)  # one point at a time, vmapped over the rows
    C = None
    if terms.shift is not None:
        C = terms.shift @ layer.K.astype(terms.shift.dtype).T
    if terms.bias is not None:
        C = terms.bias if C is None else C + terms.bias
    H = None if terms.step is None else terms.step.astype(Z.dtype)
    if C is None:
        return jax.vmap(layer)(Z, H)
    if H is None:
        return jax.vmap(lambda z, c: gradient_layer_with_bias(layer, z, c))(Z, C)
    return jax.vmap(lambda z, c, h: gradient_layer_with_bias(layer, z, c, h))(Z, C, H)


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
    with the centred features $e_t = (\sin t, \cos t) - \text{mean}$ and a gain
    $g_l \in \mathbb{R}^2$ per gradient layer, initialised to zero. The increment is the
    gradient of the potential $h_t \sum_i a_i \Sigma\big((K p + b)_i\big)$ of row $t$: a
    symplectic shear for every parameter value. It adds $2 \cdot 2n_s L$ parameters,
    whatever the dimension and width.

    **Position bias** (`"bias"`): the first gradient layer of each unit sees its
    argument (the unchanged half, $p$ for a Q-layer) shifted by $G e_t$ on row $t$,
    $q_t \leftarrow q_t + K^\top\big(a \odot \sigma(K(p_t + G e_t) + b)\big)$, with
    $G \in \mathbb{R}^{n \times 2}$ initialised to zero: again the gradient of a
    potential, $2nL$ parameters.

    Under Levenberg–Marquardt an iteration costs $\propto P^2$ in the parameter count,
    so $\Delta P$ added parameters make it up to $(1 + \Delta P/P)^2$ times dearer;
    `geomlearn.training.fit_position_last` trains the model without its signal first
    (benchmarks/RESULTS.md, "Positional encoding through the command line").
    """

    structure: ClassVar[str] = "symplectic"
    #: What `positional_encoding=True` resolves to for this family.
    default_placement: ClassVar[str] = "amplitude"
    #: The shorthands `positional_encoding` accepts for this family.
    placements: ClassVar[tuple[str, ...]] = SHARED_PLACEMENTS

    layers: tuple[eqx.Module, ...]
    encoder: eqx.Module | None  # the signal's encoder: a table, rotary frequencies or None
    position_gains: tuple[Float[Array, "rows m"], ...] | None
    dim: int = eqx.field(static=True)
    n_sympnet: int = eqx.field(static=True)
    width: int = eqx.field(static=True)
    L: int = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)
    init_upper: bool = eqx.field(static=True)
    positional_encoding: str | None = eqx.field(static=True)
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
        self.signal = resolve_position_signal(
            positional_encoding, self.default_placement, self.placements)
        self.positional_encoding = self.signal.name
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
        self.position_gains = self.signal.init(self._slots(), dtype)

    def _slots(self) -> tuple[RowSlot, ...]:
        """The gradient layers as the position signal sees them: `2 n_sympnet` per unit,
        each with a hidden width and an argument of `dim / 2`."""
        return tuple(RowSlot(unit=u, width=self.width, argument=self.dim // 2)
                     for u in range(self.L) for _ in range(2 * self.n_sympnet))

    def __call__(
        self, Z: Float[Array, "T dim"], times: Float[Array, " T"] | None = None,
        steps: Float[Array, " T"] | None = None,
    ) -> Float[Array, "T dim"]:
        """The window map; `times` `(T,)`, strictly increasing real times of the rows, are
        what the position signal reads instead of the row indices (structure unchanged:
        the signal's terms depend on the times, never on the state). `steps` `(T,)`,
        positive: each row's step relative to the training step; every gradient layer's
        increment on row $t$ is scaled by it (`geomlearn.layers._row_steps`), the
        attention is not. Symplectic for every sequence of steps."""
        self.check_window(Z)
        if times is not None:
            check_times(times, Z.shape[0], type(self).__name__)
        slots = self._slots()
        terms = self.signal.row_terms(self.position_gains, slots, Z.shape[0], times)
        if steps is not None:
            terms = with_row_steps(terms, slots,
                                   check_steps(steps, Z.shape[0], type(self).__name__))
        Z = self.signal.encode(self.encoder, Z, times)
        terms = iter(terms)
        for layer in self.layers:  # a short fixed stack of different layers
            # attention acts on the whole window, a gradient layer on every row
            Z = _gradient_rows(layer, Z, next(terms)) if _is_gradient_layer(layer) else layer(Z)
        return self.signal.decode(self.encoder, Z, times)


class LinearSymplecticTransformer(AbstractSymplecticTransformer):
    r"""A symplectic transformer with *linear* symplectic attention (fixed window length).

    The units of
    [`AbstractSymplecticTransformer`][geomlearn.models.AbstractSymplecticTransformer] with
    $\mathcal{A}_Q: Q \leftarrow Q + A P$ and $\mathcal{A}_P: P \leftarrow P + A' Q$,
    [`LinearSymplecticAttentionQ`][geomlearn.layers.LinearSymplecticAttentionQ] /
    [`…P`][geomlearn.layers.LinearSymplecticAttentionP] with learned symmetric $T \times T$
    matrices (they mix the time steps): **exactly symplectic on windows** (Jacobian
    preserving $I_T \otimes \mathbb{J}$) for every parameter value. The attention
    matrices are indexed by position, so the model knows the order of the rows even
    without a position signal, and accepts only windows of length `seq_length`.

    **Parameters** (`dim = 2n`, `width = w`, `seq_length = T`): per unit
    $T(T+1) + 2 n_s w (n + 2)$; $20 + 64 = 84$ for `dim=4, seq_length=4, width=4, L=1`.

    **Arguments:**

    - `dim`: the phase-space dimension $2n$ (even).
    - `seq_length`: the window length $T \ge 1$.
    - `n_sympnet` (default 2), `width` (`None`: `dim`), `activation` (default tanh):
      the gradient layers after each attention layer, their hidden width and activation.
    - `L`: the number of units (default 1); `init_upper`: whether each group of gradient
      layers starts with a Q-layer (default `True`).
    - `positional_encoding`: `False`/`None` (default: none), `True` (`"amplitude"`), a
      name in the class's `placements` or a signal object; stored resolved.
    - `key`: a JAX PRNG key (keyword-only); `dtype`: parameter dtype (`None`: default).

    **Call:** `model(Z, times=None, steps=None)`: `Z` `(seq_length, dim)` to the same
    shape and dtype (another length: `ValueError` naming both); `times` and `steps` as in
    the base class's call.

    ```python
    model = LinearSymplecticTransformer(4, 4, key=jax.random.PRNGKey(0))
    model(jnp.ones((4, 4))).shape   # (4, 4)
    ```

    References: B. Brantner's dissertation, GeometricMachineLearning.jl; Jin et al.,
    *SympNets*, Neural Networks 132 (2020).
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
        positional_encoding: bool | str | AbstractPositionSignal | None = False,
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
    and every window length $T$. Without a position signal it is permutation-equivariant
    along time; its position gains start at zero, so it starts equivariant.

    **Parameters** (`dim = 2n`, `width = w`): per unit $n(n+1) + 2 n_s w (n + 2)$;
    $4 \cdot (6 + 64) = 280$ for `dim=4, n_sympnet=2, width=4, L=4`.

    **Arguments:**

    - `dim`: the phase-space dimension $2n$ (even).
    - `n_sympnet` (default 2), `width` (`None`: `dim`), `activation` (default tanh):
      the gradient layers after each attention layer, their hidden width and activation.
    - `L`: the number of units (default 1); `init_upper`: whether each group of gradient
      layers starts with a Q-layer (default `True`).
    - `positional_encoding`: `False`/`None` (default: none), `True` (`"amplitude"`), a
      name in the class's `placements` or a signal object; stored resolved.
    - `key`: a JAX PRNG key (keyword-only); `dtype`: parameter dtype (`None`: default).

    **Call:** `model(Z, times=None, steps=None)`: `Z` `(T, dim)`, any `T ≥ 1`, to the
    same shape and dtype; `times` and `steps` as in the base class's call.

    ```python
    model = SymplecticTransformer(4, L=2, key=jax.random.PRNGKey(0))
    model(jnp.ones((7, 4))).shape   # (7, 4)
    ```

    References: B. Brantner's dissertation, GeometricMachineLearning.jl; Jin et al.,
    *SympNets*, Neural Networks 132 (2020).
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
        positional_encoding: bool | str | AbstractPositionSignal | None = False,
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
