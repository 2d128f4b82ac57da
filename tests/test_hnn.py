"""Hamiltonian neural networks (geomlearn.models.hnn)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn

from _helpers import n_params, normal, randomize
from geomlearn.models import AbstractHamiltonianModel, HamiltonianNeuralNetwork

RNG_SEED = 161803  # the `rng` fixture's seed (tests/conftest.py)


WIDTH = 5  # one hidden width throughout: each new shape compiles the random initialiser


def numpy_energy_and_gradient(model, z):
    """H(z) and ∇H(z) of a tanh MLP, forward and backward pass written out in NumPy."""
    Ws = [np.asarray(W) for W in model.weights]
    bs = [np.asarray(b) for b in model.biases]
    activations = [np.asarray(z)]
    for W, b in zip(Ws[:-1], bs[:-1]):
        activations.append(np.tanh(W @ activations[-1] + b))
    energy = (Ws[-1] @ activations[-1] + bs[-1])[0]
    g = Ws[-1][0]
    for W, a in zip(reversed(Ws[:-1]), reversed(activations[1:])):
        g = W.T @ (g * (1.0 - a**2))
    return energy, g


def test_public_name_and_kind(key):
    assert geomlearn.HamiltonianNeuralNetwork is HamiltonianNeuralNetwork
    model = eqx.filter_eval_shape(HamiltonianNeuralNetwork, 2, width=3, depth=1, key=key())
    assert isinstance(model, AbstractHamiltonianModel)
    assert model.structure == "symplectic"  # its iterated map: a converged midpoint step


@pytest.mark.parametrize("dim,width,depth", [(2, 4, 1), (4, 3, 2), (6, 5, 3)])
def test_parameter_count(key, dim, width, depth):
    model = eqx.filter_eval_shape(
        HamiltonianNeuralNetwork, dim, width=width, depth=depth, key=key()
    )
    expected = dim * width + width + (depth - 1) * (width**2 + width) + width + 1
    assert n_params(model) == expected
    assert len(model.weights) == depth + 1


@pytest.mark.parametrize("n", [1, 2, 3])
def test_vector_field_is_J_grad_H_computed_independently(rng, key, n):
    model = randomize(HamiltonianNeuralNetwork(2 * n, width=WIDTH, depth=2, key=key()), rng)
    z = normal(rng, (2 * n,))
    energy, grad = numpy_energy_and_gradient(model, z)
    np.testing.assert_allclose(model.hamiltonian(z), energy, rtol=1e-13, atol=1e-13)
    # J∇H = (∂H/∂p, −∂H/∂q), with J = [[0, I], [−I, 0]] written out by hand
    expected = np.concatenate([grad[n:], -grad[:n]])
    np.testing.assert_allclose(model.vector_field(z), expected, rtol=1e-12, atol=1e-13)
    assert np.max(np.abs(expected)) > 1e-2


def test_divergence_free_and_energy_conserving(rng, key, tol, dtype):
    model = HamiltonianNeuralNetwork(4, width=WIDTH, depth=2, key=key(), dtype=dtype)
    model = randomize(model, rng)
    Z = normal(rng, (3, 4), dtype)

    @eqx.filter_jit
    def checks(m, Z):
        def one(z):
            divergence = jnp.trace(jax.jacfwd(m.vector_field)(z))
            laplacian = jnp.trace(jax.jacfwd(jax.grad(m.hamiltonian))(z))
            power = jnp.dot(jax.grad(m.hamiltonian)(z), m.vector_field(z))  # dH/dt along X
            return divergence, laplacian, power

        return jax.vmap(one)(Z)

    divergence, laplacian, power = checks(model, Z)
    assert divergence.dtype == dtype
    assert np.max(np.abs(divergence)) <= tol(dtype, "structure")
    assert np.max(np.abs(power)) <= tol(dtype, "structure")
    # Negative control: the gradient field ∇H (without J) has divergence ΔH ≠ 0.
    assert np.min(np.abs(laplacian)) > 1e-3


def test_jit_vmap_grad(rng, key):
    model = randomize(HamiltonianNeuralNetwork(2, width=WIDTH, depth=2, key=key()), rng)
    Z = normal(rng, (5, 2))
    np.testing.assert_allclose(
        eqx.filter_jit(lambda m, z: m.vector_field(z))(model, Z[0]), model.vector_field(Z[0]),
        rtol=0, atol=1e-14,
    )
    np.testing.assert_allclose(
        jax.vmap(model.vector_field)(Z), jnp.stack([model.vector_field(z) for z in Z]), atol=1e-14
    )
    np.testing.assert_allclose(
        jax.vmap(model.hamiltonian)(Z), jnp.stack([model.hamiltonian(z) for z in Z]), atol=1e-14
    )
    target = jnp.flip(Z, axis=1)

    def loss(m):  # fit the field to observed derivatives, the HNN training loss
        return jnp.mean((jax.vmap(m.vector_field)(Z) - target) ** 2)

    grads = jax.tree_util.tree_leaves(eqx.filter_jit(eqx.filter_grad(loss))(model))
    assert len(grads) == 6
    # the output bias does not enter the field: its gradient is exactly zero
    assert all(np.all(np.isfinite(g)) for g in grads)
    assert all(np.max(np.abs(g)) > 0 for g in grads[:-1]) and np.all(grads[-1] == 0)


def test_dtype_and_config(rng, key, dtype):
    z = normal(rng, (4,), dtype)
    for param_dtype in (jnp.float32, jnp.float64):
        model = HamiltonianNeuralNetwork(
            4, width=WIDTH, depth=2, activation="softplus", key=key(), dtype=param_dtype
        )
        assert {x.dtype for x in jax.tree_util.tree_leaves(model)} == {np.dtype(param_dtype)}
        assert model.hamiltonian(z).dtype == dtype and model.hamiltonian(z).shape == ()
        assert model.vector_field(z).dtype == dtype
        config = model.config()
        assert config == dict(
            dim=4, width=WIDTH, depth=2, activation="softplus", dt=None, dtype=param_dtype
        )
        rebuilt = eqx.filter_eval_shape(type(model), **config, key=key())
        assert jax.tree_util.tree_structure(rebuilt) == jax.tree_util.tree_structure(model)
        assert [(x.shape, x.dtype) for x in jax.tree_util.tree_leaves(rebuilt)] == [
            (x.shape, x.dtype) for x in jax.tree_util.tree_leaves(model)
        ]


def test_errors(key):
    with pytest.raises(ValueError, match="even"):
        HamiltonianNeuralNetwork(3, width=2, depth=1, key=key())
    with pytest.raises(ValueError, match="depth"):
        HamiltonianNeuralNetwork(2, width=2, depth=0, key=key())
    model = HamiltonianNeuralNetwork(2, width=2, depth=1, key=key())
    with pytest.raises(ValueError, match="last dimension 2"):
        model.hamiltonian(jnp.ones(4))
    with pytest.raises(ValueError, match="1-d"):
        model.vector_field(jnp.ones((3, 2)))
    with pytest.raises(TypeError, match="floating"):
        model.vector_field(jnp.ones(2, dtype=jnp.int32))
