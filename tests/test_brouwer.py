"""Round-off at its limit: the compensated rollout of the Lie–Poisson network
(`LiePoissonRidgeLayer.increment`, `LiePoissonNet.compensated_step`,
`geomlearn.models._base.compensated_rollout`, what `geomlearn.iterate` runs).

The Casimir |z|² of a rollout may move only by rounding, which grows like ε√n when the
rounding is unbiased (Brouwer's law). Negative controls: the plain scan of the same map
(no compensation) and the layers in the sin/cos form, whose rounding is biased."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import geomlearn as gl
from geomlearn.models import LiePoissonNet
from geomlearn.models._base import compensated_rollout, scan_rollout

from _helpers import normal, randomize

N_STEPS = 4000
#: unit round-off of float32
UNIT = 2.0**-24


def _network(rng, key, dtype=jnp.float32):
    """Six layers, every parameter from N(0, 0.3²): axes anywhere, angles ~0.1–0.5."""
    model = randomize(LiePoissonNet(3, n_layers=6, width=2, key=key()), rng, 0.3)
    return jax.tree_util.tree_map(lambda x: x.astype(dtype) if eqx.is_inexact_array(x) else x,
                                  model)


def _drift(states) -> float:
    z = np.asarray(states, np.float64)
    c = np.sum(z * z, axis=-1)
    return float(np.max(np.abs(c[..., 1:] / c[..., :1] - 1.0)))


def _sin_cos(model):
    """The network with its layers in the sin/cos form (biased rounding of |n|, sin, cos)."""
    params, static = eqx.partition(model.layers, eqx.is_array)

    def layer_map(z, layer_params):
        layer = eqx.combine(layer_params, static)
        n = layer.axis(z.dtype)
        s = jnp.dot(n, z)
        theta = layer.slope(s)
        half = jnp.sin(0.5 * theta)
        return z + jnp.sin(theta) * jnp.cross(z, n) - (2 * half * half) * (z - s * n), None

    return lambda z: jax.lax.scan(layer_map, z, params)[0]


def test_layer_is_z_plus_its_increment(rng, key):
    layer = _network(rng, key, jnp.float64).layer(2)
    z = normal(rng, (3,))
    for h in (None, 0.3):
        np.testing.assert_array_equal(layer(z, h), z + layer.increment(z, h))
        np.testing.assert_array_equal(layer.inverse(z, h),
                                      z + layer.increment(z, h, inverse=True))
    # the increment is the exact rotation s n + cos θ (z - s n) + sin θ (z × n) - z
    n = layer.axis()
    s = jnp.dot(n, z)
    theta = layer.slope(s)
    exact = s * n + jnp.cos(theta) * (z - s * n) + jnp.sin(theta) * jnp.cross(z, n) - z
    np.testing.assert_allclose(layer.increment(z), exact, rtol=0, atol=1e-14)


def test_compensated_step_is_the_model_map_to_rounding(rng, key):
    model = _network(rng, key, jnp.float64)
    z = normal(rng, (3,))
    c = jnp.zeros(3)
    plain = z
    for _ in range(5):
        z, c = model.compensated_step(z, c)
        plain = model(plain)
        np.testing.assert_allclose(z, plain, rtol=0, atol=1e-14)
        assert float(jnp.max(jnp.abs(c))) <= 1e-15
    # the carried rounding is not simplified away: it is nonzero after a few steps
    assert float(jnp.max(jnp.abs(c))) > 0.0


def test_iterate_runs_the_compensated_scan(rng, key):
    model = _network(rng, key)
    z0 = normal(rng, (2, 3), jnp.float32)
    n_points = 41
    compensated = eqx.filter_jit(lambda m, z: jax.vmap(
        lambda y: compensated_rollout(m.compensated_step, y, n_points))(z))(model, z0)
    plain = eqx.filter_jit(lambda m, z: jax.vmap(
        lambda y: scan_rollout(m, y, n_points))(z))(model, z0)
    out = gl.iterate(model, z0, n_points)
    np.testing.assert_array_equal(out, compensated)
    # negative control: the plain scan of the same map is a different sequence of roundings
    assert not np.array_equal(np.asarray(out), np.asarray(plain))
    np.testing.assert_allclose(out, plain, rtol=0, atol=1e-3)


def test_float32_casimir_drift_is_at_the_round_off_limit(rng, key):
    """Compensated: ≤ 5 ε√n over 4000 steps in float32 (6 rollouts). The plain scan of the
    same map is not better, and the sin/cos form (biased) exceeds the bound."""
    model = _network(rng, key)
    z0 = normal(rng, (6, 3), jnp.float32)
    n_points = N_STEPS + 1
    bound = 5.0 * UNIT * np.sqrt(N_STEPS)
    compensated = _drift(gl.iterate(model, z0, n_points))
    plain = _drift(jax.jit(jax.vmap(lambda z: scan_rollout(model, z, n_points)))(z0))
    old = _sin_cos(model)
    biased = _drift(jax.jit(jax.vmap(lambda z: scan_rollout(old, z, n_points)))(z0))
    assert compensated <= bound, (compensated, bound)
    assert plain >= compensated, (plain, compensated)
    assert biased > bound, (biased, bound)
