r"""SympNets and Hénon networks: feed-forward integrators that are symplectic maps.

Each model is a composition of the symplectic layers of `geomlearn.layers`, so it is an
exactly symplectic map of phase space for every parameter value and every step size `h`,
with a closed-form inverse. Trained on pairs $(z_t, z_{t+1})$ of a Hamiltonian system, it
becomes a one-step integrator $z_{t+1} = \Phi_\theta(z_t)$ that cannot contract or expand
phase-space volume.

**Step size.** Every model takes an optional `h` (a scalar; under `jax.vmap` one per
sample) that multiplies every layer's update — the *extended* SympNets of Jin et al.
for irregularly sampled data. `h=None` means no scaling ($h = 1$); $h \to 0$ tends to
the identity; the model is symplectic for every $h$. Worth knowing: since every update is
a shear scaled by $h$, to first order in $h$ such a model is the time-$h$ flow of a
*separable* Hamiltonian $T(p) + U(q)$ (for a `HenonNet` too: see `HenonLayer`); the
coupling of $q$ and $p$ only enters at order $h^2$. So with small, varying steps these
models represent separable systems best.

**Symmetric compositions.** With `symmetric=True` (every model here and the ridge
SympNets of `geomlearn.models.ridge_sympnet`) the model map is
$S_h = R \circ \Phi_{h/2}^{-1} \circ R \circ \Phi_{h/2}$, with the network
$\Phi$ taken at half the step and the time reversal $R(q, p) = (q, -p)$. $S_h$ is
symplectic ($R$ is anti-symplectic and appears twice) and **reversible** for every
parameter value, $R \circ S_h \circ R \circ S_h = \mathrm{id}$, like the Störmer–Verlet
method (the construction of Tapley, 2024, after the symmetric compositions of Hairer,
Lubich and Wanner, *Geometric Numerical Integration*, §V.1). Reversible is not
*time-symmetric* ($S_{-h} = S_h^{-1}$): that needs $\Phi_{-h/2} = \Phi_{h/2}^{-1}$,
which the G- and LA-SympNets' shears (linear in the step) satisfy and the Hénon layers
do not, so a symmetric `HenonNet` is reversible but not time-symmetric. It evaluates
the layers twice.

**Identity at initialisation.** With `identity_init=True` a new model is exactly the
identity: its output coefficients start at zero (the weights $a$ of the gradient,
activation and Hénon layers, the matrices $S$ of the linear shears; a Hénon layer with
$\nabla V = 0$ is four quarter turns), while the loss's gradient there is not zero, so
it trains from the identity — the start of a correction of a classical step
(`geomlearn.models.corrected`). A Hénon layer moves states to first order by the flow of
the even part $V(y) + V(-y - \eta)$ of its potential, constant for $b = \eta = 0$ and
$\sigma$ = constant + odd: its offsets start at $b \sim \mathcal{N}(0, 1)$ instead.
**Symmetries** (`symmetry=`, `GSympNet` and `HenonNet`; also `HamiltonianNeuralNetwork`
and `CorrectedIntegrator`): see `geomlearn.symmetries`.
"""

from __future__ import annotations

from typing import Callable, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from .._activations import resolve_activation
from .._nn import scale_by_step
from .._typing import Array, Float, PRNGKeyArray
from .._validation import check_bool, check_even, check_int, float_dtype, step_size
from ..layers.henon import HenonLayer
from ..symmetries import AbstractSymmetry, resolve_symmetry
from ..layers.sympnet import (
    ActivationLayerP,
    ActivationLayerQ,
    GradientLayerP,
    GradientLayerQ,
    LinearLayerP,
    LinearLayerQ,
)
from ._base import AbstractInferenceForm
from ._shear_forms import GradientShears, HenonLayers, LinearActivationShears
from ._stack import AbstractSymmetrisableIntegrator, alternate, index_stack, scan_stack, stack_modules

__all__ = ["GSympNet", "LASympNet", "HenonNet", "AbstractStackedSympNet", "stack_options", "stacked_layers"]


