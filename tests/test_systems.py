import importlib
import math
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn
from geomlearn.geometry import symplectic_matrix
from geomlearn.cli import SYSTEMS
from test_particles import rhs_lennard_jones
from geomlearn.systems import (
    AbstractSeparableSystem,
    AbstractSystem,
    CoupledHarmonicOscillator,
    DoublePendulum,
    HarmonicOscillator,
    HenonHeiles,
    Kepler,
    Pendulum,
    RigidBody,
    ThreeBody,
)

ALL = sorted(SYSTEMS)


# Independent right-hand sides written out by hand in NumPy (not by autodiff), on
# non-default parameters, to check each system's vector field.
def rhs_harmonic(z, m=1.3, k=0.7):
    q, p = z
    return np.array([p / m, -k * q])


def rhs_pendulum(z, m=1.3, l=0.8, g=2.1):  # noqa: E741
    q, p = z
    return np.array([p / (m * l**2), -m * g * l * np.sin(q)])


def rhs_double_pendulum(z, m1=1.0, m2=1.0, l1=1.0, l2=1.0, g=1.0):
    # For unit parameters: H = (p1² + 2p2² - 2p1p2 cosΔ)/(2(1 + sin²Δ)) - 2cos t1 - cos t2.
    t1, t2, p1, p2 = z
    d = t1 - t2
    den = 1.0 + np.sin(d) ** 2
    h1 = p1 * p2 * np.sin(d) / den
    h2 = (p1**2 + 2 * p2**2 - 2 * p1 * p2 * np.cos(d)) / (2 * den**2)
    dt1 = (p1 - p2 * np.cos(d)) / den
    dt2 = (2 * p2 - p1 * np.cos(d)) / den
    dp1 = -2 * np.sin(t1) - h1 + h2 * np.sin(2 * d)
    dp2 = -np.sin(t2) + h1 - h2 * np.sin(2 * d)
    return np.array([dt1, dt2, dp1, dp2])


def rhs_coupled(z, m1=2.0, m2=1.0, k1=1.5, k2=0.3, k=1.0):
    q1, q2, p1, p2 = z
    s = 1.0 / (1.0 + np.exp(-q1))
    ds = s * (1.0 - s)
    dV1 = k1 * q1 + 0.5 * k * ds * (q2 - q1) ** 2 - k * s * (q2 - q1)
    dV2 = k2 * q2 + k * s * (q2 - q1)
    return np.array([p1 / m1, p2 / m2, -dV1, -dV2])


def rhs_henon_heiles(z, lam=1.0):
    x, y, px, py = z
    return np.array([px, py, -x - 2 * lam * x * y, -y - lam * (x**2 - y**2)])


def rhs_kepler(z, m=1.0, k=1.0):
    x, y, px, py = z
    r3 = (x**2 + y**2) ** 1.5
    return np.array([px / m, py / m, -k * x / r3, -k * y / r3])


def rhs_three_body(z, m=1.0, G=1.0):
    q, p = z[:6].reshape(3, 2), z[6:].reshape(3, 2)
    force = np.zeros((3, 2))
    for i in range(3):
        for j in range(3):
            if i != j:
                d = q[j] - q[i]
                force[i] += G * m * m * d / np.linalg.norm(d) ** 3
    return np.concatenate([(p / m).ravel(), force.ravel()])


def rhs_rigid_body(z, inertia=(2.0, 1.0, 2.0 / 3.0)):
    # ż = z × (z / I)
    return np.cross(z, z / np.array(inertia))


def rhs_toda(z, alpha=0.64):
    # H = Σ p²/2 + α Σ exp(q_n − q_{n+1}), periodic
    n = z.size // 2
    q, p = z[:n], z[n:]
    pdot = alpha * (np.exp(np.roll(q, 1) - q) - np.exp(q - np.roll(q, -1)))
    return np.concatenate([p, pdot])


def rhs_wave(z, c=0.025):
    # the periodic second-difference Laplacian on N points of [−1/2, 1/2): h = 1/N
    n = z.size // 2
    q, p = z[:n], z[n:]
    return np.concatenate([p, c**2 * n**2 * (np.roll(q, 1) - 2 * q + np.roll(q, -1))])


