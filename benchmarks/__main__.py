"""`python -m benchmarks [NAME | all] [--quick] [--out DIR] [options]`.

Without a name, lists the benchmarks. With `all`, runs every benchmark one after another.
Each benchmark prints its table and writes `<out>/<name>.json` (default
`benchmarks/results/`). `--quick` is a smoke-test size (seconds), used by the test suite;
its figures mean nothing.
"""

from __future__ import annotations

import argparse
import sys

from . import BENCHMARKS, DESCRIPTIONS, load


def _list() -> str:
    width = max(len(n) for n in BENCHMARKS)
    lines = ["benchmarks (python -m benchmarks NAME [--quick] [--out DIR]; NAME=all runs all):"]
    lines += [f"  {name.ljust(width)}  {DESCRIPTIONS[name]}" for name in BENCHMARKS]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="geomlearn benchmarks (see benchmarks/RESULTS.md).",
        epilog=_list(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("name", nargs="?", help="a benchmark name, or 'all'")
    parser.add_argument("--quick", action="store_true", help="tiny smoke-test sizes")
    parser.add_argument(
        "--out", default=None, help="directory for the JSON results (default benchmarks/results)"
    )
    # Benchmark-specific options: only imported when a benchmark is named (listing stays
    # free of JAX).
    name = next((a for a in argv if not a.startswith("-")), None)
    if name is None:
        args = parser.parse_args(argv)
        print(_list())
        return 0
    if name != "all" and name not in BENCHMARKS:
        parser.error(f"unknown benchmark {name!r}; valid: {', '.join(BENCHMARKS)}, all")
    names = list(BENCHMARKS) if name == "all" else [name]
    owned: dict[str, list[str]] = {}
    for n in names:
        module = load(n)
        adder = getattr(module, "add_arguments", None)
        if adder is None:
            owned[n] = []
            continue
        group = parser.add_argument_group(n)
        before = {a.dest for a in parser._actions}
        adder(group)
        owned[n] = [a.dest for a in parser._actions if a.dest not in before]
    args = parser.parse_args(argv)

    from ._common import enable_x64

    enable_x64()
    failures = []
    for n in names:
        options = {dest: getattr(args, dest) for dest in owned[n]}
        print(f"\n### {n}{' (quick)' if args.quick else ''}", flush=True)
        try:
            load(n).run(quick=args.quick, out=args.out, **options)
        except Exception as exc:  # keep going with `all`, report at the end
            if len(names) == 1:
                raise
            failures.append(n)
            print(f"benchmark {n} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    if failures:
        print(f"failed: {', '.join(failures)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
