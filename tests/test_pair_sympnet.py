"""`PairSympNet` and the particle symmetries (`Permutation`, `Particles`): symplectic
for random parameters, total and angular momentum conserved to round-off over 10⁴
steps, equivariant under rotations, reflections, relabellings and translations of q,
each against a negative control (a `GSympNet` of the same size, or a deliberately
broken map); identity at initialisation, save/load, rollouts and one-line errors."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn.geometry import symplecticity_residual
from geomlearn.models import PairSympNet
from geomlearn.symmetries import Particles, Permutation

from _helpers import random_module

RNG_SEED = 53
N_STEPS = 10_000
SHAPES = [(4, 2), (5, 3)]  # (particles, spatial dimension)
IDS = ["4x2d", "5x3d"]


def pair_net(N, k, dtype, seed=0, activation="tanh", **options):
    """A `PairSympNet` with random parameters, signed so that the pair potential attracts
    and the kinetic energy grows with |p| (bounded orbits for a fair long test)."""
    model = random_module(lambda: PairSympNet(N, k, n_layers=3, width=4, activation=activation,
                                              key=jax.random.PRNGKey(0), dtype=dtype, **options),
                          np.random.default_rng(seed), 0.5)
    fix = lambda s: 0.3 * jnp.abs(s.a) * jnp.sign(s.w)  # noqa: E731  (a·w > 0: φ', ψ' > 0)
    return eqx.tree_at(lambda m: (m.layers.kick.a, m.layers.drift.a), model,
                       (fix(model.layers.kick), fix(model.layers.drift)))


def plain_net(dim, dtype, seed=0):
    """The negative control: a `GSympNet` of random parameters."""
    return random_module(lambda: gl.GSympNet(dim, n_layers=2, width=4, key=jax.random.PRNGKey(0), dtype=dtype),
                         np.random.default_rng(seed), 0.3)


def state(N, k, dtype, seed=1):
    """A random state of `N` particles in `k` dimensions."""
    rng = np.random.default_rng(seed)
    q, p = rng.standard_normal((N, k)), 0.3 * rng.standard_normal((N, k))
    return jnp.asarray(np.concatenate([q.ravel(), p.ravel()]), dtype)


def at_rest(z, N, k):
    """`z` with its centre of mass at the origin and its total momentum zero (else the
    cluster drifts away, and a long test of round-off measures the growth of |q|)."""
    q, p = z[:N * k].reshape(N, k), z[N * k:].reshape(N, k)
    return jnp.concatenate([(q - q.mean(0)[None]).ravel(), (p - p.mean(0)[None]).ravel()])


def orthogonal(k, seed):
    """A random orthogonal matrix with determinant −1 (a rotation times a reflection)."""
    Q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((k, k)))
    return Q if np.linalg.det(Q) < 0 else Q @ np.diag([-1.0] + [1.0] * (k - 1))


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("N,k", SHAPES, ids=IDS)
def test_symplectic_for_random_parameters(N, k, symmetric, dtype, tol):
    model = pair_net(N, k, dtype, symmetric=symmetric)
    z = state(N, k, dtype)

    @eqx.filter_jit
    def residuals(model, z):
        # negative control: the same map followed by p_0 += 0.1 q_1 (a non-symmetric shear)
        broken = lambda x: model(x).at[N * k].add(0.1 * x[1])  # noqa: E731
        return symplecticity_residual(model, z), symplecticity_residual(broken, z), model.inverse(model(z))

    kept, broken, back = residuals(model, z)
    assert float(kept) < 10 * tol(dtype, "structure")
    assert float(broken) > 1e-3
    np.testing.assert_allclose(back, z, atol=100 * tol(dtype), rtol=0)


@eqx.filter_jit
def momentum_drift(model, group, z0):
    """`max_t |μ(z_t) − μ(z_0)|` over `N_STEPS` steps relative to `max_t |q_t||p_t|`,
    and `max_t |z_t|`."""
    n = z0.shape[0] // 2

    def body(z, _):
        z = model(z)
        return z, (group.momentum_map(z), jnp.linalg.norm(z[:n]) * jnp.linalg.norm(z[n:]), jnp.linalg.norm(z))

    _, (mu, scale, size) = jax.lax.scan(body, z0, None, length=N_STEPS)
    return jnp.max(jnp.abs(mu - group.momentum_map(z0)[None])) / jnp.max(scale), jnp.max(size)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize("N,k", SHAPES, ids=IDS)
def test_momenta_conserved_over_long_rollouts(N, k, dtype):
    group = Particles(N, k)
    model = pair_net(N, k, dtype, activation="softplus")  # pair forces that confine
    z0 = at_rest(state(N, k, dtype), N, k)
    drift, size = momentum_drift(model, group, z0)
    assert bool(jnp.isfinite(size)) and float(size) < 1e3  # a bounded orbit: a fair test
    assert float(drift) < 100 * float(jnp.finfo(dtype).eps) * np.sqrt(N_STEPS)
    plain_drift, plain_size = momentum_drift(plain_net(2 * N * k, dtype), group, z0)
    assert bool(jnp.isfinite(plain_size))
    assert float(plain_drift) > 1e3 * float(drift)  # negative control: orders of magnitude more


@pytest.mark.parametrize("N,k", SHAPES, ids=IDS)
def test_equivariant_under_rotations_relabellings_and_translations(N, k, dtype, tol):
    group = Particles(N, k)
    z = state(N, k, dtype)
    R = orthogonal(k, 3)
    perm = np.random.default_rng(4).permutation(N)
    c = np.linspace(-2.0, 3.0, k)
    moves = [(R, None, None), (None, None, perm), (None, c, None), (R, c, perm)]
    model, plain = pair_net(N, k, dtype, symmetric=True), plain_net(2 * N * k, dtype)

    @eqx.filter_jit
    def gaps(f, z):
        outs = jax.vmap(f)(jnp.stack([z] + [group.act(z, g) for g in moves]))  # one map, five inputs
        return jnp.stack([jnp.max(jnp.abs(out - group.act(outs[0], g))) for out, g in zip(outs[1:], moves)])

    assert float(jnp.max(gaps(model, z))) < 100 * tol(dtype)
    assert float(jnp.min(gaps(plain, z))) > 1e-3  # negative control: every move breaks it


def test_identity_init_is_the_identity_and_trains(dtype):
    model = PairSympNet(4, 2, n_layers=1, width=3, identity_init=True, key=jax.random.PRNGKey(1), dtype=dtype)
    z = state(4, 2, dtype)

    @eqx.filter_jit
    def output_and_gradient(m):
        return m(z), eqx.filter_grad(lambda m: jnp.sum((m(z) - 1.0) ** 2))(m)

    out, grads = output_and_gradient(model)
    assert bool(jnp.all(out == z))
    assert float(jnp.max(jnp.abs(grads.layers.kick.a))) > 0 and float(jnp.max(jnp.abs(grads.layers.drift.a))) > 0


def test_save_load_rollout_and_group(tmp_path):
    model = pair_net(3, 3, jnp.float64, activation="softplus", symmetric=True)
    gl.save(tmp_path / "pair", model)
    loaded = gl.load(tmp_path / "pair")
    z = state(3, 3, jnp.float64)
    assert type(loaded) is PairSympNet and loaded.config() == model.config()
    np.testing.assert_array_equal(loaded(z), model(z))
    assert loaded.group == Particles(3, 3) and loaded.symmetry == "particles:3/3"
    assert loaded.kept_symmetry() == Particles(3, 3)
    assert model.structure == "symplectic"
    orbit = gl.iterate(loaded, z, 5)
    np.testing.assert_allclose(orbit[-1], model(model(model(model(z)))), rtol=1e-12, atol=1e-12)


def test_momentum_map_is_the_cluster_s_momenta():
    system = gl.systems.LennardJonesCluster(n_particles=4, spatial_dim=3)
    z = state(4, 3, jnp.float64)
    mu = Particles(4, 3).momentum_map(z)
    expected = [system.momentum_x(z), system.momentum_y(z), system.momentum_z(z),
                system.angular_momentum_x(z), system.angular_momentum_y(z), system.angular_momentum_z(z)]
    np.testing.assert_allclose(mu, jnp.stack(expected), rtol=1e-13, atol=1e-13)
    system2 = gl.systems.LennardJonesCluster(n_particles=4, spatial_dim=2)
    z2 = state(4, 2, jnp.float64)
    np.testing.assert_allclose(Particles(4, 2).momentum_map(z2)[2], system2.angular_momentum(z2), rtol=1e-13)


def test_symmetry_objects_keep_gsympnet_invariant():
    """`Particles` and `Permutation` as `symmetry=` of a `GSympNet`: its features are
    invariant, so the network conserves P and L and commutes with relabellings."""
    z = state(3, 2, jnp.float64)
    group, perm, swap = Particles(3, 2), Permutation([(0, 2)], particle_dim=2), [2, 1, 0]
    model, relabel = (random_module(lambda: gl.GSympNet(12, n_layers=2, width=3, symmetry=s, key=jax.random.PRNGKey(0)),
                                    np.random.default_rng(5), 0.3) for s in (group, perm))

    @eqx.filter_jit
    def gaps(model, relabel, z):
        moved = (None, np.linspace(-1, 1, 2), swap)
        return (jnp.abs(group.momentum_map(model(z)) - group.momentum_map(z)),
                jnp.abs(model(group.act(z, moved)) - group.act(model(z), moved)),
                jnp.abs(relabel(perm.act(z, swap)) - perm.act(relabel(z), swap)))

    for gap in gaps(model, relabel, z):
        assert float(jnp.max(gap)) < 1e-12
    assert perm.momentum_map(z).shape == (0,)


def one_line(excinfo) -> str:
    text = str(excinfo.value)
    assert "\n" not in text
    return text


def test_one_line_errors():
    model = PairSympNet(4, 2, n_layers=1, width=2, key=jax.random.PRNGKey(0))
    with pytest.raises(ValueError) as e:
        model(jnp.zeros(12))
    assert "16" in one_line(e)
    with pytest.raises(ValueError) as e:
        PairSympNet(1, 3, key=jax.random.PRNGKey(0))
    assert "n_particles" in one_line(e)
    with pytest.raises(ValueError) as e:
        Particles(4, 2).check(12)
    assert "16" in one_line(e)
    with pytest.raises(ValueError) as e:
        gl.GSympNet(12, symmetry=Particles(4, 2), key=jax.random.PRNGKey(0))
    one_line(e)
    with pytest.raises(ValueError) as e:
        Permutation([(0, 1), (1, 2)])
    assert "disjoint" in one_line(e)
    with pytest.raises(ValueError) as e:
        Permutation([(0, 1)], particle_dim=2).act(jnp.zeros(12), [0, 2, 1])
    assert "mixes" in one_line(e)
    with pytest.raises(ValueError) as e:
        Particles(3, 2).act(jnp.zeros(12), (None, None, [0, 0, 1]))
    assert "permutation" in one_line(e)
