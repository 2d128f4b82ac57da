from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.special import ellipj, ellipk

from geomlearn.geometry import symplecticity_residual
from geomlearn.integrators import (
    IMPLICIT_METHODS,
    METHODS,
    ORDERS,
    SEPARABLE_METHODS,
    SYMPLECTIC_METHODS,
    IntegrationError,
    integrate,
    step,
)
from geomlearn.cli import SYSTEMS
from geomlearn.systems import (
    AbstractSystem,
    DoublePendulum,
    HarmonicOscillator,
    Kepler,
    Pendulum,
    RigidBody,
)

from test_systems import HAND_WRITTEN


# --- exact solutions -------------------------------------------------------------------


def harmonic_exact(z0, t, m=1.0, k=1.0):
    q0, p0 = z0
    w = np.sqrt(k / m)
    c, s = np.cos(w * t), np.sin(w * t)
    return np.array([q0 * c + p0 / (m * w) * s, p0 * c - m * w * q0 * s])


def pendulum_exact(q0, t):
    """H = p²/2 - cos q from (q0, 0), 0 < q0 < π: sin(q/2) = k sn(K - t | k²)."""
    k = np.sin(q0 / 2)
    sn, cn, _, _ = ellipj(ellipk(k * k) - t, k * k)
    return np.array([2 * np.arcsin(k * sn), -2 * k * cn])


def test_exact_solutions_solve_their_equations():
    # The references of the order test, checked against the hand-written fields.
    for exact, rhs in (
        (lambda t: harmonic_exact((1.0, 0.5), t), lambda z: np.array([z[1], -z[0]])),
        (lambda t: pendulum_exact(1.0, t), lambda z: np.array([z[1], -np.sin(z[0])])),
    ):
        for t in (0.0, 0.7, 2.0):
            derivative = (exact(t + 1e-6) - exact(t - 1e-6)) / 2e-6
            np.testing.assert_allclose(derivative, rhs(exact(t)), atol=1e-8)
    np.testing.assert_allclose(pendulum_exact(1.0, 0.0), [1.0, 0.0], atol=1e-15)


# --- order ------------------------------------------------------------------------------

SUBSTEPS = {1: [16, 32, 64, 128], 2: [8, 16, 32, 64], 4: [4, 8, 16, 32], 6: [4, 8, 16, 32]}
# The 6th-order triple jump has large error constants (substeps up to 1.7·h, with a
# negative one): its asymptotic regime starts at smaller steps.
SUBSTEPS_BY_METHOD = {"yoshida6": [8, 16, 32, 64]}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("system_name", ["harmonic_oscillator", "pendulum"])
def test_empirical_order(method, system_name):
    T = 2.0
    if system_name == "harmonic_oscillator":
        system, z0 = HarmonicOscillator(), np.array([1.0, 0.5])
        exact = harmonic_exact(z0, T)
    else:
        system, z0 = Pendulum(), np.array([1.0, 0.0])
        exact = pendulum_exact(1.0, T)
    order = ORDERS[method]
    n = np.array(SUBSTEPS_BY_METHOD.get(method, SUBSTEPS[order]))
    # One step of size T, made of n substeps of size T/n: one compilation per method.
    errors = []
    for k in n:
        states = integrate(system, jnp.asarray(z0), T, 1, method=method, substeps=int(k))
        errors.append(np.abs(np.asarray(states[-1]) - exact).max())
    assert min(errors) > 1e-13  # above round-off, so the slope is meaningful
    slope = np.polyfit(np.log(T / n), np.log(errors), 1)[0]
    assert abs(slope - order) <= 0.3, (method, slope, errors)


def test_orders_table():
    assert set(ORDERS) == set(METHODS)
    assert SEPARABLE_METHODS <= SYMPLECTIC_METHODS and IMPLICIT_METHODS <= SYMPLECTIC_METHODS
    assert "euler" not in SYMPLECTIC_METHODS and "rk4" not in SYMPLECTIC_METHODS


# --- long-time behaviour (10⁵ steps) ------------------------------------------------------


