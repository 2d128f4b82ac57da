"""Reproduce XLA's crash at the kernel's limit on memory mappings, in seconds.

Every program XLA compiles for the CPU keeps about six memory mappings (its code and
data sections) while it is cached, and Linux refuses a process more than
`vm.max_map_count` mappings (65,530 by default). When a compilation needs a mapping
past the limit, XLA's LLVM code generator logs

    LLVM compilation error: Cannot allocate memory

and the process dies with a segmentation fault (exit status -11 / 139) instead of
raising an error. A long in-process test run that keeps every compiled program reaches
the limit after about 10,000 programs; this script gets there at once by filling the
mapping table with protected pages (alternating page protections keep the kernel from
merging them), then compiles small programs of distinct shapes:

    python tools/xla_map_limit.py            # dies with SIGSEGV
    python tools/xla_map_limit.py --guard    # clears JAX's caches near the limit: completes

The guard is what `tests/conftest.py` does between test modules. Linux only (it reads
`/proc`).
"""

from __future__ import annotations

import argparse
import ctypes
import mmap

import jax
import jax.numpy as jnp

#: Mappings left free after filling the table: room for a few hundred programs.
SPARE = 600
#: Programs compiled after filling: enough to need about three times `SPARE` mappings.
PROGRAMS = 300
#: With `--guard`, JAX's caches are cleared when fewer than this many mappings are free.
GUARD_MARGIN = 300


def memory_maps() -> int:
    """The number of memory mappings of this process."""
    with open("/proc/self/maps", "rb") as f:
        return f.read().count(b"\n")


def map_limit() -> int:
    """The kernel's limit on memory mappings per process."""
    with open("/proc/sys/vm/max_map_count") as f:
        return int(f.read())


def fill_map_table(free: int) -> None:
    """Create mappings until only `free` of the limit remain (kept for the process's life)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    page = mmap.PAGESIZE
    pairs = max((map_limit() - memory_maps() - free) // 2, 0)
    # One reservation (never touched, so it costs no memory), every second page made
    # read-only: each protection boundary splits the mapping in two.
    base = libc.mmap(None, (2 * pairs + 1) * page, mmap.PROT_READ | mmap.PROT_WRITE,
                     mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    if base in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap failed")
    for i in range(pairs):
        if libc.mprotect(base + (2 * i + 1) * page, page, mmap.PROT_READ) != 0:
            raise OSError(ctypes.get_errno(), f"mprotect failed after {i} pages")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--guard", action="store_true",
                        help="clear JAX's caches when the mapping table is nearly full")
    args = parser.parse_args(argv)
    (jnp.ones(3) + 1.0).block_until_ready()  # the backend starts before the table fills
    fill_map_table(SPARE)
    limit = map_limit()
    print(f"mappings: {memory_maps()} of {limit}", flush=True)
    cleared = 0
    for n in range(1, PROGRAMS + 1):
        # every tenth program: at most about 60 new mappings between two looks
        if args.guard and n % 10 == 0 and memory_maps() > limit - GUARD_MARGIN:
            jax.clear_caches()
            cleared += 1
        (jnp.ones((n,)) * 2.0).block_until_ready()  # a new shape: a new program
    print(f"compiled {PROGRAMS} programs; caches cleared {cleared} times", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