def rhs_parametric_pendulum(z, omega0=1.0, epsilon=0.5, Omega=2.0):
    # z = (q, τ, p, E), H = p²/2 + E + ω0²(1 + ε cos Ωτ)(1 − cos q)
    q, tau, p, _ = z
    drive = 1.0 + epsilon * np.cos(Omega * tau)
    return np.array([p, 1.0, -omega0**2 * drive * np.sin(q),
                     omega0**2 * epsilon * Omega * np.sin(Omega * tau) * (1.0 - np.cos(q))])


def rhs_forced_oscillator(z, omega0=1.0, beta=0.5, f0=0.5, Omega=1.5):
    # z = (q, τ, p, E), K = p²/2 + E + ω0² q²/2 + β q⁴/4 − f0 q cos Ωτ
    q, tau, p, _ = z
    return np.array([p, 1.0, -omega0**2 * q - beta * q**3 + f0 * np.cos(Omega * tau),
                     -f0 * Omega * q * np.sin(Omega * tau)])


def rhs_forced_rigid_body(z, inertia=(2.0, 1.0, 2.0 / 3.0), epsilon=0.5, Omega=1.0):
    # z = (m, τ, E): Euler's equations with pulsating inverse moments r_k(τ); Ė = −∂_τ T
    m, tau = z[:3], z[3]
    phases = np.array([0.0, 2.0, 4.0]) * np.pi / 3.0
    r = (1.0 / np.array(inertia)) * (1.0 + epsilon * np.cos(Omega * tau + phases))
    dr = (1.0 / np.array(inertia)) * (-epsilon * Omega * np.sin(Omega * tau + phases))
    rates = [(r[2] - r[1]) * m[1] * m[2], (r[0] - r[2]) * m[0] * m[2], (r[1] - r[0]) * m[0] * m[1]]
    return np.array([*rates, 1.0, -0.5 * np.sum(dr * m * m)])


def rhs_damped_pendulum(z, gamma=0.3, m=1.3, l=0.8, g=2.1):
    q, p = z
    return np.array([p / (m * l**2), -m * g * l * np.sin(q) - gamma * p])


def rhs_duffing(z, alpha=-1.0, beta=1.0, delta=0.3, gamma=0.2, omega=1.2):
    q, p, t = z
    return np.array([p, -alpha * q - beta * q**3 - delta * p + gamma * np.sin(omega * t), 1.0])


def rhs_forced_mass_spring(z, m=2.0, k=0.5, c=0.3, f0=1.5, omega=3.0):
    q, p, t = z
    return np.array([p / m, -k * q - c * p / m + f0 * np.sin(omega * t), 1.0])


HAND_WRITTEN = {
    "harmonic_oscillator": (HarmonicOscillator(m=1.3, k=0.7), rhs_harmonic),
    "pendulum": (Pendulum(m=1.3, l=0.8, g=2.1), rhs_pendulum),
    "double_pendulum": (DoublePendulum(), rhs_double_pendulum),
    "coupled_oscillator": (CoupledHarmonicOscillator(), rhs_coupled),
    "henon_heiles": (HenonHeiles(), rhs_henon_heiles),
    "kepler": (Kepler(), rhs_kepler),
    "three_body": (ThreeBody(), rhs_three_body),
    "rigid_body": (RigidBody(), rhs_rigid_body),
    "toda_lattice": (geomlearn.systems.TodaLattice(n_particles=6), rhs_toda),
    "linear_wave": (geomlearn.systems.LinearWave(n_points=7), rhs_wave),
    "parametric_pendulum": (geomlearn.systems.ParametricPendulum(), rhs_parametric_pendulum),
    "forced_rigid_body": (geomlearn.systems.ForcedRigidBody(), rhs_forced_rigid_body),
    "forced_oscillator": (geomlearn.systems.ForcedOscillator(), rhs_forced_oscillator),
    "damped_pendulum": (geomlearn.systems.DampedPendulum(gamma=0.3, m=1.3, l=0.8, g=2.1), rhs_damped_pendulum),
    "duffing": (geomlearn.systems.Duffing(), rhs_duffing),
    "forced_mass_spring": (geomlearn.systems.ForcedMassSpring(m=2.0, k=0.5, c=0.3, f0=1.5), rhs_forced_mass_spring),
    "lennard_jones": (geomlearn.systems.LennardJonesCluster(5, spatial_dim=2, epsilon=1.3, sigma=0.9),
                      lambda z: rhs_lennard_jones(z, 5, 2, epsilon=1.3, sigma=0.9)),
}


