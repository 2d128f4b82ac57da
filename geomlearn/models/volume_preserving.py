r"""Volume-preserving integrators: the feed-forward network and the transformer.

Both models are compositions of the layers in `geomlearn.layers.volume_preserving` and
preserve phase-space volume exactly for every value of their parameters (the
transformer with its default `weighting="skew"`), in any dimension, odd included.
They follow Brantner, de Romemont, Kraus and Li, *Volume-Preserving Transformers for
Learning Time Series Data with Structure*, ESAIM: Proceedings and Surveys 81 (2025),
[arXiv:2312.11166](https://arxiv.org/abs/2312.11166), and reproduce the parameter counts
of that paper and of GeometricMachineLearning.jl.
"""

from __future__ import annotations

from typing import Callable, ClassVar, Literal

import equinox as eqx
import jax
import jax.numpy as jnp

from .._activations import resolve_activation
from .._typing import Array, Float, PRNGKeyArray
from .._validation import check_bool as _check_bool
from .._validation import check_floating, check_int, check_last_dim, float_dtype
from ..layers._linalg import small_matmul
from ..layers._position_signal import PLACEMENTS, AbstractPositionSignal, resolve_position_signal
from ..layers._real_angles import check_times
from ..layers._row_steps import check_steps
from ..layers._vp_attention import AbstractWeighting, check_window, weighting_from
from ..layers._fused_shears import fuse_shears
from ..layers.volume_preserving import (
    VolumePreservingAttention,
    VolumePreservingLowerLayer,
    VolumePreservingUpperLayer,
)
from ._base import AbstractInferenceForm
from ._integrators import AbstractFeedForwardIntegrator, AbstractTransformerIntegrator
from ._vp_position import (
    feedforward_inverse_with_position,
    feedforward_with_position,
    signal_slots,
)

__all__ = ["VolumePreservingFeedForward", "VolumePreservingTransformer"]

_TriangularLayer = VolumePreservingLowerLayer | VolumePreservingUpperLayer


def _apply_affine(z, Mt, c):
    """`z @ Mt + c` for a point `(d,)` or each row of a window `(T, d)`."""
    return small_matmul(z, Mt) + c.reshape((1,) * (z.ndim - 1) + c.shape)


def _feedforward_layers(
    dim: int, n_blocks: int, n_linear: int, activation, init_upper: bool, key, dtype
) -> tuple:
    """The layer sequence of the volume-preserving feed-forward network (see its doc)."""
    first, second = (
        (VolumePreservingUpperLayer, VolumePreservingLowerLayer)
        if init_upper
        else (VolumePreservingLowerLayer, VolumePreservingUpperLayer)
    )
    # (class, activation, use_bias) for every layer, in order.
    spec = []
    for _ in range(n_blocks):
        for i in range(n_linear):
            last = i == n_linear - 1
            spec += [(first, None, False), (second, None, last)]
        spec += [(first, activation, True), (second, activation, True)]
    spec += [(first, None, False), (second, None, True)]
    keys = jax.random.split(key, len(spec))
    return tuple(
        cls(dim, act, use_bias=bias, key=k, dtype=dtype)
        for (cls, act, bias), k in zip(spec, keys)
    )


class _FoldedLinearRuns(AbstractInferenceForm):
    r"""The feed-forward network's map $z \mapsto \Phi_\theta(z)$ (`h = None`) for
    rollouts: every linear run composed into one affine map and folded into the
    pre-activation of the nonlinear layer after it, all matrices formed once
    (`geomlearn.layers._fused_shears.fuse_shears`); equal up to rounding and
    volume-preserving like it."""

    def of(self, model):
        return fuse_shears(model.layers)


class _HoistedAttention(AbstractInferenceForm):
    r"""The transformer's window map for rollouts: each skew attention with its matrix
    $S$ formed once, the feed-forward networks as they are (their call already composes
    each linear run; folding them into the pre-activations adds a kernel per call
    inside the transformer). With position gains, the model itself."""

    def of(self, model):
        if model.position_gains is not None:
            return model
        return _VolumePreservingTransformerInference(
            attention=tuple(a.inference_form() for a in model.attention),
            feedforward=model.feedforward, encoder=model.encoder, signal=model.signal)


