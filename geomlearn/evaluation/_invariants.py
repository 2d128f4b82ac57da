r"""The quantities whose drift an evaluation measures, and their drift along rollouts.

Four sources, merged under distinct names:

- the invariants of the system (`system.invariants`: its energy, a Casimir, a momentum);
- the model's own (`model.learned_invariants()`: a Hamiltonian network's learned energy);
- the momentum map $\mu(z) \in \mathbb{R}^k$ of the model's symmetry, when it has one
  (`model.kept_symmetry()`, see `geomlearn.symmetries`), one component a name:
  `"momentum_map_0"`, …, `"momentum_map_{k-1}"` — by Noether's theorem such a model
  conserves them for every parameter value; a component equal to an invariant of the
  system (its total momentum, under the system's name) is measured once, by that name;
- the user's: `{name: f}` with `f(z)` a real scalar of one state `(d,)`, traceable by
  JAX (it is evaluated under `jit` and `vmap`).

A name given twice is an error, not an override: a user's invariant never silently
replaces the system's or the model's. Each user invariant is evaluated once at the data's
first state before any rollout, so that a function that raises, returns more than one
number or is not finite there is refused with a one-line `ValueError` naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._states import invariant_scale, values_at

__all__ = ["invariants_of", "momentum_invariants", "invariant_drifts", "MOMENTUM_MAP"]

MOMENTUM_MAP = "momentum_map"
"""The name of the momentum map's components: `"momentum_map_0"`, `"momentum_map_1"`, …"""


class _MomentumComponent(eqx.Module):
    """Component `index` of the momentum map of `group`, a function of one state."""

    group: eqx.Module
    index: int = eqx.field(static=True)

    def __call__(self, z):
        return self.group.momentum_map(z)[self.index]


class _UserInvariant(eqx.Module):
    """A user's invariant, its value cast to the state's dtype (so that it stacks with the
    others under strict dtype promotion)."""

    fn: Callable

    def __call__(self, z):
        return jnp.asarray(self.fn(z)).astype(z.dtype)


def momentum_invariants(model, state) -> dict:
    """`{"momentum_map_i": z ↦ μ_i(z)}` of the symmetry the model keeps
    (`model.kept_symmetry()`; none without one); `state` `(d,)` fixes the number of
    components."""
    group = model.kept_symmetry()
    if group is None:
        return {}
    shape = jax.eval_shape(group.momentum_map, jax.ShapeDtypeStruct(state.shape, state.dtype))
    k = int(np.prod(shape.shape))
    return {f"{MOMENTUM_MAP}_{i}": _MomentumComponent(group, i) for i in range(k)}


def _first_line(error: Exception) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


def _checked_user(name, fn, state) -> _UserInvariant:
    """`fn` wrapped, after checking it gives one finite real number at `state`."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"an invariant's name must be a non-empty string, got {name!r}")
    if not callable(fn):
        raise ValueError(f"invariant {name!r} must be a function of one state, got {fn!r}")
    try:
        value = values_at(fn, state[None, None])
    except Exception as error:  # any failure of the user's code, reported in one line
        raise ValueError(f"invariant {name!r} fails on the data's first state: "
                         f"{_first_line(error)}") from error
    value = jnp.asarray(value)
    if value.shape != (1, 1):
        raise ValueError(f"invariant {name!r} must return one number for a state of shape "
                         f"{tuple(state.shape)}, got shape {tuple(value.shape[2:])}")
    if not (jnp.issubdtype(value.dtype, jnp.floating) or jnp.issubdtype(value.dtype, jnp.integer)):
        raise ValueError(f"invariant {name!r} must return a real number, got dtype {value.dtype}")
    if not np.isfinite(float(value[0, 0])):
        raise ValueError(f"invariant {name!r} is not finite at the data's first state "
                         f"(got {float(value[0, 0])})")
    return _UserInvariant(fn)


def invariants_of(model, system, user=None, *, state) -> dict:
    """The invariants an evaluation measures, by name (see the module documentation):
    the system's, the model's learned ones, its momentum map, then `user`'s, checked at
    `state` (the data's first state, `(d,)`); `ValueError` on a bad or repeated one."""
    found = {} if system is None else dict(system.invariants)
    owner = dict.fromkeys(found, f"an invariant of {type(system).__name__}")
    momenta = _not_among(momentum_invariants(model, state), found, state)
    for source, more in (("learned by the model", model.learned_invariants()),
                         ("the momentum map of the model's symmetry", momenta)):
        found.update(more)
        owner.update(dict.fromkeys(more, source))
    if user is None:
        return found
    if not isinstance(user, Mapping):
        raise ValueError(f"invariants must be a dict {{name: function of a state}}, got "
                         f"{type(user).__name__}")
    for name, fn in user.items():
        checked = _checked_user(name, fn, state)
        if name in found:
            raise ValueError(f"invariant {name!r} is already measured ({owner[name]}); "
                             "give yours another name")
        found[name] = checked
    return found


def _not_among(candidates: dict, known: dict, state) -> dict:
    """`candidates` without those equal to a `known` function (the system's total momentum
    under its own name): equal, to round-off, at three random states near `state`."""
    if not candidates or not known:
        return candidates
    points = state[None] + jax.random.normal(jax.random.PRNGKey(0), (3,) + state.shape, state.dtype)
    values = {n: np.asarray(jax.vmap(f)(points), np.float64) for n, f in known.items()}
    kept = {}
    for name, fn in candidates.items():
        mine = np.asarray(jax.vmap(fn)(points), np.float64)
        if not any(v.shape == mine.shape and np.allclose(v, mine, rtol=1e-6, atol=1e-6 * (
                1.0 + np.max(np.abs(mine)))) for v in values.values()):
            kept[name] = fn
    return kept


def _per_trajectory(deviation, scale):
    """Each trajectory's largest relative deviation `(B,)`, a non-finite one as `inf`."""
    top = np.max(np.abs(deviation), axis=1) / scale
    return np.where(np.isfinite(top), top, np.inf)


def invariant_drifts(invariants, rollout, states, gauge_free=()):
    """`(drift, median drift, reference drift, series, scales)` of every invariant,
    relative to `invariant_scale` (the largest initial value, or the size of its terms
    for an invariant that is zero), or for the names in `gauge_free` (defined up
    to a constant) to their range over the reference states (`scales` holds those
    ranges). `drift` is the largest over the trajectories, `median drift` the median of
    each trajectory's largest (a non-finite rollout counts as an infinite drift)."""
    drift, median, ref_drift, series, scales = {}, {}, {}, {}, {}
    for name, fn in invariants.items():
        pred_vals = np.asarray(values_at(fn, rollout), dtype=np.float64)
        ref_vals = np.asarray(values_at(fn, states), dtype=np.float64)
        start = ref_vals[:, :1]
        scale = invariant_scale(fn, states[:, 0])
        if name in gauge_free and np.ptp(ref_vals) > 0:
            scale = scales[name] = float(np.ptp(ref_vals))
        series[name] = {
            "model": np.max(np.abs(pred_vals - start), axis=0) / scale,
            "reference": np.max(np.abs(ref_vals - start), axis=0) / scale,
        }
        drift[name] = float(np.max(np.abs(pred_vals - start)) / scale)
        median[name] = float(np.median(_per_trajectory(pred_vals - start, scale)))
        ref_drift[name] = float(np.max(np.abs(ref_vals - start)) / scale)
    return drift, median, ref_drift, series, scales
