r"""Hamiltonian neural networks (Greydanus, Dzamba and Yosinski, 2019)."""

from __future__ import annotations

import copy
import math
from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp

from .._activations import resolve_activation
from .._typing import Array, Float, PRNGKeyArray
from .._nn import check_point
from .._validation import check_even, check_int, check_stored_dt, float_dtype
from ..geometry import symplectic_matrix
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

    $H_\theta$ is a multilayer perceptron with `depth` hidden layers of `width` units,

    $$H_\theta(z) = w_{\text{out}}^\top\, \sigma\big(W_{\text{depth}} \cdots
      \sigma(W_1 z + b_1) \cdots + b_{\text{depth}}\big) + b_{\text{out}},$$

    and the model's dynamics is Hamilton's equation
    $\dot z = X_\theta(z) = \mathbb{J}\,\nabla H_\theta(z)$ (`jax.grad`, $\mathbb{J}$ from
    [`symplectic_matrix`][geomlearn.geometry.symplectic_matrix]; Greydanus, Dzamba,
    Yosinski, *Hamiltonian Neural Networks*, NeurIPS 2019). For every $\theta$ the field
    is divergence-free and conserves $H_\theta$ exactly, and its exact flow is symplectic.

    **`structure` is `"symplectic"`**: the iterated map (of `iterate`, `evaluate` and
    `geomlearn check`) is one implicit-midpoint step of the learned field, solved to
    round-off — symplectic for every $\theta$ (see
    [`AbstractHamiltonianModel`][geomlearn.models.AbstractHamiltonianModel]).

    **Parameters** (`dim = 2n = d`, `width = w`, `depth = k ≥ 1`):
    $d w + w + (k - 1)(w^2 + w) + w + 1$; Glorot normal weights, zero biases.

    **Arguments:** `dim`, the phase-space dimension `2n` (even), and

    - `width`, `depth`: the hidden width `w ≥ 1` and the number of hidden layers `k ≥ 1`.
    - `activation`: a callable or a name (default `jnp.tanh`), differentiable.
    - `dt`: the time step of the iterated map, a finite number `> 0`, or `None` (the
      default: given by the data or the rollout's `dt=`, which take precedence). It is
      stored in the model's file, so a loaded network rolls out with the step it was
      trained for; `with_dt(dt)` returns a copy with another one.
    - `key`: a JAX PRNG key (keyword-only); `dtype`: the parameter dtype.

    **Methods:** `hamiltonian(z)`, the scalar $H_\theta(z)$, and `vector_field(z)`,
    $\mathbb{J}\nabla H_\theta(z)$, in `z`'s dtype for one point `z` `(dim,)` (vmap batches).

    ```python
    hnn = HamiltonianNeuralNetwork(2, width=32, depth=2, key=jax.random.PRNGKey(0))
    z = jnp.array([1.0, 0.0])
    hnn.hamiltonian(z), hnn.vector_field(z)
    ```
    """

    weights: tuple[Float[Array, "out in"], ...]
    biases: tuple[Float[Array, " out"], ...]
    dim: int = eqx.field(static=True)
    width: int = eqx.field(static=True)
    depth: int = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)
    dt: float | None = eqx.field(static=True)

    def __init__(
        self,
        dim: int,
        *,
        width: int,
        depth: int,
        activation: Callable | str = jnp.tanh,
        dt: float | None = None,
        key: PRNGKeyArray,
        dtype=None,
    ):
        self.dim = check_even("dim", dim)
        self.dt = check_stored_dt(dt)
        self.width = check_int("width", width, minimum=1)
        self.depth = check_int("depth", depth, minimum=1)
        resolve_activation(activation)
        self.activation = activation
        self.weights, self.biases = energy_mlp(self.dim, self.width, self.depth, key=key,
                                               dtype=float_dtype(dtype))

    def with_dt(self, dt: float | None) -> HamiltonianNeuralNetwork:
        """A copy with the time step `dt` (stored in its file; see `dt`)."""
        new = copy.copy(self)
        object.__setattr__(new, "dt", check_stored_dt(dt))
        return new

    def hamiltonian(self, z: Float[Array, " dim"]) -> Float[Array, ""]:
        r"""The learned energy $H_\theta(z)$ at one point `z` of shape `(dim,)`."""
        check_point(type(self).__name__, z, self.dim)
        dtype = z.dtype
        sigma = resolve_activation(self.activation)
        x = z
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
