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
from ..layers._position_signal import AbstractPositionSignal, parse_positional_encoding
from ..layers._vp_attention import AbstractWeighting, weighting_from
from ..layers.positional import PositionalEncoding
from ..layers._fused_shears import fuse_shears
from ..layers.volume_preserving import (
    VolumePreservingAttention,
    VolumePreservingLowerLayer,
    VolumePreservingUpperLayer,
)
from ._integrators import AbstractFeedForwardIntegrator, AbstractTransformerIntegrator
from ._vp_position import (
    feedforward_inverse_with_position,
    feedforward_with_position,
    signal_layers,
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


class VolumePreservingFeedForward(AbstractFeedForwardIntegrator):
    r"""A volume-preserving feed-forward integrator $z_{t+1} = \Phi_\theta(z_t)$.

    $\Phi_\theta$ is a composition of
    [`VolumePreservingLowerLayer`][geomlearn.VolumePreservingLowerLayer] ($\mathcal L$)
    and [`VolumePreservingUpperLayer`][geomlearn.VolumePreservingUpperLayer]
    ($\mathcal U$) shears, each with a unit-triangular Jacobian, so
    $\det \partial\Phi_\theta/\partial z = 1$ for every parameter value. With
    `init_upper=False`, each of the `n_blocks` blocks is

    - `n_linear` linear pairs $\mathcal L^{\text{lin}}\!\to\mathcal U^{\text{lin}}$
      ($x \mapsto x + Lx$, no bias), where the **last** upper layer of the block has a
      bias $b$;
    - one nonlinear pair $\mathcal L^{\sigma}\!\to\mathcal U^{\sigma}$,
      $x \mapsto x + \sigma(Lx + b)$, **both with bias**;

    and the network ends with a linear pair (lower without, upper with a bias).
    `init_upper=True` swaps the roles of lower and upper layers throughout.
    With $m = d(d-1)/2$ the network has
    $$n_\text{blocks}\,\big(2\,n_\text{linear}\,m + d + 2(m + d)\big) + 2m + d$$
    parameters: **135** for `dim=3, n_blocks=6` (the paper's count; also
    GeometricMachineLearning.jl's `VolumePreservingFeedForward`).

    Parameters are initialised like `eqx.nn.Linear`'s, $U(-1/\sqrt d, 1/\sqrt d)$. In
    the call, each run of consecutive linear layers is applied as the single affine map
    it composes to (the same function, with fewer steps).

    **Step size.** `model(z, h)` scales every layer's increment by the scalar `h`,
    $x \mapsto x + h\,\sigma(Lx + b)$ (the extended-SympNet convention of
    `AbstractFeedForwardIntegrator`). Every Jacobian stays unit-triangular, so the map
    is volume-preserving for every `h`; `h=None` means $h = 1$ (the paper's network).

    Brantner, de Romemont, Kraus, Li, *Volume-Preserving Transformers for Learning Time
    Series Data with Structure*, ESAIM: Proc. & Surveys 81 (2025), arXiv:2312.11166.

    **Arguments:**

    - `dim`: the state dimension $d \ge 1$ (odd allowed, e.g. the rigid body's 3).
    - `n_blocks`: the number of blocks, $\ge 1$.
    - `n_linear`: linear lower/upper pairs per block, $\ge 1$.
    - `activation`: $\sigma$ of the nonlinear layers, a callable or a name (`"tanh"`).
    - `init_upper`: start every pair with the upper layer instead of the lower one.
    - `key`: a JAX PRNG key; `dtype`: the parameter dtype (`None`: JAX's default float).

    **Call:** `model(z, h=None)` with `z` a point `(dim,)` — or a window `(T, dim)`, each
    row mapped by the same network (this is how the transformer uses it); returns the
    same shape and dtype. `model.inverse(y, h=None)` is the exact inverse.

    ```python
    model = VolumePreservingFeedForward(3, n_blocks=6, key=jax.random.PRNGKey(0))
    z1 = model(jnp.array([0.1, 0.2, 0.97]))
    ```
    """

    structure: ClassVar[str] = "volume"

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

    def inference_form(self):
        r"""The same map $z \mapsto \Phi_\theta(z)$ (`h = None`), rearranged for rollouts:
        every linear run composed into one affine map and folded into the pre-activation
        of the nonlinear layer after it, all matrices formed once (see
        `geomlearn.layers._fused_shears.fuse_shears`). Equal to the model's map up
        to rounding and volume-preserving like it; `iterate` calls this once, outside its
        loop."""
        return fuse_shears(self.layers)

    def inverse(
        self, z: Float[Array, "*T dim"], h: Array | float | None = None
    ) -> Float[Array, "*T dim"]:
        r"""The exact inverse $\Phi_\theta^{-1}$: the layers' inverses in reverse order."""
        self._check(z)
        for layer in reversed(self.layers):
            z = layer.inverse(z, h)
        return z


class _StructureOfWeighting:
    """`structure` of the transformer: `"volume"` for the class and for skew instances,
    `"none"` for an instance with `weighting="arbitrary"` (which does not preserve
    volume)."""

    def __get__(self, instance, owner) -> str:
        return "volume" if instance is None else instance.scheme.structure


class VolumePreservingTransformer(AbstractTransformerIntegrator):
    r"""The volume-preserving transformer: a window map $\mathbb{R}^{T\times d}\to
    \mathbb{R}^{T\times d}$ that preserves volume for every parameter value.

    The map is `L` units, each a
    [`VolumePreservingAttention`][geomlearn.VolumePreservingAttention] (which mixes the
    time steps of the window, $Z \mapsto \Lambda(Z)^\top Z$ with an orthogonal
    $\Lambda$) followed by a
    [`VolumePreservingFeedForward`][geomlearn.VolumePreservingFeedForward]`(dim,
    n_blocks, n_linear)` applied to every row:
    $$\Phi_\theta = (\mathrm{FF}_L \circ \mathrm{Att}_L) \circ \cdots \circ
      (\mathrm{FF}_1 \circ \mathrm{Att}_1)\ [\,\circ\, \mathrm{PE}].$$
    There are no residual connections (an addition of the input would not preserve
    volume). Every factor has $|\det J| = 1$ on the flattened $(T\cdot d)$ window, hence
    so has $\Phi_\theta$, for any window length $T$ (`seq_length = None`).

    **Order of the states.** Attention and the row-wise feed-forward network are
    permutation-equivariant along time: without positional encoding,
    $\Phi_\theta(\Pi Z) = \Pi\,\Phi_\theta(Z)$ for every permutation $\Pi$ of the rows
    (with `weighting="skew"`), so the network cannot tell the order of the states
    except from their values. The position signal can enter in several places, all of
    which keep the volume exactly (`positional_encoding`, below); the default of
    `positional_encoding=True` is `"split-amplitude"`: the feed-forward network of each
    unit alternates lower and upper triangular shears (the two halves of a splitting),
    and on row $t$ every nonlinear lower layer advances by the step
    $h^{\mathrm{lo}}_t = 1 + g_{\mathrm{lo}}^\top e_t$ and every upper one by
    $h^{\mathrm{up}}_t = 1 + g_{\mathrm{up}}^\top e_t$,
    $x_t \mapsto x_t + h_t\,\sigma(W x_t + b)$, with the two position features
    $e_t = (\sin t, \cos t) - \text{mean}$ (centred over the window) and two learned
    gains $g_{\mathrm{lo}}, g_{\mathrm{up}} \in \mathbb{R}^2$ initialised to **zero** — at
    initialisation the model is the one without encoding, and a step that depends on the
    row's index only keeps every Jacobian unit triangular. It adds 4 parameters per
    unit, whatever $d$ and `n_blocks`: under Levenberg–Marquardt, whose iteration costs
    $\propto P^2$, at most $(1 + 4L/P)^2$ times as much per iteration ($1.06\times$ for
    the command line's rigid-body default, $138 \to 142$ parameters). The other
    placements: `"bias"` (`True` until 2026-12-03, files of layout 1 saved with `True`
    load as it) shifts the argument of the first biased triangular layer of each unit,
    $x_t \mapsto x_t + \sigma(W x_t + b + G e_t)$ with $G \in \mathbb{R}^{d \times 2}$
    ($2d$ per unit); `"bias-light"`, two features in every biased layer, adds $2d$ and
    `"bias-every-layer"`, eight features, $8d$ per biased layer; `"amplitude"` gives
    every nonlinear layer its own step, two parameters per layer —
    $2 \cdot 2 n_\text{blocks} L$, $138 \to 162$ for the rigid body, at most $1.38\times$
    per LM iteration. Any placement breaks the equivariance. Measured through
    `geomlearn train` (benchmarks/RESULTS.md): on the driven pendulum, where the order
    matters, `True` is 7.0× more accurate than no encoding (ten seeds; `"bias"` 0.98×,
    `"amplitude"` 19×), and on the Markov systems it is free on the median (rigid body
    1.04×, Hénon–Heiles 0.99×, coupled oscillator 1.07×); the details are in
    `docs/concepts/positional_encoding.md`.

    **Weighting.** `weighting="arbitrary"` uses the non-skew attention of
    GeometricMachineLearning.jl (its default `skew_sym=false`), which does **not**
    preserve volume; for such an instance `model.structure == "none"`.

    Parameters: `L` times the attention ($d(d-1)/2$ skew, $d^2$ arbitrary) plus the
    feed-forward network; for `dim=3, n_blocks=2, L=3` that is **162** (skew) and
    **180** (arbitrary), as in the paper and in GeometricMachineLearning.jl.

    Brantner, de Romemont, Kraus, Li, *Volume-Preserving Transformers for Learning Time
    Series Data with Structure*, ESAIM: Proc. & Surveys 81 (2025), arXiv:2312.11166.

    **Arguments:**

    - `dim`: the state dimension $d \ge 1$ (odd allowed).
    - `n_blocks`, `n_linear`, `activation`, `init_upper`: of each feed-forward network
      (see [`VolumePreservingFeedForward`][geomlearn.VolumePreservingFeedForward]).
    - `L`: the number of attention + feed-forward units, $\ge 1$.
    - `weighting`: `"skew"` (volume-preserving, default) or `"arbitrary"` (turned into
      the attention's weighting object once, here; `model.weighting` stays the name).
    - `positional_encoding`: `False` (default: no position signal), `True` (the default
      placement of this family, `"split-amplitude"`), or a placement by name:
      `"split-amplitude"`, `"bias"` (above), `"bias-light"`, `"bias-every-layer"`,
      `"amplitude"`, `"input"` (the table
      added first, $Z + P$), `"scaled"` ($Z + 0.1\,P_{\text{short}}$, frequencies
      $2^{-j}$) or `"conjugate"` ($\Phi(Z + P) - P$).
    - `key`: a JAX PRNG key; `dtype`: the parameter dtype (`None`: JAX's default float).

    **Call:** `model(Z)` with `Z` a window `(T, dim)`, any $T \ge 1$; returns a window of
    the same shape and dtype (which of its rows count as the prediction is the training
    and rollout's prediction window). `model.inverse(Y)` is the exact inverse (skew
    weighting only).

    ```python
    model = VolumePreservingTransformer(3, n_blocks=2, L=3, key=jax.random.PRNGKey(0))
    Z = jnp.ones((3, 3))
    model(Z).shape   # (3, 3)
    ```
    """

    structure: ClassVar[str] = _StructureOfWeighting()  # type: ignore[assignment]
    #: What `positional_encoding=True` means for this family: the amplitude by triangular
    #: halves, four parameters per unit (measured; `"bias"` until 2026-12-03).
    default_placement: ClassVar[str] = "split-amplitude"

    attention: tuple[VolumePreservingAttention, ...]
    feedforward: tuple[VolumePreservingFeedForward, ...]
    encoder: PositionalEncoding | None
    # per unit: one gain per layer taking the signal, or (lower, upper) by halves
    position_gains: tuple[tuple[Float[Array, "rows m"], ...], ...] | None
    dim: int = eqx.field(static=True)
    n_blocks: int = eqx.field(static=True)
    n_linear: int = eqx.field(static=True)
    L: int = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)
    init_upper: bool = eqx.field(static=True)
    scheme: AbstractWeighting = eqx.field(static=True)
    positional_encoding: bool | str = eqx.field(static=True)
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
        positional_encoding: bool | str = False,
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
        self.positional_encoding, self.signal = parse_positional_encoding(
            positional_encoding, self.default_placement)
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
        rows = tuple(
            tuple(self.dim for _ in signal_layers(ff, self.signal)) for ff in self.feedforward
        )
        self.position_gains = self.signal.zero_gains(rows, dtype)

    @property
    def weighting(self) -> str:
        """The name of the attention weighting: `"skew"` or `"arbitrary"`."""
        return self.scheme.name

    def _check(self, Z) -> None:
        name = type(self).__name__
        check_floating(f"{name} input", Z)
        check_last_dim(name, Z, self.dim, ndim=(2,))
        if Z.shape[0] < 1:
            raise ValueError(f"{name} expects a window with T >= 1 rows, got shape {Z.shape}")

    def __call__(self, Z: Float[Array, "T dim"]) -> Float[Array, "T dim"]:
        r"""Map the window `Z` `(T, dim)` to $\Phi_\theta(Z)$ (same shape and dtype)."""
        self._check(Z)
        Z = self.signal.encode(self.encoder, Z)
        for u, (attention, feedforward) in enumerate(zip(self.attention, self.feedforward)):
            Z = attention(Z)
            if self.position_gains is None:
                Z = feedforward(Z)
            else:
                Z = feedforward_with_position(feedforward, Z, self.position_gains[u], self.signal)
        return self.signal.decode(self.encoder, Z)

    def inference_form(self):
        r"""The same window map for rollouts: each skew attention with its matrix $S$
        formed once; the feed-forward networks as they are (their call already composes
        each linear run into one affine map). Equal to the model's map up to rounding
        and volume-preserving like it. With position gains (a position bias or amplitude
        inside the feed-forward networks) the model itself is returned.

        XLA already hoists this parameter-only work out of a rollout loop; folding the
        affine maps into the pre-activations, as
        `VolumePreservingFeedForward.inference_form` does, adds a kernel per call inside
        the transformer and is therefore not used here."""
        if self.position_gains is not None:
            return self
        return _VolumePreservingTransformerInference(
            attention=tuple(a.inference_form() for a in self.attention),
            feedforward=self.feedforward,
            encoder=self.encoder,
            signal=self.signal,
        )

    def inverse(self, Y: Float[Array, "T dim"]) -> Float[Array, "T dim"]:
        r"""The exact inverse $\Phi_\theta^{-1}$ (skew weighting only; see
        `VolumePreservingAttention.inverse`)."""
        self._check(Y)
        Y = self.signal.undo_decode(self.encoder, Y)
        for u in reversed(range(self.L)):
            if self.position_gains is None:
                Y = self.feedforward[u].inverse(Y)
            else:
                Y = feedforward_inverse_with_position(
                    self.feedforward[u], Y, self.position_gains[u], self.signal)
            Y = self.attention[u].inverse(Y)
        return self.signal.undo_encode(self.encoder, Y)


class _VolumePreservingTransformerInference(eqx.Module):
    """`VolumePreservingTransformer.inference_form()`: the same window map with fused
    feed-forward networks (no position gains)."""

    attention: tuple
    feedforward: tuple
    encoder: PositionalEncoding | None
    signal: AbstractPositionSignal = eqx.field(static=True)

    def __call__(self, Z: Float[Array, "T dim"]) -> Float[Array, "T dim"]:
        Z = self.signal.encode(self.encoder, Z)
        for attention, feedforward in zip(self.attention, self.feedforward):
            Z = feedforward(attention(Z))
        return self.signal.decode(self.encoder, Z)