def random_states(system, key, n=5):
    """Random states near the default initial conditions (away from singularities)."""
    z0 = system.default_initial_conditions(dtype=jnp.float64)
    idx = jax.random.randint(key, (n,), 0, z0.shape[0])
    noise = 0.05 * jax.random.normal(jax.random.fold_in(key, 1), (n, system.dim))
    return z0[idx] + noise


def test_registry_names_and_defaults():
    assert set(SYSTEMS) == {
        "harmonic_oscillator",
        "pendulum",
        "double_pendulum",
        "coupled_oscillator",
        "henon_heiles",
        "kepler",
        "three_body",
        "rigid_body",
        "toda_lattice",
        "linear_wave",
        "parametric_pendulum",
        "forced_rigid_body",
        "damped_pendulum",
        "duffing",
        "forced_mass_spring",
        "lennard_jones",
    }
    for name, cls in SYSTEMS.items():
        system = cls()
        assert isinstance(system, AbstractSystem)
        assert isinstance(system.dim, int)
        assert isinstance(cls.canonical, bool) and isinstance(cls.separable, bool)
        assert len(system.labels) == system.dim
        z0 = system.default_initial_conditions()
        assert z0.ndim == 2 and z0.shape[1] == system.dim and z0.shape[0] >= 1
        assert z0.dtype == jnp.float64  # JAX default float, x64 on in the suite
        assert system.default_initial_conditions(dtype=jnp.float32).dtype == jnp.float32
        assert np.isfinite(np.asarray(z0)).all()
        # a damped or driven system conserves nothing; it states its energy balance instead
        dissipative = isinstance(system, geomlearn.systems.AbstractPortHamiltonianSystem)
        assert ("energy" in system.invariants) != dissipative
        if cls.canonical:
            assert system.dim % 2 == 0
        if cls.separable:
            assert cls.canonical and isinstance(system, AbstractSeparableSystem)
    assert not RigidBody.canonical and RigidBody.dim == 3
    assert not DoublePendulum.separable and DoublePendulum.canonical
    assert geomlearn.systems.Pendulum is Pendulum


@pytest.mark.parametrize("name", ALL)
def test_vector_field_matches_hand_written(name, key):
    system, rhs = HAND_WRITTEN[name]
    zs = random_states(system, key())
    expected = np.stack([rhs(z) for z in np.asarray(zs)])
    got = jax.jit(jax.vmap(system.vector_field))(zs)
    np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-13)


def test_hand_written_check_can_fail():
    # Negative control: a different parameter value is detected.
    z = jnp.array([0.4, -0.3])
    assert not np.allclose(Pendulum(g=2.0).vector_field(z), rhs_pendulum(np.asarray(z)))