def energy_drift_ratio(system, z0, dt, method, n_steps=100_000):
    states = integrate(system, z0, dt, n_steps, method=method)
    energy = np.asarray(jax.jit(jax.vmap(system.hamiltonian))(states))
    error = np.abs(energy - energy[0])
    tenth = n_steps // 10
    return error[1:tenth].mean(), error[-tenth:].mean()


@pytest.mark.parametrize(
    "system, z0, dt",
    [
        (Pendulum(), jnp.array([2.0, 0.0]), 0.1),
        (Kepler(), Kepler().default_initial_conditions()[2], 0.05),  # eccentricity 0.6
    ],
    ids=["pendulum", "kepler"],
)
def test_long_time_energy(system, z0, dt):
    # Symplectic methods: the mean energy error over the last tenth of 10⁵ steps equals
    # that over the first tenth (bounded oscillation, measured ratios 0.995–1.001).
    bounded = {}
    for method in ("symplectic_euler", "stormer_verlet", "implicit_midpoint"):
        first, last = energy_drift_ratio(system, z0, dt, method)
        assert last < 1.1 * first, (method, first, last)
        bounded[method] = last
    # Negative controls. RK4 drifts linearly (ratio ≈ 19 = mean of t over the last vs the
    # first tenth). Euler's error grows too (ratio 13 on the pendulum; on Kepler the orbit
    # escapes within the first tenth, so the error saturates near |H| and grows slower).
    first, last = energy_drift_ratio(system, z0, dt, "rk4")
    assert last > 5.0 * first, ("rk4", first, last)
    first, last = energy_drift_ratio(system, z0, dt, "euler")
    assert last > 1.3 * first and last > 10 * bounded["symplectic_euler"], ("euler", first, last)


def test_long_time_rigid_body_casimir():
    body = RigidBody()
    z0 = jnp.array([np.sin(1.1), 0.0, np.cos(1.1)])
    for method, bound in (("implicit_midpoint", 1e-12), ("gauss_legendre4", 1e-12), ("rk4", None)):
        states = integrate(body, z0, 0.1, 100_000, method=method)
        casimir = np.sum(np.asarray(states) ** 2, axis=-1)
        relative = np.abs(casimir - casimir[0]).max() / casimir[0]
        if bound is None:
            assert relative > 1e-9  # negative control: RK4 does not keep |z|²
        else:
            assert relative <= bound, (method, relative)


def test_gauss_legendre6_keeps_quadratic_invariants():
    body = RigidBody()
    z0 = body.default_initial_conditions()
    states = integrate(body, z0, 0.2, 5_000, method="gauss_legendre6")
    for invariant in (body.casimir, body.hamiltonian):
        values = np.asarray(jax.vmap(jax.vmap(invariant))(states))
        assert np.abs(values - values[:, :1]).max() <= 1e-13 * np.abs(values).max()


# --- cross-check against scipy --------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_against_solve_ivp(name):
    system, rhs = HAND_WRITTEN[name]
    z0 = np.asarray(system.default_initial_conditions()[0])
    dt, n_steps = 0.1, 20
    # Gauss–Legendre 6 at h = dt/4 is converged to 1e-9 except on the cluster, whose
    # fastest vibration (ω h ≈ 0.5 at that step) needs a finer step
    substeps = 32 if name == "lennard_jones" else 4
    ours = np.asarray(integrate(system, z0, dt, n_steps, method="gauss_legendre6", substeps=substeps))
    t = dt * np.arange(n_steps + 1)
    ref = solve_ivp(
        lambda _, z: rhs(z), (0.0, t[-1]), z0, method="DOP853", t_eval=t, rtol=1e-12, atol=1e-12
    )
    assert ref.success
    np.testing.assert_allclose(ours, ref.y.T, rtol=0, atol=1e-9 * (1 + np.abs(ref.y).max()))


# --- structure of one step -------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_step_symplecticity(method):
    z = jnp.array([0.4, 0.3, -0.2, 0.5])
    # A separable and a non-separable 4-d system (q ≠ 0 keeps Kepler off its singularity).
    system = Kepler() if method in SEPARABLE_METHODS else DoublePendulum()
    for zz in (z + jnp.array([0.6, 0.0, 0.0, 0.0]),):
        residual = jax.jit(
            lambda v: symplecticity_residual(lambda u: step(system, u, 0.2, method=method), v)
        )(zz)
        if method in SYMPLECTIC_METHODS:
            assert residual <= 1e-12, (method, residual)
        else:
            assert residual > 1e-6, (method, residual)  # negative control


