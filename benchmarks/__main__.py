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


class _Group:
    """An argument group that shares an option another benchmark already defined (with
    `all`, `--repeats` is one option passed to every benchmark that has it)."""

    def __init__(self, parser, group):
        self.parser, self.group, self.dests = parser, group, []

    def add_argument(self, *flags, **kwargs):
        existing = self.parser._option_string_actions.get(flags[0])
        action = existing if existing is not None else self.group.add_argument(*flags, **kwargs)
        self.dests.append(action.dest)
        return action


def _add_options(parser, name, adder) -> list[str]:
    group = _Group(parser, parser.add_argument_group(name))
    adder(group)
    return group.dests


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
        adder = getattr(load(n), "add_arguments", None)
        owned[n] = [] if adder is None else _add_options(parser, n, adder)
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
