"""Shared test configuration.

- x64 is on, so structure tests can run in float64; float32 tests ask for float32.
- Strict dtype promotion and rank-promotion errors: an accidental float32/float64 mix or
  an implicit broadcast in library code fails the suite.
- Two tiers: `pytest` runs the fast, in-process tier; `pytest -m slow` runs the
  out-of-process checks (notebooks, the docs build, quick benchmarks, command-line runs in
  subprocesses, multi-process training). A test outside the slow tier that starts a
  process fails.
- `key` hands out fresh PRNG keys, `rng` NumPy random numbers; `tol` gives per-dtype
  tolerances. `_helpers.py` has `normal`, `randomize` and `n_params`, once.
"""

import itertools
import subprocess

import jax
import jax.numpy as jnp
import numpy as np
import pytest

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")

FLOAT_DTYPES = [jnp.float32, jnp.float64]

# Structure residuals (symplecticity, volume) and generic closeness, by dtype.
TOLERANCES = {
    np.dtype(np.float64): {"structure": 1e-12, "close": 1e-12},
    np.dtype(np.float32): {"structure": 1e-5, "close": 1e-5},
}


@pytest.fixture
def key():
    """A factory of fresh, distinct PRNG keys: `key()` returns a new one each call."""
    counter = itertools.count()
    base = jax.random.PRNGKey(20261129)

    def make():
        return jax.random.fold_in(base, next(counter))

    return make


@pytest.fixture
def rng(request):
    """NumPy random numbers for test data and random parameters (jax.random would compile
    a fresh kernel for every new shape). Seeded by the test module's `RNG_SEED`."""
    return np.random.default_rng(getattr(request.module, "RNG_SEED", 20261129))


@pytest.fixture
def tol():
    """`tol(dtype, kind="close")` → the tolerance for that dtype."""

    def get(dtype, kind="close"):
        return TOLERANCES[np.dtype(dtype)][kind]

    return get


@pytest.fixture(params=FLOAT_DTYPES, ids=["float32", "float64"])
def dtype(request):
    return request.param


@pytest.fixture(autouse=True)
def _fast_tier_stays_in_process(request, monkeypatch):
    """A test of the fast tier (not marked `slow`) may not start a process: the two tiers
    are told apart by this, so a process started without the marker fails the test
    instead of slowing the default run unnoticed."""
    if request.node.get_closest_marker("slow") is not None:
        return

    def refuse(*args, **kwargs):
        raise RuntimeError(
            f"{request.node.nodeid} starts a process; mark it @pytest.mark.slow "
            "(out-of-process checks belong to the slow tier)"
        )

    monkeypatch.setattr(subprocess, "Popen", refuse)
