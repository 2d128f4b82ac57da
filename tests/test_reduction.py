"""Model reduction: the Toda lattice and linear wave, PSD, the reduced Hamiltonian system."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn.geometry import symplectic_matrix
from geomlearn.integrators import integrate
from geomlearn.reduction import (
    PSD,
    ReducedHamiltonianSystem,
    immersion_residual,
    projection_error,
    proper_symplectic_decomposition,
    reduction_error,
    symplectic_inverse,
)
from geomlearn.systems import SYSTEMS, LinearWave, TodaLattice


@pytest.mark.parametrize("cls", [TodaLattice, LinearWave])
def test_large_systems_at_400_dims_keep_their_invariants(cls):
    system = cls()
    assert system.dim == 400 and SYSTEMS[{TodaLattice: "toda_lattice", LinearWave: "linear_wave"}[cls]] is cls
    z0 = system.default_initial_conditions(jnp.float64)
    assert z0.shape == (1, 400)
    for method in ("implicit_midpoint", "gauss_legendre4"):
        zs = integrate(system, z0[0], 0.1, 50, method=method)
        for name, inv in system.invariants.items():
            vals = jax.vmap(inv)(zs)
            assert float(jnp.max(jnp.abs(vals - vals[0]))) <= 1e-9 * max(1.0, float(jnp.abs(vals[0]))), name


def test_toda_bump_initial_condition():
    toda = TodaLattice(n_particles=200)
    z0 = np.asarray(toda.default_initial_conditions(jnp.float64)[0])
    q, p = z0[:200], z0[200:]
    assert np.all(p == 0) and q.max() == pytest.approx(1.0, abs=1e-3) and q.min() == 0.0
    xi = np.linspace(-0.5, 0.5, 200)
    assert abs(xi[np.argmax(q)] + 0.15) < 0.01  # centred at -mu/2
    np.testing.assert_allclose(float(toda.hamiltonian(jnp.asarray(z0))),
                               0.64 * np.sum(np.exp(q - np.roll(q, -1))), rtol=1e-13)


def test_wave_travels_at_speed_c():
    wave = LinearWave(n_points=100, c=0.05)
    z0 = wave.default_initial_conditions(jnp.float64)[0]
    zs = integrate(wave, z0, 0.05, 200, method="gauss_legendre4")  # t = 10: shift 0.5
    q0, q1 = np.asarray(z0[:100]), np.asarray(zs[-1, :100])
    assert np.max(np.abs(q1 - np.roll(q0, 50))) < 0.05


def test_system_argument_errors():
    with pytest.raises(ValueError):
        TodaLattice(n_particles=1)
    with pytest.raises(ValueError):
        TodaLattice(alpha=-1.0)
    with pytest.raises(TypeError):
        LinearWave(n_points=2.5)


@pytest.fixture(scope="module")
def toda_data():
    toda = TodaLattice(n_particles=20)
    z0 = toda.default_initial_conditions(jnp.float64)[0]
    return toda, integrate(toda, z0, 0.1, 200)


@pytest.mark.parametrize("k", [2, 4, 8])
def test_psd_decoder_is_a_symplectic_immersion(toda_data, k):
    _, X = toda_data
    psd = proper_symplectic_decomposition(X, k)
    A = psd.decoder_matrix()
    N, n = 20, k // 2
    res = jnp.linalg.norm(A.T @ symplectic_matrix(N, A.dtype) @ A - symplectic_matrix(n, A.dtype))
    assert float(res) <= 1e-12
    assert float(immersion_residual(psd.decode, jnp.ones(k))) <= 1e-12
    np.testing.assert_allclose(jax.vmap(psd.encode)(jax.vmap(psd.decode)(X[:5, :k])), X[:5, :k],
                               atol=1e-12)  # encode ∘ decode = id
    np.testing.assert_allclose(symplectic_inverse(A), A.T, atol=1e-14)


def test_psd_negative_control_non_orthonormal_basis(toda_data):
    _, X = toda_data
    basis = proper_symplectic_decomposition(X, 4).basis
    bad = PSD(basis * jnp.array([[1.0, 1.1]]))
    assert float(immersion_residual(bad.decode, jnp.ones(4))) > 1e-2
    # a generic (non cotangent-lift) linear map is not a symplectic immersion either
    M = jax.random.normal(jax.random.PRNGKey(0), (40, 4), dtype=jnp.float64)
    assert float(immersion_residual(lambda y: M @ y, jnp.ones(4))) > 1e-2


def test_psd_error_decreases_with_size_and_matches_the_svd(toda_data):
    _, X = toda_data
    errs = [float(projection_error(proper_symplectic_decomposition(X, k), X)) for k in (2, 4, 8, 16)]
    assert errs == sorted(errs, reverse=True) and errs[-1] < 0.05
    full = proper_symplectic_decomposition(X, 40)
    assert float(projection_error(full, X)) <= 1e-12


def test_psd_errors():
    with pytest.raises(ValueError):
        proper_symplectic_decomposition(jnp.ones((5, 7)), 2)
    with pytest.raises(ValueError):
        proper_symplectic_decomposition(jnp.ones((5, 8)), 3)


def test_reduced_system_vector_field_and_integration(toda_data):
    toda, X = toda_data
    psd = proper_symplectic_decomposition(X, 8)
    red = ReducedHamiltonianSystem(toda, psd)
    assert red.dim == 8 and red.canonical
    y = psd.encode(X[17])
    np.testing.assert_allclose(red.vector_field(y), red.projected_vector_field(y), atol=1e-12)
    Y = integrate(red, red.default_initial_conditions(jnp.float64)[0], 0.1, 200)
    H = jax.vmap(red.hamiltonian)(Y)
    assert float(jnp.max(jnp.abs(H - H[0]))) < 1e-6 * float(jnp.abs(H[0]))
    e = float(reduction_error(psd, X, Y))
    assert e >= float(projection_error(psd, X)) * 0.5 and e < 0.2
    # with every mode the reduced solution is the full one
    full = proper_symplectic_decomposition(X, 40)
    Yf = integrate(ReducedHamiltonianSystem(toda, full), full.encode(X[0]), 0.1, 200)
    assert float(reduction_error(full, X, Yf)) <= 1e-9


def test_reduced_system_with_an_autoencoder(toda_data, key):
    toda, X = toda_data
    ae = gl.SymplecticAutoencoder(40, 2, width=4, n_encoder_blocks=1, n_decoder_blocks=1,
                                  key=key(), dtype=jnp.float64)
    red = ReducedHamiltonianSystem(toda, ae)
    y = ae.encode(X[3])
    np.testing.assert_allclose(red.vector_field(y), red.projected_vector_field(y), atol=1e-10)
    with pytest.raises(ValueError):
        ReducedHamiltonianSystem(TodaLattice(n_particles=10), ae)
    with pytest.raises(TypeError):
        ReducedHamiltonianSystem(gl.systems.RigidBody(), ae)
