"""Lie–Poisson networks on so(3)* (geomlearn.layers.lie_poisson, geomlearn.models.lie_poisson)
and the residuals that test them (geomlearn.geometry.poisson_residual, casimir_residual).

Every structure claim is checked against a negative control that must fail the same check:
a rotation whose angle is read off a direction other than its axis (a rotation, so it keeps
|z|, but not the flow of a Hamiltonian, so not a Poisson map) and a volume-preserving shear
(keeps volume, neither |z| nor the bracket)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn import cli
from geomlearn.cli import MODELS as REGISTRY
from geomlearn.geometry import casimir_residual, hat_matrix, poisson_residual, volume_residual
from geomlearn.layers import LiePoissonRidgeLayer
from geomlearn.models import AbstractFeedForwardIntegrator, LiePoissonNet
from geomlearn.structures import LiePoisson, structure_named

from _helpers import n_params, normal, randomize

RNG_SEED = 3


def _residuals(fmap, Z):
    """`(3, B)`: the Poisson, Casimir and volume residuals of `fmap` at the points `Z`."""
    return jax.jit(jax.vmap(
        lambda z: jnp.stack([poisson_residual(fmap, z), casimir_residual(fmap, z),
                             volume_residual(fmap, z)]), out_axes=1))(Z)


@eqx.filter_jit
def residuals(module, Z, H):
    """`(3, B)`: the Poisson, Casimir and volume residuals of `z ↦ module(z, h)` at each
    point `z` of `Z` with its step `h` of `H`."""

    def one(z, h):
        f = lambda v: module(v, h)  # noqa: E731
        return jnp.stack([poisson_residual(f, z), casimir_residual(f, z), volume_residual(f, z)])

    return jax.vmap(one, out_axes=1)(Z, H)


def misaligned(layer, m):
    """Negative control: the layer's rotation about its axis n, but by the angle
    φ'(m·z) read off another direction m — a rotation (|z| kept), not a flow."""

    def f(z):
        n = layer.axis(z.dtype)
        theta = layer.slope(jnp.dot(m.astype(z.dtype), z))
        s = jnp.dot(n, z)
        return s * n + jnp.cos(theta) * (z - s * n) + jnp.sin(theta) * jnp.cross(z, n)

    return f


def shear(z):
    """Negative control: a volume-preserving shear of R³ (det = 1), not a Poisson map."""
    return z.at[0].add(0.5 * jnp.sin(z[1]) + 0.3 * z[2] ** 2)


@gl.register
class LeakyLiePoisson(LiePoissonNet):
    """Negative control: claims "lie-poisson", but shears after the rotations."""

    def __call__(self, z, h=None):
        return shear(super().__call__(z, h))


# --------------------------------------------------------------------------- conventions


def test_bracket_sign_matches_the_rigid_body(rng):
    """B(z) ∇H = z × ∇H is RigidBody's vector field (Euler's equations), so hat_matrix
    is the Poisson tensor of {F, G} = -z·(∇F × ∇G) with the system's sign; and the
    bracket written both ways agrees."""
    system = gl.systems.RigidBody()
    for z in normal(rng, (4, 3)):
        field = hat_matrix(z) @ jax.grad(system.hamiltonian)(z)
        np.testing.assert_allclose(field, system.vector_field(z), rtol=1e-13, atol=1e-14)
        gF, gG = normal(rng, (2, 3))
        np.testing.assert_allclose(gF @ hat_matrix(z) @ gG, -jnp.dot(z, jnp.cross(gF, gG)),
                                   rtol=1e-13, atol=1e-14)


def test_residuals_of_known_maps(rng):
    """A fixed rotation is Poisson (0); a scaling z ↦ 2z is not (the bracket is linear in
    z: DΦ B(z) DΦᵀ = 4B(z) against B(2z) = 2B(z), residual 2); the Casimir residual of 2z is 3."""
    R, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    R = jnp.asarray(R * np.sign(np.linalg.det(R)))
    z = normal(rng, (3,))
    assert float(poisson_residual(lambda v: R @ v, z)) < 1e-14
    assert float(casimir_residual(lambda v: R @ v, z)) < 1e-14
    assert float(poisson_residual(lambda v: 2.0 * v, z)) == pytest.approx(2.0, rel=1e-12)
    assert float(casimir_residual(lambda v: 2.0 * v, z)) == pytest.approx(3.0, rel=1e-12)
    for fn in (poisson_residual, casimir_residual):
        with pytest.raises(ValueError, match="so\\(3\\)\\* = R\\^3: expected a point of shape \\(3,\\), got shape \\(4,\\)"):
            fn(lambda v: v, jnp.ones(4))
    with pytest.raises(ValueError, match="shape \\(3,\\), got shape \\(2,\\)"):
        hat_matrix(jnp.ones(2))