def test_step_matches_integrate_and_jit(key):
    system = Pendulum()
    z0 = system.default_initial_conditions()[1]
    for method in ("gauss_legendre4",):
        states = integrate(system, z0, 0.1, 3, method=method)
        jitted = jax.jit(lambda v: step(system, v, 0.1, method=method))
        z = z0
        for t in range(1, 4):
            z = jitted(z)
            np.testing.assert_allclose(z, states[t], rtol=1e-14, atol=1e-14)
    # eager (op-by-op) equals jit
    eager = step(system, z0, 0.1, method="rk4")
    np.testing.assert_allclose(eager, integrate(system, z0, 0.1, 1, method="rk4")[1], rtol=1e-14)


def test_implicit_step_derivatives_are_consistent():
    # Derivatives of an implicit step come from the implicit function theorem: forward
    # and reverse mode agree, and match central differences.
    system = Kepler()
    z = jnp.array([0.4, 0.0, 0.0, 2.0])

    def f(v):
        return step(system, v, 0.1, method="implicit_midpoint")

    forward = jax.jit(jax.jacfwd(f))(z)
    reverse = jax.jit(jax.jacrev(f))(z)
    assert np.isfinite(np.asarray(reverse)).all()
    np.testing.assert_allclose(reverse, forward, atol=1e-13)
    e = 1e-6
    shifts = e * jnp.eye(4)
    shifted = jax.jit(jax.vmap(f))(jnp.concatenate([z[None] + shifts, z[None] - shifts]))
    fd = (shifted[:4] - shifted[4:]).T / (2 * e)
    np.testing.assert_allclose(forward, fd, atol=1e-7)


# --- shapes, batches, dtype, substeps --------------------------------------------------


def test_shapes_batch_equals_loop():
    system = Pendulum()
    z0 = system.default_initial_conditions()
    batch = integrate(system, z0, 0.1, 7)
    assert batch.shape == (3, 8, 2)
    for i in range(3):
        single = integrate(system, z0[i], 0.1, 7)
        assert single.shape == (8, 2)
        np.testing.assert_allclose(batch[i], single, rtol=1e-15, atol=1e-15)
    np.testing.assert_array_equal(batch[:, 0], z0)
    assert integrate(system, z0[0], 0.1, 0).shape == (1, 2)


def test_dtype_follows_input(dtype):
    system = RigidBody()
    z0 = system.default_initial_conditions(dtype=dtype)
    for method in ("implicit_midpoint",):
        states = integrate(system, z0, 0.2, 10, method=method)
        assert states.dtype == dtype
        reference = integrate(system, z0.astype(jnp.float64), 0.2, 10, method=method)
        np.testing.assert_allclose(states, reference, atol=1e-5 if dtype == jnp.float32 else 1e-15)
    # Integer initial conditions are converted to the default float.
    assert integrate(HarmonicOscillator(), jnp.array([1, 0]), 0.1, 2).dtype == jnp.float64


def test_substeps_keep_every_substep_th_state():
    system = Pendulum()
    z0 = jnp.array([1.0, 0.0])
    coarse = integrate(system, z0, 0.3, 5, method="yoshida4", substeps=3)
    fine = integrate(system, z0, 0.1, 15, method="yoshida4")
    np.testing.assert_allclose(coarse, fine[::3], rtol=1e-13, atol=1e-14)


def test_integrate_under_jit():
    system = Pendulum()
    z0 = system.default_initial_conditions()
    eager = integrate(system, z0, 0.1, 5, method="implicit_midpoint")
    jitted = jax.jit(lambda z: integrate(system, z, 0.1, 5, method="implicit_midpoint"))(z0)
    np.testing.assert_allclose(jitted, eager, rtol=1e-15, atol=1e-15)


# --- errors ----------------------------------------------------------------------------


