"""Test helpers shared by the layer/model test files: NumPy-drawn random data and
parameters (no per-shape compiles of JAX's random initialisers), parameter counts, and a
model that is one step of a classical integrator."""

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from geomlearn.integrators import RK4
from geomlearn.models import AbstractFeedForwardIntegrator
from geomlearn.systems import AbstractSystem


def normal(rng, shape, dtype=jnp.float64, scale=1.0):
    return jnp.asarray(scale * rng.standard_normal(shape), dtype=dtype)


def draw(key, shape, dtype=jnp.float64, scale=1.0):
    """N(0, scale²) numbers of `shape` seeded by the (raw, `jax.random.PRNGKey`) key
    `key` but drawn by NumPy: the role of `jax.random.normal(key, shape, dtype)` without compiling a sampler
    for every new shape."""
    return normal(
        np.random.default_rng(np.asarray(key).ravel().tolist()), shape, dtype, scale
    )


def is_parameter(x):
    """A floating-point array, or the shape of one in a skeleton."""
    return eqx.is_inexact_array(x) or (
        isinstance(x, jax.ShapeDtypeStruct) and jnp.issubdtype(x.dtype, jnp.inexact)
    )


def randomize(module, rng, scale=1.0):
    """Every floating-point array of `module` redrawn from N(0, scale²). `module` may be a
    skeleton (`eqx.filter_eval_shape`), whose array leaves are shapes only."""
    params, static = eqx.partition(module, is_parameter)
    if any(
        isinstance(x, jax.ShapeDtypeStruct) for x in jax.tree_util.tree_leaves(static)
    ):
        raise TypeError(
            "a skeleton with non-floating arrays cannot be filled with random numbers"
        )
    leaves, treedef = jax.tree_util.tree_flatten(params)
    new = [normal(rng, x.shape, x.dtype, scale) for x in leaves]
    return eqx.combine(jax.tree_util.tree_unflatten(treedef, new), static)


def random_module(build, rng, scale=1.0):
    """`randomize(build(), rng, scale)` without running the initialisers of `build` (each
    draws with `jax.random`, one compiled sampler per shape): its skeleton, filled."""
    return randomize(eqx.filter_eval_shape(build), rng, scale)


def n_params(module):
    """Parameters of a module or of its `eqx.filter_eval_shape` skeleton (no arrays built)."""
    return sum(
        int(np.prod(x.shape))
        for x in jax.tree_util.tree_leaves(module)
        if eqx.is_inexact_array(x) or isinstance(x, jax.ShapeDtypeStruct)
    )


def concrete_overrides(cls) -> list[str]:
    """The methods of `cls` that replace a concrete (not abstract) method of a geomlearn
    base class."""
    out = []
    for attr, value in vars(cls).items():
        if attr.startswith("__") or not (callable(value) or isinstance(value, property)):
            continue
        for base in cls.__mro__[1:]:
            if attr in vars(base):
                if (base.__module__.startswith("geomlearn")
                        and not getattr(vars(base)[attr], "__isabstractmethod__", False)):
                    out.append(f"{cls.__name__}.{attr} over {base.__name__}")
                break
    return out


class RK4Step(AbstractFeedForwardIntegrator):
    """One RK4 step of `system` over `dt` as a model: a perfect model of what the long
    horizon and work–precision integrate alongside it (`dt` is an array, so both
    compiled steps are the same computation)."""

    structure: ClassVar[str] = "none"
    dim: int = eqx.field(static=True)
    system: AbstractSystem = eqx.field(static=True)
    dt: jax.Array

    def __init__(self, system, dt, *, key=None, dtype=None):
        self.dim, self.system, self.dt = system.dim, system, jnp.asarray(dt, jnp.float64)

    def __call__(self, z, h=None):
        return RK4().step(self.system, z, self.dt.astype(z.dtype))[0]