def stack_options(dim, n_layers, width, activation, symmetric) -> tuple:
    """`(dim, n_layers, width, activation, symmetric)` of a stack of `n_layers` layers of
    `width` neurons on an even `dim`, checked in that order (the activation must be a
    callable or a known name); `ValueError` or `TypeError` naming the first wrong one."""
    dim = check_even("dim", dim)
    n_layers = check_int("n_layers", n_layers, minimum=1)
    width = check_int("width", width, minimum=1)
    resolve_activation(activation)
    return dim, n_layers, width, activation, check_bool("symmetric", symmetric)


def _zeroed(module: eqx.Module, *names: str) -> eqx.Module:
    """`module` with its arrays `names` (fields of `module`) replaced by zeros of the same
    shape and dtype: the output coefficients of a layer that starts as the identity."""
    return eqx.tree_at(lambda m: tuple(getattr(m, n) for n in names), module,
                       tuple(jnp.zeros_like(getattr(module, n)) for n in names))


def _symmetry(value, dim: int) -> tuple[str | None, AbstractSymmetry | None]:
    """`(spec, object)` of the `symmetry=` argument of a model on an even `dim`."""
    group = resolve_symmetry(value, dim // 2)
    return (None if group is None else group.spec), group


def stacked_layers(make: Callable, n_layers: int, key: PRNGKeyArray, dtype) -> eqx.Module:
    """The layers `make(k, dtype)` for `n_layers` keys `k` split from `key`, stacked along
    a leading axis (one `lax.scan` runs them); `dtype=None` is JAX's default float."""
    dtype = float_dtype(dtype)
    return stack_modules([make(k, dtype) for k in jax.random.split(key, n_layers)])


class AbstractStackedSympNet(AbstractSymmetrisableIntegrator):
    """A symplectic stack of `n_layers` layers of one kind, run as one scan, optionally
    symmetrised; `layer(i)` is the `i`-th layer."""

    structure: ClassVar[str] = "symplectic"

    layers: eqx.AbstractVar[eqx.Module]
    n_layers: eqx.AbstractVar[int]

    def layer(self, i: int):
        """The `i`-th layer (applied `i`-th, counting from 0) as an ordinary layer."""
        return index_stack(self.layers, i, self.n_layers)

    def _forward(self, z, h):
        return scan_stack(self.layers, z, step_size(h, z.dtype), False)

    def _backward(self, z, h):
        return scan_stack(self.layers, z, step_size(h, z.dtype), True)


class GSympNet(AbstractSymmetrisableIntegrator):
    r"""Gradient SympNet: `n_layers` gradient layers, alternating Q and P.

    $$\Phi_\theta = G_{n_\text{layers}} \circ \cdots \circ G_2 \circ G_1,$$

    where $G_1$ is a [`GradientLayerQ`][geomlearn.layers.GradientLayerQ] when `init_upper`
    (else a [`GradientLayerP`][geomlearn.layers.GradientLayerP]) and the types alternate. Each
    $G_i$ is symplectic for every parameter value and step size, hence so is $\Phi_\theta$.
    G-SympNets are universal approximators of symplectic maps (Jin, Zhang, Zhu, Tang,
    Karniadakis, *SympNets*, Neural Networks 132, 2020). The paper's pendulum network is
    `GSympNet(2, n_layers=5, width=30, activation="sigmoid")` (5 gradient layers of
    width 30, 450 parameters).

    **Parameters** (`dim = 2n`, `width = w`): $n_\text{layers}\cdot w\,(n + 2)$.

    **Arguments:**

    - `dim`: the phase-space dimension `2n` (even; odd raises `ValueError`).
    - `n_layers`: the number of gradient layers, `≥ 1` (default 2).
    - `width`: the hidden width of every gradient layer, `≥ 1`; `None` (default) means
      `dim`. The resolved value is stored.
    - `activation`: a callable or a name (default `jnp.tanh`).
    - `init_upper`: start with a Q-layer (`True`, default) or a P-layer.
    - `symmetric`: build the reversible composition $R\,\Phi_{h/2}^{-1} R\,\Phi_{h/2}$
      (see "Symmetric compositions" in the module documentation; default `False`).
    - `identity_init`: start as exactly the identity map, every layer's $a = 0$ (module
      documentation; default `False`).
    - `symmetry`: `None` (default) or a symmetry of `geomlearn.symmetries` (or its spec
      string): every potential is then a function of its invariant features, and the
      model conserves its momentum map for every parameter value, `symmetric=True`
      included. Stored as its `spec` in `symmetry`, the object in `group`.
    - `key`: a JAX PRNG key (keyword-only); `dtype`: the parameter dtype.

    **Call:** `model(z, h=None)` on one point `(dim,)`; `model.inverse(z, h=None)` is the
    exact inverse. Returns `z`'s shape and dtype.

    ```python
    model = GSympNet(2, n_layers=4, width=16, key=jax.random.PRNGKey(0))
    z1 = model(jnp.array([1.0, 0.0]), 0.1)
    ```
    """

    structure: ClassVar[str] = "symplectic"
    inference: ClassVar[AbstractInferenceForm] = GradientShears()

    layers: tuple[GradientLayerQ | GradientLayerP, ...]
    dim: int = eqx.field(static=True)
    n_layers: int = eqx.field(static=True)
    width: int = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)
    init_upper: bool = eqx.field(static=True)
    symmetric: bool = eqx.field(static=True)
    identity_init: bool = eqx.field(static=True)
    symmetry: str | None = eqx.field(static=True)
    group: AbstractSymmetry | None = eqx.field(static=True)
    symmetry_field: ClassVar[str] = "group"

    def __init__(
        self,
        dim: int,
        *,
        n_layers: int = 2,
        width: int | None = None,
        activation: Callable | str = jnp.tanh,
        init_upper: bool = True,
        symmetric: bool = False,
        identity_init: bool = False,
        symmetry: AbstractSymmetry | str | None = None,
        key: PRNGKeyArray,
        dtype=None,
    ):
        self.dim = check_even("dim", dim)
        self.n_layers = check_int("n_layers", n_layers, minimum=1)
        self.width = self.dim if width is None else check_int("width", width, minimum=1)
        resolve_activation(activation)
        self.activation = activation
        self.init_upper = check_bool("init_upper", init_upper)
        self.symmetric = check_bool("symmetric", symmetric)
        self.identity_init = check_bool("identity_init", identity_init)
        self.symmetry, self.group = _symmetry(symmetry, self.dim)
        keys = jax.random.split(key, self.n_layers)
        layers = tuple(
            alternate(GradientLayerQ, GradientLayerP, i, init_upper)(
                self.dim, self.width, activation, key=k, dtype=dtype, symmetry=self.group
            )
            for i, k in enumerate(keys)
        )
        self.layers = tuple(_zeroed(layer, "a") for layer in layers) if self.identity_init else layers


    def _forward(self, z, h):
        for layer in self.layers:  # heterogeneous (Q, P, Q, ...): unrolled at trace time
            z = layer(z, h)
        return z

    def _backward(self, z, h):
        for layer in reversed(self.layers):
            z = layer.inverse(z, h)
        return z