@pytest.mark.parametrize("name", [n for n in ALL if SYSTEMS[n].canonical])
def test_canonical_field_is_J_grad_H(name, key):
    system = SYSTEMS[name]()
    J = symplectic_matrix(system.dim // 2, dtype=jnp.float64)
    n = system.dim // 2

    @jax.jit
    @jax.vmap
    def check(z):
        out = {"field": system.vector_field(z), "J_grad_H": J @ jax.grad(system.hamiltonian)(z)}
        if system.separable:
            q, p = z[:n], z[n:]
            out["H"] = system.hamiltonian(z)
            out["T+V"] = system.kinetic(p) + system.potential(q)
            out["grad_T"] = system.grad_kinetic(p)
            out["grad_V"] = system.grad_potential(q)
            out["dT"] = jax.grad(system.kinetic)(p)
            out["dV"] = jax.grad(system.potential)(q)
        return out

    out = check(random_states(system, key()))
    np.testing.assert_allclose(out["field"], out["J_grad_H"], rtol=1e-13, atol=1e-13)
    if system.separable:
        # the field of a separable system is (∇T(p), -∇V(q)), to the last bit
        split = np.concatenate([out["grad_T"], -out["grad_V"]], axis=1)
        np.testing.assert_allclose(out["field"], split, rtol=1e-15, atol=0)
        np.testing.assert_allclose(out["H"], out["T+V"], rtol=1e-15)
        np.testing.assert_allclose(out["grad_T"], out["dT"], rtol=1e-15)
        np.testing.assert_allclose(out["grad_V"], out["dV"], rtol=1e-15)


@pytest.mark.parametrize("name", ALL)
def test_invariants_are_conserved_by_the_field(name, key):
    # d/dt I(z) = ∇I(z) · f(z) = 0 for every invariant, at random states.
    system = SYSTEMS[name]()

    @jax.jit
    @jax.vmap
    def rates(z):
        f = system.vector_field(z)
        out = {}
        for label, invariant in system.invariants.items():
            g = jax.grad(invariant)(z)
            out[label] = (jnp.dot(g, f), jnp.linalg.norm(g) * jnp.linalg.norm(f))
        return out

    for label, (rate, scale) in rates(random_states(system, key())).items():
        assert np.all(np.abs(rate) <= 1e-13 * (1.0 + scale)), (name, label, rate)


def test_invariant_check_can_fail(key):
    # Negative control: kinetic energy alone is not conserved.
    system = Pendulum()
    z = jnp.array([0.7, 0.2])
    rate = jnp.dot(jax.grad(lambda v: system.kinetic(v[1:]))(z), system.vector_field(z))
    assert abs(rate) > 1e-3


def test_rigid_body_structure(key):
    body = RigidBody()
    assert body.coefficients == (0.5, -1.0, 0.5)
    assert set(body.invariants) == {"energy", "casimir"}
    z = np.asarray(jax.random.normal(key(), (3,)))

    @jax.jit
    def quantities(z):
        return {
            "C": body.casimir(z),
            "H": body.hamiltonian(z),
            "div": jnp.trace(jax.jacfwd(body.vector_field)(z)),
            "f": body.vector_field(z),
            "z x grad H": jnp.cross(z, jax.grad(body.hamiltonian)(z)),
        }

    out = quantities(z)
    np.testing.assert_allclose(out["C"], np.sum(z**2), rtol=1e-15)
    np.testing.assert_allclose(out["H"], 0.5 * (z[0] ** 2 / 2 + z[1] ** 2 + 1.5 * z[2] ** 2), rtol=1e-15)
    # Divergence-free (volume-preserving flow): the trace of the Jacobian vanishes.
    assert abs(out["div"]) <= 1e-15
    # ż = z × ∇H
    np.testing.assert_allclose(out["f"], out["z x grad H"], atol=1e-15)
    a, b, c = RigidBody(inertia=(1.0, 2.0, 3.0)).coefficients
    np.testing.assert_allclose([a, b, c], [(2 - 3) / 6, (3 - 1) / 3, (1 - 2) / 2], rtol=1e-15)


def test_default_initial_conditions_are_documented_states():
    z = np.asarray(Pendulum().default_initial_conditions())
    np.testing.assert_array_equal(z[0], [1.0, 0.0])  # the SympNets trajectory
    body = RigidBody()
    zb = np.asarray(body.default_initial_conditions())
    s, c = math.sin(1.1), math.cos(1.1)
    np.testing.assert_allclose(zb, [[s, 0, c], [0, s, c]])
    # Kepler: semi-major axis 1 → energy -k/(2a) = -1/2, L = sqrt(1 - e²).
    kepler = Kepler()
    zk = kepler.default_initial_conditions()
    np.testing.assert_allclose(jax.vmap(kepler.hamiltonian)(zk), -0.5, rtol=1e-14)
    np.testing.assert_allclose(
        jax.vmap(kepler.angular_momentum)(zk), np.sqrt(1 - np.array([0, 0.3, 0.6]) ** 2), rtol=1e-14
    )
    # Kepler with other parameters: still a = 1, energy -k/2.
    k2 = Kepler(m=2.0, k=3.0)
    np.testing.assert_allclose(jax.vmap(k2.hamiltonian)(k2.default_initial_conditions()), -1.5)
    # Three bodies: zero total momentum; figure-eight energy as published (≈ -1.28714).
    tb = ThreeBody()
    z3 = tb.default_initial_conditions()
    np.testing.assert_allclose(jax.vmap(tb.momentum_x)(z3), 0.0, atol=1e-15)
    np.testing.assert_allclose(jax.vmap(tb.momentum_y)(z3), 0.0, atol=1e-15)
    assert abs(tb.hamiltonian(z3[0]) + 1.28714) < 1e-5
    # Hénon–Heiles defaults are below the escape energy 1/6.
    hh = HenonHeiles()
    assert np.all(np.asarray(jax.vmap(hh.hamiltonian)(hh.default_initial_conditions())) < 1 / 6)


def test_lagrange_triangle_is_a_relative_equilibrium():
    # Each body's acceleration is the centripetal one, -ω² q, for the rotating triangle.
    tb = ThreeBody(m=2.0, G=0.5)
    z = tb.default_initial_conditions()[1]
    f = tb.vector_field(z)
    q, v = z[:6], z[6:] / tb.m
    omega2 = float(jnp.sum(v[:2] ** 2))  # |v| = ω R with R = 1
    np.testing.assert_allclose(f[6:] / tb.m, -omega2 * q, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("name", ALL)
def test_dtype_follows_input(name, dtype):
    system = SYSTEMS[name]()
    z = system.default_initial_conditions(dtype=dtype)[0]
    f = jax.eval_shape(system.vector_field, z)
    assert f.dtype == dtype and f.shape == z.shape
    for invariant in system.invariants.values():
        value = jax.eval_shape(invariant, z)
        assert value.dtype == dtype and value.shape == ()
    # and the values agree with float64 to float32 accuracy: a force summed over the other
    # particles of a cluster carries the rounding of every term
    terms = system.n_particles - 1 if isinstance(system, geomlearn.systems.LennardJonesCluster) else 1
    field = jax.jit(system.vector_field)
    np.testing.assert_allclose(field(z), field(z.astype(jnp.float64)), rtol=1e-5, atol=1e-6 * terms)


@pytest.mark.parametrize("name", ["pendulum", "double_pendulum", "rigid_body"])
def test_jit_and_vmap(name, key):
    system = SYSTEMS[name]()
    zs = random_states(system, key(), n=2)
    eager = np.stack([np.asarray(system.vector_field(z)) for z in zs])
    np.testing.assert_allclose(jax.jit(jax.vmap(system.vector_field))(zs), eager, rtol=1e-14)
    np.testing.assert_allclose(
        jax.vmap(system.hamiltonian)(zs), [system.hamiltonian(z) for z in zs], rtol=1e-14
    )


def test_systems_are_immutable_and_hashable():
    p = Pendulum()
    with pytest.raises((AttributeError, dataclasses_frozen_error())):
        p.m = 2.0
    assert Pendulum() == Pendulum() and hash(Pendulum()) == hash(Pendulum())
    assert Pendulum(g=2.0) != Pendulum()
    leaves = jax.tree_util.tree_leaves(p)
    assert leaves == []  # parameters are static: the system is a constant under jit
    assert eqx.filter_jit(lambda s, z: s.vector_field(z))(p, jnp.array([1.0, 0.0])).shape == (2,)


def dataclasses_frozen_error():
    import dataclasses

    return dataclasses.FrozenInstanceError


@pytest.mark.parametrize(
    "make",
    [
        lambda: HarmonicOscillator(m=0.0),
        lambda: HarmonicOscillator(k=-1.0),
        lambda: Pendulum(l=0.0),
        lambda: Pendulum(g=float("nan")),
        lambda: DoublePendulum(m2=-1.0),
        lambda: CoupledHarmonicOscillator(m1=0.0),
        lambda: CoupledHarmonicOscillator(k=-0.1),
        lambda: HenonHeiles(lam=-1.0),
        lambda: Kepler(k=0.0),
        lambda: ThreeBody(m=-2.0),
        lambda: ThreeBody(G=float("inf")),
        lambda: RigidBody(inertia=(1.0, 0.0, 1.0)),
        lambda: RigidBody(inertia=(1.0, 2.0)),
    ],
)
def test_bad_parameters_raise_value_error(make):
    with pytest.raises(ValueError):
        make()


def test_bad_parameter_types_raise_type_error():
    with pytest.raises(TypeError, match="real number"):
        Pendulum(m="1")
    with pytest.raises(TypeError):
        RigidBody(inertia=2.0)
    # A coupling of 0 and a cubic term of 0 are allowed (uncoupled systems).
    CoupledHarmonicOscillator(k=0.0)
    HenonHeiles(lam=0.0)


@pytest.mark.parametrize("name", ALL)
def test_wrong_state_shape_raises(name):
    system = SYSTEMS[name]()
    with pytest.raises(ValueError, match=rf"shape \({system.dim},\)"):
        system.vector_field(jnp.zeros(system.dim + 1))
    with pytest.raises(ValueError, match="vmap"):
        system.hamiltonian(jnp.zeros((2, system.dim)))
    with pytest.raises(TypeError, match="floating"):
        system.vector_field(jnp.zeros(system.dim, dtype=jnp.int32))
    if system.separable:
        with pytest.raises(ValueError, match="momentum p"):
            system.kinetic(jnp.zeros(system.dim))


# --- the package: one module per family, a protocol without concrete overrides ---------

FAMILIES = {
    "canonical": {"HarmonicOscillator", "Pendulum", "DoublePendulum",
                  "CoupledHarmonicOscillator", "HenonHeiles", "Kepler", "ThreeBody"},
    "rigid": {"RigidBody"},
    "driven": {"ParametricPendulum", "ForcedOscillator", "ForcedRigidBody"},
    "lattices": {"bump", "TodaLattice", "LinearWave"},
    "port_hamiltonian": {"AbstractPortHamiltonianSystem", "DampedPendulum", "Duffing",
                         "ForcedMassSpring"},
    "particles": {"LennardJonesCluster"},
    "_custom": {"from_hamiltonian", "AbstractHamiltonianFromFunction", "HamiltonianFromFunction",
                "SeparableHamiltonianFromFunction"},
}
PROTOCOL = {"AbstractSystem", "AbstractHamiltonianSystem", "AbstractSeparableSystem"}


def test_every_name_is_re_exported_from_its_family_module():
    for family, names in FAMILIES.items():
        module = importlib.import_module(f"geomlearn.systems.{family}")
        assert set(module.__all__) == names, family
        for name in names:
            assert getattr(geomlearn.systems, name) is getattr(module, name)
    families = set().union(*FAMILIES.values())
    assert set(geomlearn.systems.__all__) == families | PROTOCOL
    assert {cls.__name__ for cls in SYSTEMS.values()} <= families
    # the command-line names live with the command line; the old place says where
    for name in ("SYSTEMS", "resolve_system"):
        with pytest.raises(ImportError, match=f"^geomlearn.systems.{name} moved to "
                                              f"geomlearn.cli.{name} "):
            getattr(geomlearn.systems, name)


def _system_classes(extra=()):
    classes = [c for module in ("_base", *FAMILIES)
               for c in vars(importlib.import_module(f"geomlearn.systems.{module}")).values()
               if isinstance(c, type) and issubclass(c, AbstractSystem)]
    return {*classes, *extra}


def concrete_overrides(classes) -> list[str]:
    """A method (or property) a class defines whose nearest definition up its bases, among
    the systems' classes, is not abstract. Dunder methods and class variables aside."""
    rows = []
    for cls in classes:
        for name, value in vars(cls).items():
            if name.startswith("__") or not (callable(value) or isinstance(value, property)):
                continue
            for base in cls.__mro__[1:]:
                if not issubclass(base, AbstractSystem) or name not in vars(base):
                    continue
                defined = vars(base)[name]
                if callable(defined) or isinstance(defined, property):
                    if not getattr(defined, "__isabstractmethod__", False):
                        rows.append(f"{cls.__name__}.{name} overrides {base.__name__}.{name}")
                break
    return rows


def test_only_abstract_methods_are_overridden():
    assert concrete_overrides(_system_classes()) == []


def test_concrete_override_check_can_fail():
    # Negative controls: the shapes this package had before (a separable base with its own
    # field, a forced system replacing a zero force) and a subclass of a final system.
    class OwnField(AbstractSeparableSystem):
        def vector_field(self, z):
            n = self.dim // 2
            return jnp.concatenate([self.grad_kinetic(z[n:]), -self.grad_potential(z[:n])])

    class Louder(geomlearn.systems.Duffing):
        def force(self, t):
            return 2.0 * super().force(t)

    rows = concrete_overrides(_system_classes([OwnField, Louder]))
    assert sorted(rows) == ["Louder.force overrides Duffing.force",
                            "OwnField.vector_field overrides AbstractHamiltonianSystem.vector_field"]


@pytest.mark.parametrize("name", ALL)
def test_invariants_are_the_declared_methods(name):
    system = SYSTEMS[name]()
    declared = system.invariant_methods  # a cluster's depend on its spatial dimension
    assert list(system.invariants) == [label for label, _ in declared]
    for label, method in declared:
        assert system.invariants[label] == getattr(system, method)
    assert (("energy", "hamiltonian") in declared) != isinstance(
        system, geomlearn.systems.AbstractPortHamiltonianSystem)


def test_driven_states_end_with_the_time():
    driven = {name for name in ALL if SYSTEMS[name].driven}
    assert driven == {"duffing", "forced_mass_spring"}
    for name in ALL:
        system = SYSTEMS[name]()
        z = np.asarray(system.default_initial_conditions())[0]
        last = float(jax.jit(system.vector_field)(z)[-1])  # one program, not one per operation
        # a driven state ends with τ, τ' = 1; the extended-phase-space systems keep E last
        assert (last == 1.0) == system.driven, (name, last)
        assert isinstance(system.driven, bool)


def test_force_is_part_of_the_port_hamiltonian_protocol(dtype):
    class Unforced(geomlearn.systems.AbstractPortHamiltonianSystem):
        dim: ClassVar[int] = 2
        n_dof: ClassVar[int] = 1

        def energy(self, x):
            return 0.5 * jnp.sum(x * x)

        def damping_coefficients(self):
            return (0.0, 0.1)

        @property
        def damping_rate(self):
            return 0.1

        def default_initial_conditions(self, dtype=None):
            return jnp.zeros((1, 2), dtype)

    with pytest.raises(TypeError, match="abstract method force"):
        Unforced()
    f = geomlearn.systems.DampedPendulum().force(jnp.asarray(1.3, dtype))
    assert f.dtype == dtype and f.shape == (2,) and not np.any(np.asarray(f))
    t = np.linspace(0.0, 5.0, 11)
    for system, amplitude, omega in ((geomlearn.systems.Duffing(gamma=0.4, omega=1.1), 0.4, 1.1),
                                     (geomlearn.systems.ForcedMassSpring(f0=1.5), 1.5, 3.0)):
        got = jax.vmap(system.force)(jnp.asarray(t, dtype))
        assert got.dtype == dtype
        expected = np.stack([np.zeros_like(t), amplitude * np.sin(omega * t)], axis=1)
        np.testing.assert_allclose(got, expected, rtol=1e-6 if dtype == jnp.float32 else 1e-15,
                                   atol=1e-6 if dtype == jnp.float32 else 1e-15)