# --------------------------------------------------------------------------- layers


def test_layer_is_poisson_and_keeps_the_casimir(rng, key, tol, dtype):
    H = jnp.asarray([1.0, 0.3, -0.7, 1.6], dtype)
    bound = tol(dtype, "structure")
    layer = randomize(LiePoissonRidgeLayer(width=3, key=key(), dtype=dtype), rng, 0.5)
    Z = normal(rng, (4, 3), dtype)
    res = residuals(layer, Z, H)
    assert res.dtype == dtype
    assert float(jnp.max(res)) <= bound, res
    out = jax.vmap(layer)(Z, H)
    assert float(jnp.max(jnp.abs(out - Z))) > 1e-2  # it really moves points
    n = layer.axis(dtype)
    np.testing.assert_allclose(out @ n, Z @ n, rtol=0, atol=10 * tol(dtype))  # n·z kept
    # negative controls: the same rotation with the angle read off another direction
    # keeps |z| but is not Poisson; a volume-preserving shear keeps neither
    bad = _residuals(misaligned(layer, normal(rng, (3,), dtype)), Z)
    assert float(jnp.max(bad[1])) <= bound and float(jnp.min(bad[0])) > 1e-3, bad
    sheared = _residuals(shear, Z)
    assert float(jnp.max(sheared[2])) <= bound
    assert float(jnp.min(sheared[0])) > 1e-3 and float(jnp.min(sheared[1])) > 1e-3


@eqx.filter_jit
def _flow_check(layer, z, h):
    velocity = jax.jacfwd(lambda s: layer(z, s))(h)
    out = layer(z, h)
    field = jnp.cross(out, jax.grad(layer.hamiltonian)(out))
    return velocity, field, layer.hamiltonian(out), layer.hamiltonian(z), layer.inverse(out, h)


def test_layer_is_the_exact_flow_of_its_hamiltonian(rng, key):
    """h ↦ layer(z, h) starts at z and solves ż = z × ∇H(z), H = layer.hamiltonian (∇H
    by autodiff of the quadrature, independently of the closed form); H is kept and the
    flow backwards undoes it."""
    layer = randomize(LiePoissonRidgeLayer(width=3, key=key()), rng, 0.7)
    z = normal(rng, (3,))
    np.testing.assert_array_equal(layer(z, 0.0), z)
    for h in (0.4, -1.3):
        velocity, field, h_out, h_in, back = _flow_check(layer, z, jnp.asarray(h))
        np.testing.assert_allclose(velocity, field, rtol=1e-10, atol=1e-12)
        assert float(h_out) == pytest.approx(float(h_in), abs=1e-12)
        np.testing.assert_allclose(back, z, rtol=0, atol=1e-14)


def test_layer_initial_direction_and_errors(key):
    layer = LiePoissonRidgeLayer(direction=(0.0, 2.0, 0.0), key=key())
    np.testing.assert_array_equal(layer.axis(), [0.0, 1.0, 0.0])
    with pytest.raises(ValueError, match="not all zero"):
        LiePoissonRidgeLayer(direction=(0.0, 0.0, 0.0), key=key())
    with pytest.raises(ValueError, match="three finite numbers"):
        LiePoissonRidgeLayer(direction=(1.0, 0.0), key=key())
    with pytest.raises(ValueError, match="width must be >= 1"):
        LiePoissonRidgeLayer(width=0, key=key())
    with pytest.raises(ValueError, match="last dimension 3, got shape \\(4,\\)"):
        layer(jnp.ones(4))


# --------------------------------------------------------------------------- the network


def test_model_is_poisson_and_keeps_the_casimir(rng, key, tol, dtype):
    bound = tol(dtype, "structure")
    H = jnp.asarray([1.0, 0.3, -0.7, 1.2], dtype)
    model = randomize(LiePoissonNet(3, n_layers=6, width=2, key=key(), dtype=dtype), rng, 0.4)
    assert isinstance(model, AbstractFeedForwardIntegrator) and model.structure == "lie-poisson"
    Z = normal(rng, (4, 3), dtype)
    res = residuals(model, Z, H)
    assert res.dtype == dtype and float(jnp.max(res)) <= bound, res
    # negative control: one layer replaced by its misaligned rotation
    layers = [model.layer(i) for i in range(model.n_layers)]
    m = normal(rng, (3,), dtype)

    def broken(z):
        for i, layer in enumerate(layers):
            z = misaligned(layer, m)(z) if i == 2 else layer(z)
        return z

    bad = _residuals(broken, Z)
    assert float(jnp.max(bad[1])) <= bound and float(jnp.min(bad[0])) > 1e-3, bad