class LASympNet(AbstractSymmetrisableIntegrator):
    r"""Linear–activation SympNet: linear modules alternating with activation layers.

    $$\Phi_\theta = \ell_{L} \circ N_{L-1} \circ \ell_{L-1} \circ \cdots \circ N_1
      \circ \ell_1, \qquad L = n_\text{layers},$$

    following Jin, Zhang, Zhu, Tang, Karniadakis, *SympNets*, Neural Networks 132 (2020):

    - a **linear module** $\ell_i(z) = L^{(i)}_{m} \circ \cdots \circ L^{(i)}_1(z) + h\,
      b_i$ is `n_linear` $= m$ symmetric linear shears
      ([`LinearLayerQ`][geomlearn.layers.LinearLayerQ] /
      [`LinearLayerP`][geomlearn.layers.LinearLayerP], alternating, starting with Q when
      `init_upper`) followed by a bias $b_i \in \mathbb{R}^{2n}$ (a translation: symplectic);
    - an **activation layer** $N_i$ is an
      [`ActivationLayerQ`][geomlearn.layers.ActivationLayerQ] /
      [`ActivationLayerP`][geomlearn.layers.ActivationLayerP]; they alternate, $N_1$ a Q-layer
      when `init_upper`.

    `n_layers` counts the linear modules (`n_layers - 1` activation layers; none capped);
    the defaults are the paper's pendulum LA-SympNet (with `activation="sigmoid"`).

    **Parameters** (`dim = 2n`):
    $n_\text{layers}\big(n_\text{linear}\,\tfrac{n(n+1)}{2} + 2n\big) + (n_\text{layers} - 1)\,n$.

    **Arguments:** `dim`, the phase-space dimension `2n` (even), and

    - `n_layers`, `n_linear`: linear modules and shears per module, `≥ 1` (defaults 3, 2).
    - `activation`: a callable or a name (default `jnp.tanh`).
    - `init_upper`: whether each module's first shear and the first activation layer are
      Q-layers (default `True`); `symmetric`, `identity_init`: build the reversible
      composition; start as the identity, $S = a = 0$ (module docs; defaults `False`).
    - `key`: a JAX PRNG key (keyword-only); `dtype`: the parameter dtype (zero biases).

    **Call:** `model(z, h=None)` on one point `(dim,)` (`h` scales every shear and the
    biases); `model.inverse(z, h=None)` is the exact inverse.

    ```python
    model = LASympNet(2, activation="sigmoid", key=jax.random.PRNGKey(0))
    model(jnp.array([1.0, 0.0]))
    ```
    """

    structure: ClassVar[str] = "symplectic"
    inference: ClassVar[AbstractInferenceForm] = LinearActivationShears()

    linear_layers: tuple[tuple[LinearLayerQ | LinearLayerP, ...], ...]
    biases: Float[Array, "n_layers dim"]
    activation_layers: tuple[ActivationLayerQ | ActivationLayerP, ...]
    dim: int = eqx.field(static=True)
    n_layers: int = eqx.field(static=True)
    n_linear: int = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)
    init_upper: bool = eqx.field(static=True)
    symmetric: bool = eqx.field(static=True)
    identity_init: bool = eqx.field(static=True)

    def __init__(
        self,
        dim: int,
        *,
        n_layers: int = 3,
        n_linear: int = 2,
        activation: Callable | str = jnp.tanh,
        init_upper: bool = True,
        symmetric: bool = False,
        identity_init: bool = False,
        key: PRNGKeyArray,
        dtype=None,
    ):
        self.dim = check_even("dim", dim)
        self.n_layers = check_int("n_layers", n_layers, minimum=1)
        self.n_linear = check_int("n_linear", n_linear, minimum=1)
        resolve_activation(activation)
        self.activation = activation
        self.init_upper = check_bool("init_upper", init_upper)
        self.symmetric = check_bool("symmetric", symmetric)
        self.identity_init = check_bool("identity_init", identity_init)
        dtype = float_dtype(dtype)
        lin_key, act_key = jax.random.split(key)
        lin_keys = jax.random.split(lin_key, (self.n_layers, self.n_linear))
        self.linear_layers = tuple(
            tuple(
                alternate(LinearLayerQ, LinearLayerP, j, init_upper)(
                    self.dim, key=lin_keys[i, j], dtype=dtype
                )
                for j in range(self.n_linear)
            )
            for i in range(self.n_layers)
        )
        self.biases = jnp.zeros((self.n_layers, self.dim), dtype)
        act_keys = jax.random.split(act_key, self.n_layers - 1)
        self.activation_layers = tuple(
            alternate(ActivationLayerQ, ActivationLayerP, i, init_upper)(
                self.dim, activation, key=k, dtype=dtype
            )
            for i, k in enumerate(act_keys)
        )
        if self.identity_init:  # S = 0 and a = 0: every shear, hence the model, is the identity
            self.linear_layers, self.activation_layers = (
                tuple(tuple(_zeroed(layer, "S") for layer in module) for module in self.linear_layers),
                tuple(_zeroed(layer, "a") for layer in self.activation_layers))

    def _forward(self, z, h):
        step = step_size(h, z.dtype)
        biases = self.biases.astype(z.dtype)
        for i, module in enumerate(self.linear_layers):
            for layer in module:
                z = layer(z, h)
            z = z + scale_by_step(biases[i], step)
            if i < self.n_layers - 1:
                z = self.activation_layers[i](z, h)
        return z

    def _backward(self, z, h):
        step = step_size(h, z.dtype)
        biases = self.biases.astype(z.dtype)
        for i in reversed(range(self.n_layers)):
            if i < self.n_layers - 1:
                z = self.activation_layers[i].inverse(z, h)
            z = z - scale_by_step(biases[i], step)
            for layer in reversed(self.linear_layers[i]):
                z = layer.inverse(z, h)
        return z