class VolumePreservingFeedForward(AbstractFeedForwardIntegrator):
    r"""A volume-preserving feed-forward integrator $z_{t+1} = \Phi_\theta(z_t)$.

    $\Phi_\theta$ is a composition of
    [`VolumePreservingLowerLayer`][geomlearn.VolumePreservingLowerLayer] ($\mathcal L$)
    and [`VolumePreservingUpperLayer`][geomlearn.VolumePreservingUpperLayer]
    ($\mathcal U$) shears, each with a unit-triangular Jacobian, so
    $\det \partial\Phi_\theta/\partial z = 1$ for every parameter value. With
    `init_upper=False`, each of the `n_blocks` blocks is `n_linear` linear pairs
    $\mathcal L^{\text{lin}}\!\to\mathcal U^{\text{lin}}$ ($x \mapsto x + Lx$; the last
    upper layer of the block with a bias) and one nonlinear pair
    $x \mapsto x + \sigma(Lx + b)$, both with bias; the network ends with a linear pair
    (the upper with a bias). `init_upper=True` swaps lower and upper throughout. With
    $m = d(d-1)/2$ that is
    $n_\text{blocks}\big(2\,n_\text{linear}\,m + d + 2(m + d)\big) + 2m + d$ parameters:
    **135** for `dim=3, n_blocks=6`, as in the paper and GeometricMachineLearning.jl.
    Parameters start $U(-1/\sqrt d, 1/\sqrt d)$; each run of linear layers is applied
    as the one affine map it composes to.

    **Step size.** `model(z, h)` scales every increment by `h`,
    $x \mapsto x + h\,\sigma(Lx + b)$: still unit triangular, so volume-preserving for
    every `h` (`None`: $h = 1$).

    **Arguments:** `dim` ($d \ge 1$, odd allowed); `n_blocks`, `n_linear` ($\ge 1$);
    `activation` ($\sigma$, a callable or a name); `init_upper`; `key`; `dtype`
    (`None`: JAX's default float).

    **Call:** `model(z, h=None)` with `z` a point `(dim,)` — or a window `(T, dim)`, each
    row mapped alike — returns the same shape and dtype; `model.inverse(y, h=None)` is
    the exact inverse.

    ```python
    model = VolumePreservingFeedForward(3, n_blocks=6, key=jax.random.PRNGKey(0))
    z1 = model(jnp.array([0.1, 0.2, 0.97]))
    ```

    Brantner, de Romemont, Kraus, Li, *Volume-Preserving Transformers for Learning Time
    Series Data with Structure*, ESAIM: Proc. & Surveys 81 (2025), arXiv:2312.11166.
    """

    structure: ClassVar[str] = "volume"
    inference: ClassVar[AbstractInferenceForm] = _FoldedLinearRuns()

    layers: tuple[_TriangularLayer, ...]
    dim: int = eqx.field(static=True)
    n_blocks: int = eqx.field(static=True)
    n_linear: int = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)
    init_upper: bool = eqx.field(static=True)

    def __init__(
        self,
        dim: int,
        *,
        n_blocks: int = 1,
        n_linear: int = 1,
        activation: Callable | str = jnp.tanh,
        init_upper: bool = False,
        key: PRNGKeyArray,
        dtype=None,
    ):
        self.dim = check_int("dim", dim, minimum=1)
        self.n_blocks = check_int("n_blocks", n_blocks, minimum=1)
        self.n_linear = check_int("n_linear", n_linear, minimum=1)
        resolve_activation(activation)  # validate now, store the original argument
        self.activation = activation
        self.init_upper = _check_bool("init_upper", init_upper)
        self.layers = _feedforward_layers(
            self.dim,
            self.n_blocks,
            self.n_linear,
            activation,
            self.init_upper,
            key,
            float_dtype(dtype),
        )

    def _check(self, z) -> None:
        name = type(self).__name__
        check_floating(f"{name} input", z)
        check_last_dim(name, z, self.dim, ndim=(1, 2))

    def __call__(
        self, z: Float[Array, "*T dim"], h: Array | float | None = None
    ) -> Float[Array, "*T dim"]:
        r"""One step $z \mapsto \Phi_\theta(z)$ of a point `(dim,)` (or of each row of a
        window `(T, dim)`), with every increment scaled by `h` when given."""
        self._check(z)
        # Runs of linear layers are applied as one affine map x ↦ x Mᵀ + c, composed from
        # the parameters alone (so a rollout computes it once, outside its loop); the
        # composition of unit-triangular matrices has determinant 1 all the same.
        affine = None
        for layer in self.layers:
            if layer.activation is None:
                Mt, c = layer.affine_map(z.dtype, h)
                affine = (Mt, c) if affine is None else (small_matmul(affine[0], Mt), small_matmul(affine[1], Mt) + c)
                continue
            if affine is not None:
                z = _apply_affine(z, *affine)
                affine = None
            z = layer(z, h)
        if affine is not None:
            z = _apply_affine(z, *affine)
        return z

    def inverse(
        self, z: Float[Array, "*T dim"], h: Array | float | None = None
    ) -> Float[Array, "*T dim"]:
        r"""The exact inverse $\Phi_\theta^{-1}$: the layers' inverses in reverse order."""
        self._check(z)
        for layer in reversed(self.layers):
            z = layer.inverse(z, h)
        return z