def test_rollout_stays_on_the_sphere(rng, key):
    """10⁴ steps in float64: the Casimir drifts by round-off only (≤ 1e-12 relative);
    the same rollout with a volume-preserving shear of size 1e-3 composed in drifts."""
    model = randomize(LiePoissonNet(3, n_layers=4, width=2, key=key()), rng, 0.4)
    z0 = normal(rng, (3,))
    traj = gl.iterate(model, z0, 10_001)
    c = jnp.sum(traj**2, axis=-1)
    assert float(jnp.max(jnp.abs(c - c[0])) / c[0]) <= 1e-12

    def step(z, _):
        z = model(z)
        z = z.at[0].add(1e-3 * jnp.sin(z[1]))
        return z, jnp.sum(z**2)

    _, cs = jax.jit(lambda z: jax.lax.scan(step, z, None, length=10_000))(z0)
    assert float(jnp.max(jnp.abs(cs - c[0])) / c[0]) > 1e-4


def test_inverse_step_size_and_stacking(rng, key):
    model = randomize(LiePoissonNet(3, n_layers=5, width=2, key=key()), rng, 0.4)
    z = normal(rng, (3,))
    for h in (None, 0.4, -1.2):
        out = model(z, h)
        assert float(jnp.max(jnp.abs(out - z))) > 1e-3
        np.testing.assert_allclose(model.inverse(out, h), z, rtol=0, atol=1e-13)
    np.testing.assert_allclose(model(z), model(z, 1.0), rtol=0, atol=1e-15)
    np.testing.assert_allclose(model(z, 0.0), z, rtol=0, atol=1e-15)
    out = z
    for i in range(5):
        out = model.layer(i)(out)
    np.testing.assert_allclose(model(z), out, rtol=0, atol=1e-14)
    with pytest.raises(IndexError):
        model.layer(5)


def test_initial_axes_and_parameter_count(key):
    model = LiePoissonNet(3, n_layers=5, width=2, key=key())
    axes = jnp.stack([model.layer(i).axis() for i in range(5)])
    np.testing.assert_array_equal(axes, np.eye(3)[[0, 1, 2, 0, 1]])
    assert n_params(eqx.filter_eval_shape(LiePoissonNet, 3, n_layers=7, width=4, key=key())) == 7 * (5 + 12)


def test_jit_vmap_grad_and_dtype(rng, key, dtype, tol):
    model = randomize(LiePoissonNet(3, n_layers=4, width=2, key=key(), dtype=jnp.float64), rng, 0.5)
    Z = normal(rng, (3, 3), dtype)
    out = jax.vmap(model)(Z)
    assert out.dtype == dtype and out.shape == Z.shape
    np.testing.assert_allclose(out, jnp.stack([model(z) for z in Z]), rtol=0, atol=tol(dtype))
    np.testing.assert_allclose(eqx.filter_jit(model)(Z[0]), model(Z[0]), rtol=0, atol=tol(dtype))
    hs = jnp.asarray([0.1, 0.5, -0.3], dtype)
    np.testing.assert_allclose(jax.vmap(model)(Z, hs), jnp.stack([model(z, h) for z, h in zip(Z, hs)]),
                               rtol=0, atol=tol(dtype))
    grads = eqx.filter_grad(lambda m: jnp.sum(jax.vmap(m)(Z) ** 3))(model)
    leaves = jax.tree_util.tree_leaves(eqx.filter(grads, eqx.is_inexact_array))
    assert leaves and all(bool(jnp.all(jnp.isfinite(g))) for g in leaves)
    assert all(float(jnp.max(jnp.abs(g))) > 0 for g in leaves)


def test_wrong_dimension_is_refused(key):
    for dim in (2, 4, 6):
        with pytest.raises(ValueError, match=f"dim must be 3, got {dim}"):
            LiePoissonNet(dim, n_layers=2, key=key())
    with pytest.raises(ValueError, match="n_layers must be >= 1"):
        LiePoissonNet(3, n_layers=0, key=key())
    with pytest.raises(TypeError, match="dim must be an integer"):
        LiePoissonNet(3.0, n_layers=1, key=key())
    model = LiePoissonNet(3, n_layers=2, key=key())
    with pytest.raises(ValueError, match="last dimension 3, got shape \\(4,\\)"):
        model(jnp.ones(4))
    with pytest.raises(ValueError, match="scalar"):
        model(jnp.ones(3), jnp.ones(2))


