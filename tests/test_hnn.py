"""Hamiltonian neural networks (geomlearn.models.hnn)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn

from _helpers import n_params, normal, randomize
from geomlearn.integrators import ImplicitMidpoint
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
            dim=4, width=WIDTH, depth=2, activation="softplus", dt=None, dtype=param_dtype,
            symmetry=None,
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


def _even_float32_network():
    """A float32 network (dim 4, width 16, depth 1) whose energy is even — hidden units in
    pairs `w`, `-w` with equal biases and output weights — so that `0` is an equilibrium,
    an elliptic one (H's Hessian there is definite, checked): orbits near it stay near."""
    rng = np.random.default_rng(7)
    w, b, c = rng.normal(size=(8, 4)), rng.normal(size=8), rng.normal(size=(1, 8))
    weights = (np.concatenate([w, -w]), np.concatenate([c, c], axis=1))
    biases = (np.concatenate([b, b]), np.zeros(1))
    model = HamiltonianNeuralNetwork(4, width=16, depth=1, key=jax.random.PRNGKey(0),
                                     dtype=jnp.float32)
    as32 = lambda arrays: tuple(jnp.asarray(a, jnp.float32) for a in arrays)
    model = eqx.tree_at(lambda m: (m.weights, m.biases), model, (as32(weights), as32(biases)))
    hessian = jax.hessian(model.hamiltonian)(jnp.zeros(4, jnp.float32))
    curvature = np.linalg.eigvalsh(np.asarray(hessian, np.float64))
    assert curvature[0] > 0.1
    return model


@eqx.filter_jit
def _midpoint_steps(model, states, dt):
    return jax.vmap(lambda z: ImplicitMidpoint().solve(model.vector_field, z, dt))(states)


@eqx.filter_jit
def _midpoint_step(model, z, dt):
    return ImplicitMidpoint().solve(model.vector_field, z, dt)


def test_two_orbits_rolled_out_together_get_the_verdicts_and_states_each_gets_alone():
    """In float32, an orbit near the learned equilibrium and one far from it. The
    fixed-point iteration's test was relative to the state's size, which near the
    equilibrium is below the field's rounding: the verdict turned on that rounding, which
    differs between a batch's kernels and one state's, so an orbit near the equilibrium
    failed, alone or only in a batch. The test now has an absolute floor (a unit size)."""
    model = _even_float32_network()
    rng = np.random.default_rng(107)
    directions = rng.normal(size=(2, 4))
    directions /= np.max(np.abs(directions), axis=1, keepdims=True)
    starts = jnp.asarray(directions * np.array([[4.743e-3], [0.5]]), jnp.float32)
    together = np.asarray(geomlearn.iterate(model, starts, 300, dt=0.1))
    alone = np.stack([np.asarray(geomlearn.iterate(model, z, 300, dt=0.1)) for z in starts])
    assert np.all(np.isfinite(together)) and np.all(np.isfinite(alone))
    # each step is solved to 128·eps·(|z| + h|K| + 1) of its root: one step of the batch
    # and the same step taken alone agree to 128·eps, compared step by step (over many
    # steps the orbits' phases drift apart by rounding, as any two float32 computations
    # of them do, by an amount that depends on the CPU's kernels)
    dt32 = jnp.asarray(0.1, jnp.float32)
    for orbit in together:
        for k in range(49):
            step, ok = _midpoint_step(model, jnp.asarray(orbit[k]), dt32)
            assert bool(ok)
            np.testing.assert_allclose(orbit[k + 1], np.asarray(step), rtol=0,
                                       atol=128 * 2**-23)
    # one step from states at every distance from the equilibrium: batched and alone alike
    amplitude = np.geomspace(1e-6, 1.0, 40)
    states = jnp.asarray(normal(np.random.default_rng(3), (40, 4)) * amplitude[:, None],
                         jnp.float32)
    dt = jnp.asarray(0.1, jnp.float32)
    _, batched = _midpoint_steps(model, states, dt)
    alone = np.array([bool(_midpoint_step(model, z, dt)[1]) for z in states])
    assert np.asarray(batched).all() and alone.all()
    # beside a state whose iteration runs to its limit and fails, a state keeps its own
    # verdict and step: vmap's loop runs on, but each state stops where its own test does
    pair = jnp.stack([states[-5], states[-5]])
    steps = jnp.asarray([0.1, 5.0], jnp.float32)
    solve = jax.vmap(lambda z, h: ImplicitMidpoint().solve(model.vector_field, z, h))
    y, verdicts = eqx.filter_jit(solve)(pair, steps)
    assert np.asarray(verdicts).tolist() == [True, False]
    np.testing.assert_allclose(y[0], _midpoint_step(model, states[-5], dt)[0], rtol=0,
                               atol=128 * 2**-23)
    # negative control: a step too large for the iteration to contract fails, batched and alone
    steep = jax.tree_util.tree_map(lambda a: 10.0 * a if a.ndim == 2 else a, model)
    big = jnp.asarray(2.0, jnp.float32)
    assert not np.asarray(_midpoint_steps(steep, states[-5:], big)[1]).any()
    assert not any(bool(_midpoint_step(steep, z, big)[1]) for z in states[-5:])
    # its error is one line: the model, the solve, dt, the dtype, and what to try
    with pytest.raises(Exception) as info:
        jax.block_until_ready(steep.step(states[-1], steep.task(dt=2.0)))
    (line,) = [ln for ln in str(info.value).splitlines() if "did not converge" in ln]
    for text in ("HamiltonianNeuralNetwork", "implicit-midpoint", "dt=2", "float32", "float64",
                 "smaller step at prediction", "different model"):
        assert text in line
