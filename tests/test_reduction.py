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


# ------------------------------------------- evaluate_reduction and check_immersion


def test_evaluate_reduction_measures_projection_and_reduction(toda_data, tmp_path):
    from geomlearn.evaluation import evaluate_reduction
    from geomlearn.plotting import reduction_report

    toda, X = toda_data
    data = gl.TrajectoryData(X[None], 0.1)
    ev = evaluate_reduction(proper_symplectic_decomposition(X, 8), toda, data)
    assert set(ev["projection_error"]) == {"t=2.5", "t=5", "t=10", "t=20", "all"}
    # the PSD baseline of the same size, fitted to the same states, is the reduction itself
    assert ev["psd_projection_error"] == pytest.approx(ev["projection_error"], rel=1e-10)
    assert ev["projection_error"]["all"] == pytest.approx(
        float(projection_error(proper_symplectic_decomposition(X, 8), X)), rel=1e-12)
    Y = integrate(ReducedHamiltonianSystem(toda, proper_symplectic_decomposition(X, 8)),
                  ev.reduced[0], 0.1, 200)
    assert ev["reduction_error"]["all"] == pytest.approx(
        float(reduction_error(proper_symplectic_decomposition(X, 8), X, Y)), rel=1e-10)
    assert ev["reduction_error"]["t=20"] == pytest.approx(
        float(jnp.linalg.norm(ev.decoded[200] - X[200]) / jnp.linalg.norm(X[200])), rel=1e-10)
    assert ev["reduction_failed"] is None and ev["reduced_energy_drift"] < 1e-6
    assert ev["immersion_residual"] < 1e-12 and ev["immersion_passed"]
    assert ev.full.shape == ev.projected.shape == (201, 40) and ev.reduced.shape == (201, 8)
    text = ev.summary(title="PSD")
    assert "projection error" in text and "reduction error" in text and "t=20" in text
    assert reduction_report(tmp_path / "r.png", history={"epoch": [1], "loss": [0.1],
                                                         "val_loss": [None]}, evaluation=ev)
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(TypeError, match="TrajectoryData"):
        evaluate_reduction(proper_symplectic_decomposition(X, 8), toda, X)


def test_check_immersion_passes_immersions_and_fails_a_negative_control(toda_data):
    from geomlearn.evaluation import check_immersion

    _, X = toda_data
    psd = proper_symplectic_decomposition(X, 4)
    good = check_immersion(psd, X[::50])
    assert good.passed and good.residual <= 1e-12 and good.n_points == 5
    assert "PASS" in good.report(title="psd") and "symplectic immersion" in good.report(title="psd")
    bad = check_immersion(PSD(psd.basis * jnp.array([[1.0, 1.1]])), X[::50])  # off the manifold
    assert not bad.passed and bad.residual > 1e-2 and "FAIL" in bad.report(title="bad")
    with pytest.raises(ValueError, match=r"\(B, 40\)"):
        check_immersion(psd, X[0])


def test_the_registry_routes_a_reduction_to_its_own_pipeline():
    """The command line asks the spec, not the model's kind: the autoencoder's spec trains
    with Riemannian Adam (never LM) and checks the immersion; an integrator's spec keeps
    the defaults."""
    from geomlearn.cli import MODELS, ModelSpec, ReductionSpec, spec_of

    spec = MODELS["symplectic-autoencoder"]
    assert isinstance(spec, ReductionSpec)
    ae = gl.SymplecticAutoencoder(40, 2, width=2, key=jax.random.PRNGKey(0))
    assert spec_of(ae) is spec and type(spec_of(gl.GSympNet(2, key=jax.random.PRNGKey(0)))) is ModelSpec
    opt, epochs, budget, how = spec.trainer(ae, 1000, batch_size=100)
    assert epochs == spec.default_epochs and budget is None and "Riemannian" in how
    with pytest.raises(ValueError, match="Riemannian Adam"):
        spec.trainer(ae, 1000, trainer="lm")
