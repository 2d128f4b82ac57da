"""XLA's crash at the kernel's limit on memory mappings, and the guard the suite uses.

`tools/xla_map_limit.py` fills a process's mapping table (`vm.max_map_count`) and then
compiles small programs: without the guard the process dies (XLA's code generator
cannot map the code of the next program, logs "Cannot allocate memory" and crashes);
with it (clear JAX's caches when the table is nearly full, as `tests/conftest.py` does
between modules) it completes. If a JAX release raises a Python error instead of
crashing, the first test fails and says so: the guard may then be revisited.
"""

import os
import pathlib
import subprocess
import sys

import pytest

TOOL = pathlib.Path(__file__).resolve().parents[1] / "tools" / "xla_map_limit.py"

pytestmark = [
    pytest.mark.slow,  # each check runs the tool in its own process
    pytest.mark.skipif(not pathlib.Path("/proc/sys/vm/max_map_count").exists(),
                       reason="needs Linux's /proc (the mapping limit is Linux's)"),
]


def _run(*args):
    """The tool under XLA's default compiler settings and without the suite's compilation
    cache (`tests/conftest.py` sets both for the processes tests start): the crash it
    reproduces is that of users' runs."""
    env = {k: v for k, v in os.environ.items()
           if k != "XLA_FLAGS" and not k.startswith(("JAX_COMPILATION_CACHE", "JAX_PERSISTENT_CACHE"))}
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, check=False,
                          timeout=600, env=env)


def test_without_the_guard_a_full_mapping_table_kills_the_process():
    done = _run()
    assert done.returncode != 0, "JAX compiled past the mapping limit: the guard may go"
    assert "compiled 300 programs" not in done.stdout
    assert "Cannot allocate memory" in done.stderr, done.stderr[-2000:]


def test_with_the_guard_the_same_compilations_complete():
    done = _run("--guard")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "compiled 300 programs" in done.stdout
    cleared = int(done.stdout.split("cleared ")[1].split()[0])
    assert cleared >= 1  # the guard acted: the table was full without it
