"""The manifold cotangent lift: a symplectic immersion for every coefficient value (with
a negative control), an exact left inverse, the reduced dynamics of a bead on the
decoder's curve, and a reduction of the Toda bump that predicts where the PSD cannot."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn.evaluation import check_immersion
from geomlearn.integrators import integrate
from geomlearn.reduction import (
    ManifoldCotangentLift,
    ReducedHamiltonianSystem,
    immersion_residual,
    loop_action,
    manifold_cotangent_lift,
    orbit_period,
    proper_symplectic_decomposition,
)
from geomlearn.systems import TodaLattice


def _random_lift_arrays(N, n, K, seed, *, momentum_reference=True):
    """A random orthonormal basis, reference and large random coefficients (NumPy)."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.normal(size=(N, n)))
    reference = rng.normal(size=2 * N)
    if not momentum_reference:
        reference[N:] = 0.0
    return basis, reference, 3.0 * rng.normal(size=(K, N))


def _random_lift(N, n, K, seed, *, momentum_reference=True):
    """A lift with random orthonormal basis, reference and large random coefficients."""
    arrays = _random_lift_arrays(N, n, K, seed, momentum_reference=momentum_reference)
    return ManifoldCotangentLift(*map(jnp.asarray, arrays), 0.2, 1.5)


@eqx.filter_jit
def _immersion_facts(lift, ys):
    """The decoder's immersion residuals, the decoded states and their codes, the closed-
    form and automatic position Jacobians at the first Q, and the residuals of the
    momenta lifted without the inverse metric, p = p̄ + Df P (the negative control)."""
    n, N = lift.reduced_dim // 2, lift.full_dim // 2

    def unlifted(y):
        q = lift.positions(y[:n])
        return jnp.concatenate([q, lift.reference[N:] + lift.position_jacobian(y[:n]) @ y[n:]])

    decoded = jax.vmap(lift.decode)(ys)
    Q = ys[0, :n]
    return (jax.vmap(lambda y: immersion_residual(lift.decode, y))(ys), decoded,
            jax.vmap(lift.encode)(decoded), lift.position_jacobian(Q),
            jax.jacfwd(lift.positions)(Q),
            jax.vmap(lambda y: immersion_residual(unlifted, y))(ys))


@pytest.mark.parametrize("n", [1, 2])
def test_the_decoder_is_a_symplectic_immersion_for_any_coefficients(n):
    lift = _random_lift(12, n, 7, seed=n)
    ys = np.random.default_rng(5).normal(size=(6, 2 * n))
    residuals, decoded, codes, closed, automatic, unlifted = _immersion_facts(lift, ys)
    assert float(np.max(residuals)) < 1e-13
    # encode ∘ decode = id (the encoder is an exact left inverse)
    np.testing.assert_allclose(codes, ys, atol=1e-12)
    # the closed-form Jacobian is the derivative of the positions
    np.testing.assert_allclose(closed, automatic, atol=1e-12)
    assert check_immersion(lift, decoded).passed
    # negative control: momenta lifted without the inverse metric, p = p̄ + Df P
    assert float(np.min(unlifted)) > 1e-3


@eqx.filter_jit
def _bead_fields(toda, lift, ys):
    """The bead's field from the positions alone, the reduced field of `lift`, and that
    of the same lift with the curve's bending ignored (the PSD's motion)."""

    def bead(y):
        Q, P = y[:1], y[1]
        df = jax.jacfwd(lift.positions)(Q)[:, 0]
        speed2 = lambda s: jnp.sum(jax.jacfwd(lift.positions)(s)[:, 0] ** 2)
        Qdot = P / (df @ df)
        force = -jax.grad(toda.potential)(lift.positions(Q)) @ df
        return jnp.array([Qdot, 0.5 * jax.grad(speed2)(Q)[0] * Qdot**2 + force])

    flat = ManifoldCotangentLift(lift.basis, lift.reference, 0.0 * lift.coefficients, 0.2, 1.5)
    return (jax.vmap(bead)(ys), jax.vmap(ReducedHamiltonianSystem(toda, lift).vector_field)(ys),
            jax.vmap(ReducedHamiltonianSystem(toda, flat).vector_field)(ys))


def test_the_reduced_system_is_a_bead_on_the_decoders_curve():
    """With p̄ = 0 the reduced Hamiltonian system of a one-dimensional lift is the motion
    of a bead on the curve f under the potential V: Lagrangian L = ½|f'(Q)|²Q̇² − V(f(Q)),
    so Q̇ = P/|f'|² and Ṗ = ½ (d|f'|²/dQ) Q̇² − ∇V(f(Q))·f'(Q). Computed here from the
    positions alone (automatic derivatives of f, not the decoder's closed forms)."""
    N = 12
    toda = TodaLattice(N)
    lift = _random_lift(N, 1, 9, seed=3, momentum_reference=False)
    ys = np.random.default_rng(7).normal(size=(5, 2))
    expected, reduced, flat = _bead_fields(toda, lift, ys)
    np.testing.assert_allclose(reduced, expected, rtol=1e-10, atol=1e-12)
    # negative control: the same bead with the curve's bending ignored (the PSD's motion)
    assert float(np.max(np.abs(np.asarray(flat) - np.asarray(expected)))) > 1e-3


