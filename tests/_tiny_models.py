"""Tiny models of each kind, used by the training, rollout, evaluation and io tests.

They follow the model conventions (every constructor argument stored in a field of the
same name, `structure` class variable) so the training machinery can be tested
independently of the production models; the tests also run the production models.
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from geomlearn._validation import float_dtype
from geomlearn.io import register
from geomlearn.models import (
    AbstractFeedForwardIntegrator,
    AbstractHamiltonianModel,
    AbstractTransformerIntegrator,
)


@register
class TinyShear(AbstractFeedForwardIntegrator):
    """Two gradient shears q += Kᵀ(a ⊙ tanh(K p + b)), then p likewise: symplectic."""

    structure: ClassVar[str] = "symplectic"
    dim: int = eqx.field(static=True)
    width: int = eqx.field(static=True)
    K: jax.Array
    a: jax.Array
    b: jax.Array

    def __init__(self, dim, *, width=4, key, dtype=None):
        dtype = float_dtype(dtype)
        n = dim // 2
        self.dim, self.width = dim, width
        k1, k2, k3 = jax.random.split(key, 3)
        self.K = jax.random.normal(k1, (2, width, n), dtype) * 0.5
        self.a = jax.random.normal(k2, (2, width), dtype) * 0.1
        self.b = jax.random.normal(k3, (2, width), dtype) * 0.1

    def __call__(self, z, h=None):
        n = self.dim // 2
        K, a, b = (x.astype(z.dtype) for x in (self.K, self.a, self.b))
        q, p = z[:n], z[n:]
        q = q + K[0].T @ (a[0] * jnp.tanh(K[0] @ p + b[0]))
        p = p + K[1].T @ (a[1] * jnp.tanh(K[1] @ q + b[1]))
        return jnp.concatenate([q, p])


@register
class TinyResidual(AbstractFeedForwardIntegrator):
    """z + W₂ tanh(W₁ z + b): unconstrained."""

    structure: ClassVar[str] = "none"
    dim: int = eqx.field(static=True)
    width: int = eqx.field(static=True)
    W1: jax.Array
    W2: jax.Array
    b: jax.Array

    def __init__(self, dim, *, width=8, key, dtype=None):
        dtype = float_dtype(dtype)
        self.dim, self.width = dim, width
        k1, k2, k3 = jax.random.split(key, 3)
        self.W1 = jax.random.normal(k1, (width, dim), dtype) * 0.5
        self.W2 = jax.random.normal(k2, (dim, width), dtype) * 0.1
        self.b = jax.random.normal(k3, (width,), dtype) * 0.1

    def __call__(self, z, h=None):
        W1, W2, b = (x.astype(z.dtype) for x in (self.W1, self.W2, self.b))
        return z + W2 @ jnp.tanh(W1 @ z + b)


@register
class TinyWindow(AbstractTransformerIntegrator):
    """Z + tanh(Z W + mean_t(Z) U + b) V on a window of any length: unconstrained."""

    structure: ClassVar[str] = "none"
    dim: int = eqx.field(static=True)
    width: int = eqx.field(static=True)
    seq_length: int | None = eqx.field(static=True)
    W: jax.Array
    U: jax.Array
    V: jax.Array
    b: jax.Array

    def __init__(self, dim, *, width=8, seq_length=None, key, dtype=None):
        dtype = float_dtype(dtype)
        self.dim, self.width, self.seq_length = dim, width, seq_length
        k1, k2, k3, k4 = jax.random.split(key, 4)
        self.W = jax.random.normal(k1, (dim, width), dtype) * 0.5
        self.U = jax.random.normal(k2, (dim, width), dtype) * 0.5
        self.V = jax.random.normal(k3, (width, dim), dtype) * 0.1
        self.b = jax.random.normal(k4, (width,), dtype) * 0.1

    def __call__(self, Z):
        W, U, V, b = (x.astype(Z.dtype) for x in (self.W, self.U, self.V, self.b))
        context = jnp.mean(Z, axis=0) @ U + b
        return Z + jnp.tanh(Z @ W + context[None, :]) @ V


@register
class TinyHamiltonian(AbstractHamiltonianModel):
    """H(z) = ½ c |z|² + Σ a ⊙ tanh(W z + b), vector field J∇H (no stored time step)."""

    structure: ClassVar[str] = "symplectic"
    dt: ClassVar[None] = None
    dim: int = eqx.field(static=True)
    width: int = eqx.field(static=True)
    c: jax.Array
    W: jax.Array
    a: jax.Array
    b: jax.Array

    def __init__(self, dim, *, width=8, key, dtype=None):
        dtype = float_dtype(dtype)
        self.dim, self.width = dim, width
        k1, k2, k3 = jax.random.split(key, 3)
        self.c = jnp.ones((), dtype)
        self.W = jax.random.normal(k1, (width, dim), dtype) * 0.5
        self.a = jax.random.normal(k2, (width,), dtype) * 0.1
        self.b = jax.random.normal(k3, (width,), dtype) * 0.1

    def hamiltonian(self, z):
        c, W, a, b = (x.astype(z.dtype) for x in (self.c, self.W, self.a, self.b))
        return 0.5 * c * jnp.sum(z * z) + jnp.sum(a * jnp.tanh(W @ z + b))

    def vector_field(self, z):
        g = jax.grad(self.hamiltonian)(z)
        n = self.dim // 2
        return jnp.concatenate([g[n:], -g[:n]])