def _check_times(dim: int | None, Z, times, steps=None):
    """`ValueError` for a window the transformer does not accept (when `dim` is given) or
    `times` or `steps` that do not fit it (see `geomlearn.layers._real_angles.check_times`
    and `geomlearn.layers._row_steps.check_steps`); returns the steps as an array."""
    if dim is not None:
        check_window("VolumePreservingTransformer", Z, dim)
    if times is not None:
        check_times(times, Z.shape[0], "VolumePreservingTransformer")
    return None if steps is None else check_steps(steps, Z.shape[0],
                                                  "VolumePreservingTransformer")


class _StructureOfWeighting:
    """`structure` of the transformer: `"volume"` for the class and for skew instances,
    `"none"` for an instance with `weighting="arbitrary"` (which does not preserve
    volume)."""

    def __get__(self, instance, owner) -> str:
        return "volume" if instance is None else instance.scheme.structure


class VolumePreservingTransformer(AbstractTransformerIntegrator):
    r"""The volume-preserving transformer: a window map $\mathbb{R}^{T\times d}\to
    \mathbb{R}^{T\times d}$ that preserves volume for every parameter value.

    `L` units, each a [`VolumePreservingAttention`][geomlearn.VolumePreservingAttention]
    ($Z \mapsto \Lambda(Z)^\top Z$ with an orthogonal $\Lambda$, mixing the time steps)
    followed by a [`VolumePreservingFeedForward`][geomlearn.VolumePreservingFeedForward]
    on every row, $\Phi_\theta = (\mathrm{FF}_L \circ \mathrm{Att}_L) \circ \cdots \circ
    (\mathrm{FF}_1 \circ \mathrm{Att}_1)$, without residual connections: every factor has
    $|\det J| = 1$ on the flattened window, for any $T$ (`seq_length = None`).
    Parameters: $L$ times the attention ($d(d-1)/2$ skew, $d^2$ arbitrary) plus the
    feed-forward network — **162** (skew) and **180** (arbitrary) for `dim=3,
    n_blocks=2, L=3`, as in the paper and GeometricMachineLearning.jl.

    **Position signal.** Without one, $\Phi_\theta(\Pi Z) = \Pi\,\Phi_\theta(Z)$ for
    every permutation $\Pi$ of the rows (skew weighting). `True` is `"split-amplitude"`:
    on row $t$ every nonlinear lower layer of a unit advances by the step
    $h^{\mathrm{lo}}_t = 1 + g_{\mathrm{lo}}^\top e_t$, every upper one by
    $h^{\mathrm{up}}_t = 1 + g_{\mathrm{up}}^\top e_t$, $x_t \mapsto x_t +
    h_t\,\sigma(Wx_t + b)$, with $e_t = (\sin t, \cos t) - \text{mean}$ and gains
    initialised to zero: 4 parameters per unit, every Jacobian still unit triangular.
    `"amplitude"` gives each nonlinear layer its own step; `"bias"` adds $G e_t$,
    $G \in \mathbb{R}^{d \times 2}$, in the first biased layer of each unit.

    **Arguments:**

    - `dim` ($d \ge 1$, odd allowed); `n_blocks`, `n_linear`, `activation`, `init_upper`
      of each feed-forward network; `L`: the number of units.
    - `weighting`: `"skew"` (default, volume-preserving), `"arbitrary"` (does **not**
      preserve volume; `model.structure == "none"`) or a weighting object.
    - `positional_encoding`: `False`/`None` (default: none), `True` (`"split-amplitude"`), a
      name in the class's `placements` or a signal object; stored resolved.
    - `key`: a JAX PRNG key; `dtype`: the parameter dtype (`None`: JAX's default float).

    **Call:** `model(Z, times=None, steps=None)`: `Z` `(T, dim)`, any $T \ge 1$, to the
    same shape and dtype, the signal reading `times`; `steps` `(T,)` scale every increment
    of a row's feed-forward layers (its step relative to the training step; volume is
    preserved for every sequence); `model.inverse(Y, times, steps)` inverts it (skew).

    Brantner, de Romemont, Kraus, Li, ESAIM: Proc. & Surveys 81 (2025), arXiv:2312.11166.
    """

    structure: ClassVar[str] = _StructureOfWeighting()  # type: ignore[assignment]
    #: What `positional_encoding=True` resolves to for this family.
    default_placement: ClassVar[str] = "split-amplitude"
    #: The shorthands `positional_encoding` accepts for this family (all of them).
    placements: ClassVar[tuple[str, ...]] = tuple(PLACEMENTS)
    inference: ClassVar[AbstractInferenceForm] = _HoistedAttention()

    attention: tuple[VolumePreservingAttention, ...]
    feedforward: tuple[VolumePreservingFeedForward, ...]
    encoder: eqx.Module | None  # the signal's encoder: a table, rotary frequencies or None
    # per unit: the gains of its feed-forward network (`None`: a signal without gains)
    position_gains: tuple[tuple[Float[Array, "rows m"], ...], ...] | None
    dim: int = eqx.field(static=True)
    n_blocks: int = eqx.field(static=True)
    n_linear: int = eqx.field(static=True)
    L: int = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)
    init_upper: bool = eqx.field(static=True)
    scheme: AbstractWeighting = eqx.field(static=True)
    positional_encoding: str | None = eqx.field(static=True)
    signal: AbstractPositionSignal = eqx.field(static=True)
    seq_length: int | None = eqx.field(static=True)

    def __init__(
        self,
        dim: int,
        *,
        n_blocks: int = 1,
        n_linear: int = 1,
        L: int = 1,
        activation: Callable | str = jnp.tanh,
        init_upper: bool = False,
        weighting: Literal["skew", "arbitrary"] | AbstractWeighting = "skew",
        positional_encoding: bool | str | AbstractPositionSignal | None = False,
        key: PRNGKeyArray,
        dtype=None,
    ):
        self.dim = check_int("dim", dim, minimum=1)
        self.n_blocks = check_int("n_blocks", n_blocks, minimum=1)
        self.n_linear = check_int("n_linear", n_linear, minimum=1)
        self.L = check_int("L", L, minimum=1)
        resolve_activation(activation)  # validate now, store the original argument
        self.activation = activation
        self.init_upper = _check_bool("init_upper", init_upper)
        self.scheme = weighting_from(weighting)
        self.signal = resolve_position_signal(
            positional_encoding, self.default_placement, self.placements)
        self.positional_encoding = self.signal.name
        self.seq_length = None
        dtype = float_dtype(dtype)
        attention, feedforward = [], []
        for k in jax.random.split(key, self.L):
            a_key, f_key = jax.random.split(k)
            attention.append(
                VolumePreservingAttention(self.dim, weighting=self.scheme, key=a_key, dtype=dtype)
            )
            feedforward.append(
                VolumePreservingFeedForward(
                    self.dim,
                    n_blocks=self.n_blocks,
                    n_linear=self.n_linear,
                    activation=activation,
                    init_upper=self.init_upper,
                    key=f_key,
                    dtype=dtype,
                )
            )
        self.attention = tuple(attention)
        self.feedforward = tuple(feedforward)
        self.encoder = self.signal.encoder(self.dim)
        gains = tuple(self.signal.init(signal_slots(ff), dtype) for ff in self.feedforward)
        self.position_gains = None if any(g is None for g in gains) else gains

    @property
    def weighting(self) -> str:
        """The name of the attention weighting: `"skew"` or `"arbitrary"`."""
        return self.scheme.name

    def __call__(
        self, Z: Float[Array, "T dim"], times: Float[Array, " T"] | None = None,
        steps: Float[Array, " T"] | None = None,
    ) -> Float[Array, "T dim"]:
        r"""Map the window `Z` `(T, dim)` to $\Phi_\theta(Z)$ (same shape and dtype); the
        position signal reads the rows' real `times` `(T,)` when given. `steps` `(T,)`,
        positive: each row's step relative to the training step, scaling every increment
        of the feed-forward networks on that row (not the attention); volume-preserving
        for every sequence of steps (`geomlearn.layers._row_steps`)."""
        steps = _check_times(self.dim, Z, times, steps)
        Z = self.signal.encode(self.encoder, Z, times)
        for u, (attention, feedforward) in enumerate(zip(self.attention, self.feedforward)):
            Z = attention(Z)
            if self.position_gains is None and steps is None:
                Z = feedforward(Z)
            else:
                Z = feedforward_with_position(feedforward, Z, self._gains(u), self.signal,
                                              times, steps)
        return self.signal.decode(self.encoder, Z, times)

    def _gains(self, u: int):
        return None if self.position_gains is None else self.position_gains[u]

    def inverse(
        self, Y: Float[Array, "T dim"], times: Float[Array, " T"] | None = None,
        steps: Float[Array, " T"] | None = None,
    ) -> Float[Array, "T dim"]:
        r"""The exact inverse $\Phi_\theta^{-1}$ (skew weighting only; see
        `VolumePreservingAttention.inverse`), at the same `times` and `steps` as the map."""
        steps = _check_times(self.dim, Y, times, steps)
        Y = self.signal.undo_decode(self.encoder, Y, times)
        for u in reversed(range(self.L)):
            if self.position_gains is None and steps is None:
                Y = self.feedforward[u].inverse(Y)
            else:
                Y = feedforward_inverse_with_position(
                    self.feedforward[u], Y, self._gains(u), self.signal, times, steps)
            Y = self.attention[u].inverse(Y)
        return self.signal.undo_encode(self.encoder, Y, times)


class _VolumePreservingTransformerInference(eqx.Module):
    """`VolumePreservingTransformer.inference_form()`: the same window map with each
    attention's matrix formed once (no position gains)."""

    attention: tuple
    feedforward: tuple
    encoder: eqx.Module | None  # the signal's encoder: a table, rotary frequencies or None
    signal: AbstractPositionSignal = eqx.field(static=True)

    def __call__(
        self, Z: Float[Array, "T dim"], times: Float[Array, " T"] | None = None,
        steps: Float[Array, " T"] | None = None,
    ) -> Float[Array, "T dim"]:
        steps = _check_times(None, Z, times, steps)
        Z = self.signal.encode(self.encoder, Z, times)
        for attention, feedforward in zip(self.attention, self.feedforward):
            Z = attention(Z)
            Z = feedforward(Z) if steps is None else jax.vmap(feedforward)(Z, steps)
        return self.signal.decode(self.encoder, Z, times)
