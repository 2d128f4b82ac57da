"""Step-aware transformer integrators: `model(Z, steps=s)` advances every row-wise layer of
row t by the step s_t; the window map stays symplectic / volume-preserving for every
sequence of steps (negative controls: the attention or a state-dependent step scaled the
same way), all-one steps give the model as it is, and bad steps get a clear error."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomlearn.geometry import symplecticity_residual, volume_residual
from geomlearn import VolumePreservingLowerLayer
from geomlearn.models import (
    LinearSymplecticTransformer,
    SymplecticTransformer,
    Transformer,
    VolumePreservingTransformer,
)

from _helpers import random_module

_T = 5
_STEPS = jnp.asarray([0.5, 1.4, 0.8, 1.5, 0.55])  # drawn from [0.5, 1.5]


def _model(build, seed=1):
    return random_module(build, np.random.default_rng(seed), scale=0.5)


def _with_steps(model, z, s):
    return model(z, steps=s)


@eqx.filter_jit
def _residuals(check, call, model, Z, step_draws):
    """`check` (a structure residual) of `z -> call(model, z, s)` at `Z` for every row `s`
    of `step_draws`, in one compiled program."""
    return jax.vmap(lambda s: check(lambda y: call(model, y, s), Z))(step_draws)


@eqx.filter_jit
def _outputs(model, Z, steps):
    """`model` at `Z` with `steps`, with all-one steps and without steps, compiled once
    (the two stepped calls as one loop body)."""
    stepped, ones = jax.lax.map(lambda s: model(Z, steps=s), jnp.stack([steps, jnp.ones_like(steps)]))
    return stepped, ones, model(Z)


@eqx.filter_jit
def _volume_checks(model, Z, steps):
    """What the volume test reads, in one program: the residual of `z -> model(z, steps)`,
    the outputs of `_outputs`, the inverse of the stepped output and the inference form's
    stepped output."""
    Y, ones, plain = _outputs(model, Z, steps)
    residual = volume_residual(lambda y: model(y, steps=steps), Z)
    inference = model.inference_form()(Z, steps=steps)
    return residual, Y, ones, plain, model.inverse(Y, steps=steps), inference


def _window(d, seed=2):
    return jnp.asarray(np.random.default_rng(seed).standard_normal((_T, d)))


_SYMPLECTIC = [
    (lambda pe: SymplecticTransformer(4, n_sympnet=2, L=2, positional_encoding=pe,
                                      key=jax.random.PRNGKey(0)), None),
    (lambda pe: SymplecticTransformer(4, n_sympnet=1, positional_encoding=pe,
                                      key=jax.random.PRNGKey(0)), "amplitude"),
    (lambda pe: SymplecticTransformer(4, n_sympnet=1, positional_encoding=pe,
                                      key=jax.random.PRNGKey(0)), "bias"),
    (lambda pe: LinearSymplecticTransformer(4, _T, n_sympnet=2, positional_encoding=pe,
                                            key=jax.random.PRNGKey(0)), None),
    (lambda pe: LinearSymplecticTransformer(4, _T, n_sympnet=1, positional_encoding=pe,
                                            key=jax.random.PRNGKey(0)), "amplitude"),
]


@pytest.mark.parametrize("build, signal", _SYMPLECTIC)
def test_symplectic_for_every_step_sequence(build, signal):
    model = _model(lambda: build(signal))
    Z = _window(4)
    draws = np.stack([np.random.default_rng(seed).uniform(0.5, 1.5, _T) for seed in range(3)])
    residuals = _residuals(symplecticity_residual, _with_steps, model, Z, draws)
    assert residuals.shape == (3,) and np.all(np.asarray(residuals) < 1e-12)
    # the steps are read; all-one steps are the model as it is
    stepped, ones, plain = _outputs(model, Z, _STEPS)
    assert np.abs(stepped - plain).max() > 1e-3
    np.testing.assert_allclose(ones, plain, rtol=0, atol=1e-14)


def test_symplectic_negative_control_steps_inside_attention():
    """The attention shear Q <- Q + diag(s) grad_P F(P) with unequal steps is not the
    gradient of a potential: not symplectic (the reason the attention is not scaled)."""
    model = _model(lambda: SymplecticTransformer(4, n_sympnet=1, key=jax.random.PRNGKey(0)))
    attention = model.layers[0]  # the first A_Q
    scaled = lambda att, Z, s: Z + s[:, None] * (att(Z) - Z)  # noqa: E731
    Z = _window(4)
    ones, unequal = _residuals(symplecticity_residual, scaled, attention, Z,
                               np.stack([np.ones(_T), np.asarray(_STEPS)]))
    assert ones < 1e-12
    assert unequal > 1e-3


@pytest.mark.parametrize("signal", [None, "split-amplitude", "amplitude", "bias", "conjugate"])
@pytest.mark.parametrize("dim", [3, 4])
def test_volume_preserving_for_every_step_sequence(signal, dim):
    model = _model(lambda: VolumePreservingTransformer(
        dim, n_blocks=2, L=2, positional_encoding=signal, key=jax.random.PRNGKey(0)))
    Z = _window(dim)
    residual, Y, ones, plain, back, inference = _volume_checks(model, Z, _STEPS)
    assert residual < 1e-12
    assert np.abs(Y - plain).max() > 1e-3
    np.testing.assert_allclose(ones, plain, rtol=0, atol=1e-13)
    np.testing.assert_allclose(back, Z, rtol=0, atol=1e-10)
    np.testing.assert_allclose(inference, Y, rtol=0, atol=1e-12)


def test_volume_negative_control_state_dependent_step():
    """A triangular shear whose step depends on the row's own state, x + h(x) f(x), is not
    unit triangular: it does not preserve volume (the steps must depend on time only)."""
    layer = _model(lambda: VolumePreservingLowerLayer(3, "tanh", key=jax.random.PRNGKey(0)))
    x = np.asarray([0.3, -0.8, 0.6])

    @eqx.filter_jit
    def residuals(layer, x):
        row = lambda y: layer(y, 1.0 + 0.5 * jnp.tanh(y[-1]))  # noqa: E731
        return volume_residual(lambda y: layer(y, 1.3), x), volume_residual(row, x)

    fixed, state_dependent = residuals(layer, x)
    assert float(fixed) < 1e-14
    assert float(state_dependent) > 1e-3


def test_steps_scale_the_residual_layers_of_the_standard_transformer():
    model = _model(lambda: Transformer(4, L=1, n_blocks=2, key=jax.random.PRNGKey(0)))
    Z = _window(4)
    stepped, ones, plain = _outputs(model, Z, _STEPS)
    np.testing.assert_allclose(ones, plain, rtol=0, atol=1e-14)
    assert np.abs(stepped - plain).max() > 1e-3


@pytest.mark.parametrize("steps, error, match", [
    (jnp.ones(_T - 1), ValueError, r"steps must have shape \(5,\).*got shape \(4,\)"),
    (jnp.ones((_T, 1)), ValueError, r"shape \(5,\)"),
    (jnp.asarray([1.0, 1.0, 0.0, 1.0, 1.0]), ValueError, r"finite and > 0.*row 2"),
    (jnp.asarray([1.0, -1.0, 1.0, 1.0, 1.0]), ValueError, r"got -1.0 at row 1"),
    (jnp.asarray([1.0, 1.0, 1.0, jnp.nan, 1.0]), ValueError, r"finite and > 0.*row 3"),
    (jnp.ones(_T, dtype=jnp.complex64), TypeError, "real numbers"),
])
def test_bad_steps_get_a_clear_error(steps, error, match):
    Z = _window(4)
    for model in (_model(lambda: SymplecticTransformer(4, key=jax.random.PRNGKey(0))),
                  _model(lambda: VolumePreservingTransformer(4, key=jax.random.PRNGKey(0))),
                  _model(lambda: Transformer(4, L=1, key=jax.random.PRNGKey(0)))):
        with pytest.raises(error, match=match):
            model(Z, steps=steps)