class Riccati(AbstractSystem):
    """ż = 1 + z² (blows up in finite time); its midpoint equation has no real solution
    for large steps. A user-defined system, as the public base class allows."""

    dim: ClassVar[int] = 1

    def vector_field(self, z):
        return 1.0 + z * z

    def hamiltonian(self, z):
        return jnp.sum(z)

    def default_initial_conditions(self, dtype=None):
        return jnp.zeros((1, 1))


def test_unconverged_implicit_solve_is_an_error():
    # k = 1 + (z0 + k)² with h = 2, z0 = 0 has no real root: the iteration cannot converge.
    with pytest.raises(IntegrationError, match=r"implicit solve .* at step 1 of trajectory 0"):
        integrate(Riccati(), jnp.zeros(1), 2.0, 3, method="implicit_midpoint")
    # In a batch, the failing trajectory is named; a small step converges.
    with pytest.raises(IntegrationError, match="implicit solve .* trajectory 1"):
        integrate(Riccati(), jnp.array([[-0.5], [1.0]]), 0.6, 1, method="implicit_midpoint")
    states = integrate(Riccati(), jnp.zeros(1), 0.1, 3, method="implicit_midpoint")
    np.testing.assert_allclose(states[1, 0], np.tan(0.1), atol=1e-3)  # midpoint ≈ tan t


def test_nonfinite_state_is_an_error_naming_the_step():
    # Explicit Euler on ż = 1 + z² overflows: predict the step in NumPy.
    z, expected = 0.0, None
    with np.errstate(over="ignore"):
        for k in range(1, 100):
            z = z + (1.0 + z * z)
            if not np.isfinite(z):
                expected = k
                break
    assert expected is not None
    with pytest.raises(IntegrationError, match=rf"non-finite .* step {expected} of trajectory 0"):
        integrate(Riccati(), jnp.zeros(1), 1.0, 50, method="euler")
    # Step 12 is fine up to step expected - 1.
    integrate(Riccati(), jnp.zeros(1), 1.0, expected - 1, method="euler")


@pytest.mark.parametrize("method", sorted(SEPARABLE_METHODS))
def test_separable_methods_reject_other_systems(method):
    for system in (DoublePendulum(), RigidBody()):
        with pytest.raises(ValueError, match="separable"):
            integrate(system, system.default_initial_conditions(), 0.1, 2, method=method)
        with pytest.raises(ValueError, match="separable"):
            step(system, system.default_initial_conditions()[0], 0.1, method=method)


def test_bad_arguments():
    system = Pendulum()
    z0 = jnp.array([1.0, 0.0])
    with pytest.raises(ValueError, match="method must be one of"):
        integrate(system, z0, 0.1, 2, method="leapfrog")
    for dt in (0.0, -0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="dt"):
            integrate(system, z0, dt, 2)
    with pytest.raises(TypeError, match="dt"):
        integrate(system, z0, "0.1", 2)
    with pytest.raises(ValueError, match="n_steps"):
        integrate(system, z0, 0.1, -1)
    with pytest.raises(TypeError, match="n_steps"):
        integrate(system, z0, 0.1, 2.0)
    with pytest.raises(ValueError, match="substeps"):
        integrate(system, z0, 0.1, 2, substeps=0)
    with pytest.raises(ValueError, match=r"shape \(2,\) or \(B, 2\)"):
        integrate(system, jnp.zeros(3), 0.1, 2)
    with pytest.raises(ValueError, match=r"shape \(2,\) or \(B, 2\)"):
        integrate(system, jnp.zeros((2, 2, 2)), 0.1, 2)
    with pytest.raises(ValueError, match="non-finite .* trajectory 1"):
        integrate(system, jnp.array([[1.0, 0.0], [jnp.nan, 0.0]]), 0.1, 2)
    with pytest.raises(TypeError, match="AbstractSystem"):
        integrate("pendulum", z0, 0.1, 2)


# --- methods as objects ----------------------------------------------------------------