class HenonNet(AbstractStackedSympNet):
    r"""Hénon network: a composition of `n_layers` [`HenonLayer`][geomlearn.layers.HenonLayer]s.

    $$\Phi_\theta = H_h^4[V_{L}, \eta_{L}] \circ \cdots \circ H_h^4[V_1, \eta_1],
      \qquad L = n_\text{layers},$$

    each layer four iterations of the Hénon-like map $(x, y) \mapsto (y + \eta,
    -x + h\nabla V(y))$ with its own potential network $V_i$ and shift $\eta_i$ (Burby,
    Tang and Maulik, *Fast neural Poincaré maps for toroidal magnetic fields*, Plasma
    Phys. Control. Fusion 63, 2020). Symplectic for every parameter value and every `h`;
    `h` scales the potentials' gradients (see [`HenonLayer`][geomlearn.layers.HenonLayer]
    for why this gives the identity at $h = 0$).

    The layers are identical in shape, so their parameters are **stacked** along a leading
    axis of length `n_layers` (the field `layers` is one `HenonLayer` whose arrays have
    that extra axis) and the stack runs as one `lax.scan`. `model.layer(i)` returns the
    `i`-th layer as an ordinary `HenonLayer`.

    **Parameters** (`dim = 2n`, `width = w`): $n_\text{layers}\,\big(w(n + 2) + n\big)$.

    **Arguments:**

    - `dim`: the phase-space dimension `2n` (even; odd raises `ValueError`).
    - `n_layers`: the number of Hénon layers, `≥ 1`.
    - `width`: the hidden width of each potential network, `≥ 1`.
    - `activation`: a callable or a name (default `jnp.tanh`; should be differentiable).
    - `symmetric`, `identity_init`: build the reversible composition; start as exactly
      the identity, $a = 0$ and $b \sim \mathcal{N}(0, 1)$ (module docs; defaults `False`).
    - `symmetry`: `None` (default) or a symmetry of `geomlearn.symmetries`: its momentum
      map is then conserved exactly; stored as for `GSympNet` (`symmetry`, `group`).
    - `key`: a JAX PRNG key (keyword-only); `dtype`: the parameter dtype.

    **Call:** `model(z, h=None)` on one point `(dim,)`; `model.inverse(z, h=None)` is the
    exact inverse.

    ```python
    model = HenonNet(4, n_layers=3, width=10, key=jax.random.PRNGKey(0))
    z = jnp.ones(4)
    model.inverse(model(z, 0.5), 0.5)   # == z
    ```
    """

    structure: ClassVar[str] = "symplectic"
    inference: ClassVar[AbstractInferenceForm] = HenonLayers()

    layers: HenonLayer
    dim: int = eqx.field(static=True)
    n_layers: int = eqx.field(static=True)
    width: int = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)
    symmetric: bool = eqx.field(static=True)
    identity_init: bool = eqx.field(static=True)
    symmetry: str | None = eqx.field(static=True)
    group: AbstractSymmetry | None = eqx.field(static=True)
    symmetry_field: ClassVar[str] = "group"

    def __init__(
        self,
        dim: int,
        *,
        n_layers: int,
        width: int,
        activation: Callable | str = jnp.tanh,
        symmetric: bool = False,
        identity_init: bool = False,
        symmetry: AbstractSymmetry | str | None = None,
        key: PRNGKeyArray,
        dtype=None,
    ):
        self.dim, self.n_layers, self.width, self.activation, self.symmetric = stack_options(
            dim, n_layers, width, activation, symmetric)
        self.identity_init = check_bool("identity_init", identity_init)
        self.symmetry, self.group = _symmetry(symmetry, self.dim)
        if self.identity_init:
            key, offset_key = jax.random.split(key)
        layers = stacked_layers(
            lambda k, dt: HenonLayer(self.dim, self.width, activation, key=k, dtype=dt, symmetry=self.group),
            self.n_layers, key, dtype)
        if self.identity_init:  # a = 0: the identity; b drawn: a non-zero gradient there
            b = jax.random.normal(offset_key, layers.b.shape, layers.b.dtype)
            layers = eqx.tree_at(lambda m: (m.a, m.b), layers, (jnp.zeros_like(layers.a), b))
        self.layers = layers