@pytest.fixture(scope="module")
def toda_bump():
    toda = TodaLattice(40)
    X = integrate(toda, toda.default_initial_conditions(jnp.float64)[0], 0.1, 800)
    return toda, np.asarray(X)


@eqx.filter_jit
def _mean_reduction_error(toda, reduction, X):
    Y = integrate(ReducedHamiltonianSystem(toda, reduction), reduction.encode(X[0]), 0.1,
                  X.shape[0] - 1)
    Z = jax.vmap(reduction.decode)(Y)
    return jnp.mean(jnp.linalg.norm(Z - X, axis=1) / jnp.linalg.norm(X, axis=1))


_encode_all = eqx.filter_jit(lambda reduction, X: jax.vmap(reduction.encode)(X))


def test_on_the_toda_bump_the_lift_predicts_where_the_psd_cannot(toda_bump):
    """The bump's orbit runs back and forth along one path of positions; the lift bends
    the centred PSD's leading direction along it. Its reduced system at 2n = 2 follows the
    full solution (one and a half periods) with less than half the centred PSD's mean
    error, and its codes enclose the orbit's action ∮p·dq."""
    toda, X = toda_bump
    lift = manifold_cotangent_lift(X, 2)
    psd = proper_symplectic_decomposition(X, 2, centred=True)
    lifted = float(_mean_reduction_error(toda, lift, X))
    linear = float(_mean_reduction_error(toda, psd, X))
    assert lifted < 0.5 * linear, (lifted, linear)
    K = orbit_period(X)
    full = loop_action(X[: K + 1])
    codes = loop_action(_encode_all(lift, X[: K + 1]))
    assert abs(codes - full) < 0.1 * abs(full), (codes, full)
    # negative control: the PSD's codes do not enclose it
    assert abs(loop_action(_encode_all(psd, X[: K + 1])) - full) > 0.1 * abs(full)


def test_the_lift_is_evaluated_like_any_reduction(toda_bump):
    toda, X = toda_bump
    lift = manifold_cotangent_lift(X, 4, n_features=12)
    ev = gl.evaluate_reduction(lift, toda, gl.TrajectoryData(X[None], 0.1))
    assert ev["reduced_dim"] == 4 and ev["reduction_failed"] is None
    # at 2n = 4 on this small lattice: 0.10 against the centred PSD's 0.15
    assert ev["reduction_error_mean"] < ev["psd_reduction_error_mean"]
    assert ev["immersion_residual"] < 1e-12


def test_fitting_arguments_are_checked(toda_bump):
    _, X = toda_bump
    with pytest.raises(ValueError, match="n_features"):
        manifold_cotangent_lift(X, 2, n_features=1)
    with pytest.raises(ValueError, match="too few"):
        manifold_cotangent_lift(X[:5], 2, n_features=8)
    with_nan = X.copy()
    with_nan[3, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        manifold_cotangent_lift(with_nan, 2)
    with pytest.raises(ValueError, match="margin"):
        manifold_cotangent_lift(X, 2, margin=-1.0)
    with pytest.raises(ValueError, match="do not move"):
        manifold_cotangent_lift(np.tile(X[:1], (20, 1)), 2)
    with pytest.raises(ValueError, match="shape"):
        manifold_cotangent_lift(X, 2).decode(np.zeros(3))
    with pytest.raises(ValueError, match="coefficients"):
        ManifoldCotangentLift(np.eye(4)[:, :1], np.zeros(8), np.zeros((1, 4)), 0.0, 1.0)


_decoder_residual = eqx.filter_jit(lambda lift, y: immersion_residual(lift.decode, y))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_a_basis_that_is_not_orthonormal_is_refused(dtype):
    """The decoder is a symplectic immersion only for an orthonormal basis: a stretched
    one is refused with its deviation ‖BᵀB − I‖ (its decoder, built around the check,
    fails the immersion); the same basis orthonormal passes in either dtype."""
    lift = _random_lift(12, 2, 7, seed=3)
    basis, reference, coefficients = _random_lift_arrays(12, 2, 7, seed=3)
    args = (jnp.asarray(reference, dtype), jnp.asarray(coefficients, dtype), 0.2, 1.5)
    stretched = basis * np.array([[1.0, 1.1]])
    with pytest.raises(ValueError, match=r"‖BᵀB − I‖ = 0\.21"):
        ManifoldCotangentLift(jnp.asarray(stretched, dtype), *args)
    bad = eqx.tree_at(lambda m: m.basis, lift, jnp.asarray(stretched))
    assert float(_decoder_residual(bad, np.ones(4))) > 1e-2
    good = ManifoldCotangentLift(jnp.asarray(basis, dtype), *args)
    assert float(_decoder_residual(good, np.ones(4, dtype))) < (
        1e-4 if dtype == jnp.float32 else 1e-12)
