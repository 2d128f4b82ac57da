r"""Hamiltonian neural networks (Greydanus, Dzamba and Yosinski, 2019)."""

from __future__ import annotations

import copy
import math
from typing import Callable, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from .._activations import resolve_activation
from .._typing import Array, Float, PRNGKeyArray
from .._nn import check_point
from .._validation import check_even, check_int, check_stored_dt, float_dtype
from ..geometry import symplectic_matrix
from ..symmetries import AbstractSymmetry, resolve_symmetry
from ._integrators import AbstractHamiltonianModel

__all__ = ["HamiltonianNeuralNetwork", "energy_mlp"]


def energy_mlp(dim: int, width: int, depth: int, *, key: PRNGKeyArray, dtype, output_scale: float = 1.0):
    r"""`(weights, biases)` of a scalar perceptron $\mathbb{R}^{dim} \to \mathbb{R}$ with
    `depth` hidden layers of `width` units: Glorot normal weights
    $\sqrt{2/(\text{fan}_\text{in} + \text{fan}_\text{out})}\,\mathcal{N}(0, 1)$ (the output
    layer's times `output_scale`) and zero biases, in `dtype`."""
    sizes = [dim] + [width] * depth + [1]
    keys = jax.random.split(key, len(sizes) - 1)
    scales = [1.0] * (len(sizes) - 2) + [output_scale]
    weights = tuple(
        s * math.sqrt(2.0 / (fan_in + fan_out)) * jax.random.normal(k, (fan_out, fan_in), dtype)
        for k, s, fan_in, fan_out in zip(keys, scales, sizes[:-1], sizes[1:])
    )
    return weights, tuple(jnp.zeros((fan_out,), dtype) for fan_out in sizes[1:])