# --------------------------------------------------------------------------- protocol


def test_save_load_round_trip(tmp_path, rng, key):
    model = randomize(LiePoissonNet(3, n_layers=4, width=3, activation="sigmoid", key=key()), rng, 0.5)
    path = gl.save(tmp_path / "lpnet.geomlearn", model)
    loaded = gl.load(path)
    assert type(loaded) is LiePoissonNet and loaded.config() == model.config()
    z = normal(rng, (3,))
    np.testing.assert_array_equal(loaded(z), model(z))


def test_check_structure_tests_and_names_the_poisson_property(rng, key):
    model = randomize(LiePoissonNet(3, n_layers=4, width=2, key=key()), rng, 0.4)
    points = normal(rng, (6, 3))
    check = gl.check_structure(model, points)
    assert check.passed and check.structure == "lie-poisson"
    assert set(check.residuals) == {"poisson", "casimir", "volume"}
    assert all(check.claimed(name) for name in check.residuals)
    text = check.report(title="lpnet")
    assert "poisson" in text and "not claimed" not in text and text.endswith("PASS")

    leaky = LeakyLiePoisson(3, n_layers=4, width=2, key=key())
    bad = gl.check_structure(leaky, points)
    assert not bad.passed and bad.residuals["poisson"] > 1e-3 and bad.residuals["casimir"] > 1e-3
    assert bad.report(title="leaky").endswith("FAIL")


def test_geomlearn_check_names_the_poisson_property(tmp_path, rng, key, capsys):
    """`geomlearn check` on a saved network: PASS with the Poisson residual named; the
    same check of a network that breaks its claim exits 1 naming the failure."""
    model = randomize(LiePoissonNet(3, n_layers=3, width=2, key=key()), rng, 0.4)
    gl.save(tmp_path / "model.geomlearn", model)
    assert cli.main(["check", str(tmp_path), "--points", "3"]) == 0
    text = capsys.readouterr().out
    assert "'lie-poisson'" in text and "poisson" in text and "casimir" in text
    assert text.rstrip().endswith("PASS")
    gl.save(tmp_path / "model.geomlearn", LeakyLiePoisson(3, n_layers=3, width=2, key=key()))
    assert cli.main(["check", str(tmp_path), "--points", "3"]) == 1
    bad = [row for row in capsys.readouterr().out.splitlines() if row.strip().startswith("poisson")]
    assert bad and bad[0].rstrip().endswith("FAIL")


def test_structure_object():
    s = structure_named("lie-poisson")
    assert s == LiePoisson() and s.preserves_anything
    assert s.claims("poisson") and s.claims("casimir") and s.claims("volume")
    assert not s.claims("symplecticity")


def _rigid_body_data(n_traj=3, n_steps=10):
    system = gl.systems.RigidBody()
    angles = np.linspace(0.3, 1.3, n_traj)
    z0 = jnp.asarray(np.stack([np.sin(angles), 0.2 * np.ones(n_traj), np.cos(angles)], -1))
    return system, gl.TrajectoryData.from_system(system, z0, 0.2, n_steps, method="implicit_midpoint")


def test_levenberg_marquardt_fit_reduces_the_loss(key):
    _, data = _rigid_body_data()
    model = LiePoissonNet(3, n_layers=3, width=1, key=key())
    trained, history = gl.fit(model, data, epochs=10, optimizer=gl.LevenbergMarquardt(),
                              key=key(), progress=False)
    assert history["loss"][-1] < 0.1 * history["loss"][0]
    rollout = gl.iterate(trained, data.states[:, 0], data.states.shape[1])
    c0 = jnp.sum(data.states[:, :1] ** 2, axis=-1)
    assert float(jnp.max(jnp.abs(jnp.sum(rollout**2, axis=-1) - c0) / c0)) <= 1e-13


def test_command_line_registry(key):
    spec = REGISTRY["lpnet"]
    assert spec.cls is LiePoissonNet and spec.structure == "lie-poisson" and not spec.needs_canonical
    model = spec.build(3, key=key())
    assert isinstance(model, LiePoissonNet)
    assert spec.incompatibility(gl.systems.RigidBody()) is None
    why = spec.incompatibility(gl.systems.Pendulum())
    assert why and "2-dimensional" in why
    fits = [name for name, cls in cli.SYSTEMS.items() if spec.incompatibility(cls()) is None]
    assert fits == ["rigid_body"]
