"""Inference forms of the SympNet families (geomlearn.models._shear_forms): the same map as
the model, symplectic, contracting by broadcast for small batches and by `dot` above."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn.geometry import symplecticity_residual
from geomlearn.models import GSympNet, HenonNet, LASympNet
from geomlearn.models._base import model_rollout
from geomlearn.models._shear_forms import (
    BROADCAST_LIMIT,
    GradientShearsForm,
    HenonForm,
    LinearActivationForm,
    broadcast_contractions,
)
from geomlearn.models._task import Task

from _helpers import normal, randomize

WIDTH = 5
FAMILIES = {
    "GSympNet": (lambda d, **kw: GSympNet(d, n_layers=3, width=WIDTH, **kw), GradientShearsForm),
    "LASympNet": (lambda d, **kw: LASympNet(d, n_layers=2, n_linear=2, **kw), LinearActivationForm),
    "HenonNet": (lambda d, **kw: HenonNet(d, n_layers=2, width=WIDTH, **kw), HenonForm),
}
BATCHES = {"broadcast": 1, "dot": None}  # at dim 2 both are the dot form


def _model(name, dim, symmetric, key, rng):
    return randomize(FAMILIES[name][0](dim, symmetric=symmetric, key=key()), rng, 0.5)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_the_form_is_the_model_map(rng, key, name):
    """Both contractions, with and without a step size, symmetrised or not: the model's
    map to round-off."""
    for dim in (2, 4):
        for symmetric in (False, True):
            model = _model(name, dim, symmetric, key, rng)
            form = model.inference_form()
            assert isinstance(form, FAMILIES[name][1])
            Z = normal(rng, (6, dim), scale=0.7)
            ref = jax.vmap(model)(Z)
            for batch in BATCHES.values():
                out = jax.vmap(lambda z: form.step(z, Task(batch=batch)))(Z)
                np.testing.assert_allclose(out, ref, rtol=1e-13, atol=1e-13)
            np.testing.assert_allclose(jax.vmap(lambda z: form(z, 0.3))(Z),
                                       jax.vmap(lambda z: model(z, 0.3))(Z), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_the_form_is_symplectic_with_both_contractions(rng, key, name):
    model = _model(name, 4, False, key, rng)
    form = model.inference_form()
    Z = normal(rng, (3, 4), scale=0.7)
    for batch in BATCHES.values():
        res = jax.vmap(lambda z: symplecticity_residual(lambda v: form.step(v, Task(batch=batch)), z))(Z)
        assert float(jnp.max(res)) <= 1e-12
    # negative control: the same measure sees a map that is not symplectic
    stretched = jax.vmap(lambda z: symplecticity_residual(
        lambda v: form.step(v, Task(batch=1)) * jnp.asarray([1.01, 1.0, 1.0, 1.0]), z))(Z)
    assert float(jnp.min(stretched)) > 1e-4


def test_the_contraction_is_chosen_by_the_batch():
    assert broadcast_contractions(6, 16, 2)
    assert not broadcast_contractions(None, 16, 2)  # unknown batch: dot
    assert not broadcast_contractions(BROADCAST_LIMIT // 32, 16, 2)
    assert broadcast_contractions(BROADCAST_LIMIT // 32 - 1, 16, 2)
    assert not broadcast_contractions(6, 16, 1)  # n = 1: XLA's dot is a multiply already


def _dots(model, B: int, dim: int) -> int:
    """`dot_general`s in the jaxpr of the batched rollout of `B` states."""
    task = model.rollout_task((B, dim))
    z = jnp.zeros((B, dim))
    text = str(jax.make_jaxpr(lambda m, z: model_rollout(m, z, 5, task))(model, z))
    return text.count("dot_general")


def test_iterate_contracts_by_broadcast_for_few_states_and_dot_for_many(rng, key):
    model = GSympNet(4, n_layers=2, width=16, key=key())
    assert _dots(model, 6, 4) == 0
    assert _dots(model, 512, 4) > 0  # 512 · 16 · 2 elements: above the limit


@pytest.mark.parametrize("B", [3, 300])
def test_iterate_equals_a_scan_of_the_model_map(rng, key, B):
    """Below and above the broadcast limit (width 5, n = 2: 300 states are above)."""
    for name in FAMILIES:
        model = _model(name, 4, False, key, rng)
        z0 = normal(rng, (B, 4), scale=0.5)
        _, ref = jax.lax.scan(lambda z, _: (jax.vmap(model)(z),) * 2, z0, None, length=20)
        out = gl.iterate(model, z0, 21)
        np.testing.assert_allclose(out[:, 1:], jnp.swapaxes(ref, 0, 1), rtol=1e-12, atol=1e-12)


def test_corrected_integrator_rolls_out_its_corrections_in_their_forms(rng, key):
    correction = randomize(GSympNet(4, n_layers=2, width=16, key=key()), rng, 0.3)
    model = gl.CorrectedIntegrator(gl.systems.HenonHeiles(), correction, dt=0.1)
    z0 = normal(rng, (4, 4), scale=0.2)
    _, ref = jax.lax.scan(lambda z, _: (jax.vmap(model)(z),) * 2, z0, None, length=10)
    np.testing.assert_allclose(gl.iterate(model, z0, 11)[:, 1:], jnp.swapaxes(ref, 0, 1),
                               rtol=1e-12, atol=1e-12)
    assert _dots(model, 4, 4) == 0  # the corrections contract by broadcast
    assert _dots(model, 512, 4) > 0
