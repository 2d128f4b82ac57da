"""Shared test configuration.

- x64 is on, so structure tests can run in float64; float32 tests ask for float32.
- Strict dtype promotion and rank-promotion errors: an accidental float32/float64 mix or
  an implicit broadcast in library code fails the suite.
- Two tiers: `pytest` runs the fast, in-process tier; `pytest -m slow` runs the
  out-of-process checks (notebooks, the docs build, quick benchmarks, command-line runs in
  subprocesses, multi-process training). A test outside the slow tier that starts a
  process fails.
- A test that reads a command-line training run (the fixtures in `CLI_RUN_FIXTURES`)
  belongs to the slow tier: it is marked so at collection.
- `key` hands out fresh PRNG keys, `rng` NumPy random numbers; `tol` gives per-dtype
  tolerances. `_helpers.py` has `normal`, `randomize` and `n_params`, once.
"""

import itertools
import os
import shutil
import subprocess
import tempfile

import jax
import jax.numpy as jnp
import matplotlib.font_manager  # noqa: F401
import numpy as np
import pytest

# matplotlib builds its font cache on its first import on a machine, by running
# `fc-list` in a process; imported here, before any test runs, so that the fast tier's
# refusal of processes (below) does not fail whichever test first plots on a fresh machine.

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")

FLOAT_DTYPES = [jnp.float32, jnp.float64]

# Structure residuals (symplecticity, volume) and generic closeness, by dtype.
TOLERANCES = {
    np.dtype(np.float64): {"structure": 1e-12, "close": 1e-12},
    np.dtype(np.float32): {"structure": 1e-5, "close": 1e-5},
}


#: XLA flags of every test run and of every process a test starts (see `pytest_configure`).
TEST_XLA_FLAGS = (
    "--xla_backend_optimization_level=0",
    "--xla_cpu_use_fusion_emitters=false",
)

#: The environment variable naming the run's shared compilation cache (see
#: `pytest_configure`); the first process of a run sets it, its workers inherit it.
CACHE_VARIABLE = "GEOMLEARN_TEST_COMPILATION_CACHE"


def pytest_configure(config):
    """Both tiers run thousands of small programs whose cost is compilation, not
    execution. So every test process, and every process a test starts (a notebook, a
    quick benchmark, a command line), compiles without LLVM's optimisation passes and
    with XLA's classic CPU code emitters instead of its MLIR fusion emitters, which
    compile the same programs in markedly less time: the flags go into `XLA_FLAGS`
    before JAX starts its backend and stay there, so that children inherit them and
    tables computed in and out of process agree bit for bit (a different optimisation
    level can move a float32 rounding). Users' runs and the benchmarks compile with XLA's
    defaults.

    The processes of one run (the `pytest-xdist` workers and the processes tests start)
    share a persistent compilation cache (JAX's, in a temporary folder made for the run
    and removed at its end; `JAX_COMPILATION_CACHE_DIR` hands it to children): a program that one worker compiled is loaded, not compiled
    again, by the other, and by either after the caches were cleared (see
    `_release_compiled_code`). Nothing is kept between runs, so every run pays for its
    own compilation."""
    flags = os.environ.get("XLA_FLAGS", "").split()
    os.environ["XLA_FLAGS"] = " ".join(flags + [f for f in TEST_XLA_FLAGS if f not in flags])
    if CACHE_VARIABLE not in os.environ:
        folder = tempfile.mkdtemp(prefix="geomlearn-test-xla-")
        os.environ[CACHE_VARIABLE] = folder
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
        # JAX reads its options from these variables when it is imported: the processes
        # that tests start use the same cache.
        os.environ["JAX_COMPILATION_CACHE_DIR"] = folder
        os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
        os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "-1"
    jax.config.update("jax_compilation_cache_dir", os.environ[CACHE_VARIABLE])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    jax.devices()


#: Module fixtures that train through `geomlearn.cli.main`; their users are slow-tier tests.
CLI_RUN_FIXTURES = frozenset({"pendulum_run", "autoencoder_run", "lift_run", "csv_run", "run"})


def pytest_collection_modifyitems(config, items):
    for item in items:
        if CLI_RUN_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


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


def _memory_maps() -> int | None:
    """The number of memory mappings of this process (`None` where `/proc` is absent)."""
    try:
        with open("/proc/self/maps", "rb") as f:
            return f.read().count(b"\n")
    except OSError:
        return None


def _map_budget() -> int:
    """Three quarters of the kernel's limit on memory mappings per process
    (`vm.max_map_count`): the largest test module compiles about 1,500 programs (some
    9,000 mappings), so a module that starts below the budget ends below the limit."""
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return 3 * int(f.read()) // 4
    except (OSError, ValueError):
        return 3 * 65530 // 4


MAP_BUDGET = _map_budget()


@pytest.fixture(scope="module", autouse=True)
def _release_compiled_code():
    """Drop JAX's compiled executables when this process's memory-map table is 3/4 full.

    Every program XLA compiles for the CPU keeps about six memory mappings (its code and
    data sections) for as long as it is cached, and the kernel refuses a process more than
    `vm.max_map_count` mappings (65,530 by default). At the limit XLA's LLVM code
    generator logs "LLVM compilation error: Cannot allocate memory" and the process dies
    with a segmentation fault in `backend_compile_and_load` — what ended in-process runs
    of this suite near their end (about 10,000 programs compiled in one process; any
    test compiling then was the victim). `tools/xla_map_limit.py` reproduces it in
    seconds and `tests/test_map_limit.py` checks both the crash and this guard.

    Compiled code is shared across modules (a module compiles at most about 9,000
    mappings' worth, so checking after each module keeps below the limit; clearing costs
    seconds, so it is done only when needed); where the count cannot be read the caches
    are cleared after every module instead."""
    yield
    maps = _memory_maps()
    if maps is None or maps > MAP_BUDGET:
        jax.clear_caches()