def test_methods_are_objects_that_say_what_they_are():
    import geomlearn.integrators as gi

    classes = {
        "euler": gi.Euler, "rk4": gi.RK4, "symplectic_euler": gi.SymplecticEuler,
        "stormer_verlet": gi.StormerVerlet, "yoshida4": gi.Yoshida4, "yoshida6": gi.Yoshida6,
        "implicit_midpoint": gi.ImplicitMidpoint, "gauss_legendre4": gi.GaussLegendre4,
        "gauss_legendre6": gi.GaussLegendre6,
    }
    assert tuple(classes) == METHODS
    for name, cls in classes.items():
        method = gi.as_integrator(name)
        assert type(method) is cls and method == cls() and hash(method) == hash(cls())
        assert method.name == name and method.order == ORDERS[name]
        assert method.symplectic == (name in SYMPLECTIC_METHODS)
        assert method.separable == (name in SEPARABLE_METHODS)
        assert method.implicit == (name in IMPLICIT_METHODS)
        assert gi.as_integrator(method) is method
    with pytest.raises(ValueError, match=r"method must be one of \('euler', 'rk4'"):
        gi.as_integrator("leapfrog")
    with pytest.raises(ValueError, match="method must be one of"):
        gi.as_integrator(None)


def test_an_object_integrates_exactly_as_its_name():
    import geomlearn.integrators as gi

    system = Pendulum()
    z0 = system.default_initial_conditions()
    for name, method in (("yoshida4", gi.Yoshida4()), ("gauss_legendre4", gi.GaussLegendre4()),
                         ("rk4", gi.RK4())):
        np.testing.assert_array_equal(integrate(system, z0, 0.1, 5, method=method),
                                      integrate(system, z0, 0.1, 5, method=name))
        np.testing.assert_array_equal(step(system, z0[0], 0.1, method=method),
                                      step(system, z0[0], 0.1, method=name))
    with pytest.raises(ValueError, match="separable"):
        integrate(RigidBody(), RigidBody().default_initial_conditions(), 0.1, 2,
                  method=gi.StormerVerlet())


def test_implicit_step_takes_an_implicit_method_only():
    import geomlearn.integrators as gi

    f = Pendulum().vector_field
    z = jnp.array([1.0, 0.0])
    np.testing.assert_array_equal(gi.implicit_step(f, z, 0.1, method=gi.GaussLegendre6()),
                                  gi.implicit_step(f, z, 0.1, method="gauss_legendre6"))
    np.testing.assert_array_equal(gi.implicit_step(f, z, 0.1),
                                  step(Pendulum(), z, 0.1, method="implicit_midpoint"))
    for bad in ("rk4", gi.RK4(), "leapfrog"):
        with pytest.raises(ValueError, match=r"method must be one of \['gauss_legendre4'"):
            gi.implicit_step(f, z, 0.1, method=bad)
    with pytest.raises(ValueError, match="on_failure must be 'raise' or 'nan'"):
        gi.implicit_step(f, z, 0.1, on_failure="ignore")


def test_a_user_defined_method_plugs_in():
    import geomlearn.integrators as gi

    class Heun(gi.AbstractIntegrator):
        name: ClassVar[str] = "heun"
        order: ClassVar[int] = 2
        symplectic: ClassVar[bool] = False

        def step(self, system, z, h):
            k1 = system.vector_field(z)
            k2 = system.vector_field(z + h * k1)
            return z + (0.5 * h) * (k1 + k2), jnp.array(True)

    system, z0 = HarmonicOscillator(), jnp.array([1.0, 0.5])
    errors = [np.abs(np.asarray(integrate(system, z0, 2.0, 1, method=Heun(), substeps=k)[-1])
                     - harmonic_exact(np.asarray(z0), 2.0)).max() for k in (16, 32, 64)]
    slope = np.polyfit(np.log(2.0 / np.array([16, 32, 64])), np.log(errors), 1)[0]
    assert abs(slope - 2) <= 0.3
    with pytest.raises(TypeError):  # a method must say its order (an abstract class variable)

        class NoOrder(gi.AbstractIntegrator):
            name: ClassVar[str] = "no_order"
            symplectic: ClassVar[bool] = False

            def step(self, system, z, h):
                return z, jnp.array(True)

        NoOrder()