class HamiltonianNeuralNetwork(AbstractHamiltonianModel):
    r"""A learned Hamiltonian $H_\theta : \mathbb{R}^{2n} \to \mathbb{R}$ and its vector field.

    $H_\theta(z) = w_{\text{out}}^\top \sigma\big(W_k \cdots \sigma(W_1 \phi(z) + b_1)
    \cdots + b_k\big) + b_{\text{out}}$, a perceptron of $k$ = `depth` hidden layers of
    `width` units, with $\phi(z) = z$, or with a `symmetry` $\phi(q, p) = (f(q), g(p))$,
    its invariant `features` and `momentum_features` (invariant, not all invariants:
    mixed ones such as $q \cdot p$ are not among them). The dynamics is $\dot z =
    \mathbb{J}\nabla H_\theta(z)$ (Greydanus, Dzamba, Yosinski, *Hamiltonian Neural
    Networks*, NeurIPS 2019); for every $\theta$ it conserves $H_\theta$. **`structure`
    is `"symplectic"`**: the iterated map is one implicit-midpoint step of the field,
    solved to round-off ([`AbstractHamiltonianModel`][geomlearn.models.AbstractHamiltonianModel]).

    **Symmetry.** $H_\theta \circ g = H_\theta$ for every group element $g$ and every
    $\theta$, so the momentum map $\mu$ is a first integral of the field (Noether). Each
    $\mu$ here is linear or quadratic in $z$, and the implicit midpoint rule keeps every
    quadratic first integral (Hairer, Lubich, Wanner, *Geometric Numerical Integration*,
    Thm IV.2.1): the rollout conserves $\mu$ to the stage solve's round-off and commutes
    with the group. `kept_symmetry()` returns the group.

    **Parameters:** $m w + w + (k - 1)(w^2 + w) + w + 1$ for $m$ inputs ($m = $ `dim`,
    or the number of features); Glorot normal weights, zero biases.

    **Arguments:** `dim`, the phase-space dimension `2n` (even), and

    - `width`, `depth`: the hidden width `w ≥ 1` and the number of hidden layers `k ≥ 1`.
    - `activation`: a callable or a name (default `jnp.tanh`), differentiable.
    - `dt`: the step of the iterated map (`> 0`), or `None` (default: the data's or the
      rollout's `dt=`, which take precedence); stored in the file; `with_dt(dt)` copies.
    - `symmetry`: `None` (default), a symmetry of `geomlearn.symmetries` or its spec;
      stored as its `spec` in `symmetry`, the object in `group`.
    - `key`: a JAX PRNG key (keyword-only); `dtype`: the parameter dtype.

    **Methods:** `hamiltonian(z)` and `vector_field(z)` $= \mathbb{J}\nabla H_\theta(z)$,
    in `z`'s dtype, for one point `z` `(dim,)` (vmap batches).

    ```python
    hnn = HamiltonianNeuralNetwork(4, width=32, depth=2, symmetry="rotation:0,1",
                                   key=jax.random.PRNGKey(0))   # H_θ(|q|², |p|²): L kept
    ```
    """

    weights: tuple[Float[Array, "out in"], ...]
    biases: tuple[Float[Array, " out"], ...]
    dim: int = eqx.field(static=True)
    width: int = eqx.field(static=True)
    depth: int = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)
    dt: float | None = eqx.field(static=True)
    symmetry: str | None = eqx.field(static=True)
    group: AbstractSymmetry | None = eqx.field(static=True)
    symmetry_field: ClassVar[str] = "group"

    def __init__(
        self,
        dim: int,
        *,
        width: int,
        depth: int,
        activation: Callable | str = jnp.tanh,
        dt: float | None = None,
        symmetry: AbstractSymmetry | str | None = None,
        key: PRNGKeyArray,
        dtype=None,
    ):
        self.dim = check_even("dim", dim)
        self.dt = check_stored_dt(dt)
        self.width = check_int("width", width, minimum=1)
        self.depth = check_int("depth", depth, minimum=1)
        resolve_activation(activation)
        self.activation = activation
        self.group = resolve_symmetry(symmetry, self.dim // 2)
        self.symmetry = None if self.group is None else self.group.spec
        n = self.dim // 2
        inputs = self.dim if self.group is None else (
            self.group.feature_count(n) + self.group.feature_count(n, momentum=True))
        self.weights, self.biases = energy_mlp(inputs, self.width, self.depth, key=key,
                                               dtype=float_dtype(dtype))

    def with_dt(self, dt: float | None) -> HamiltonianNeuralNetwork:
        """A copy with the time step `dt` (stored in its file; see `dt`)."""
        new = copy.copy(self)
        object.__setattr__(new, "dt", check_stored_dt(dt))
        return new

    def _inputs(self, z):
        r"""$\phi(z)$: `z` itself, or the symmetry's features of `q` then of `p`."""
        if self.group is None:
            return z
        n = self.dim // 2
        return jnp.concatenate([self.group.features(z[:n]), self.group.momentum_features(z[n:])])

    def hamiltonian(self, z: Float[Array, " dim"]) -> Float[Array, ""]:
        r"""The learned energy $H_\theta(z)$ at one point `z` of shape `(dim,)`."""
        check_point(type(self).__name__, z, self.dim)
        dtype = z.dtype
        sigma = resolve_activation(self.activation)
        x = self._inputs(z)
        for W, b in zip(self.weights[:-1], self.biases[:-1]):
            x = sigma(W.astype(dtype) @ x + b.astype(dtype))
        out = self.weights[-1].astype(dtype) @ x + self.biases[-1].astype(dtype)
        return out[0]

    def vector_field(self, z: Float[Array, " dim"]) -> Float[Array, " dim"]:
        r"""Hamilton's vector field $\mathbb{J}\,\nabla H_\theta(z)$, i.e.
        $(\dot q, \dot p) = (\partial H/\partial p, -\partial H/\partial q)$."""
        check_point(type(self).__name__, z, self.dim)
        J = symplectic_matrix(self.dim // 2, dtype=z.dtype)
        return J @ jax.grad(self.hamiltonian)(z)
