"""`python -m benchmarks [NAME | all] [--quick] [--out DIR] [options]`, and
`python -m benchmarks report [--check]`.

Without a name, lists the benchmarks. With `all`, runs every benchmark one after another.
Each benchmark prints its table and writes `<out>/<name>.json` (default
`benchmarks/results/`). `--quick` is a smoke-test size (seconds), used by the test suite;
its figures mean nothing. `report` renders `benchmarks/RESULTS.md` from the result files
(`benchmarks._report`); with `--check` it only compares.
"""

from __future__ import annotations

import argparse
import sys

from . import BENCHMARKS, DESCRIPTIONS, _report, load


def _list() -> str:
    width = max(len(n) for n in BENCHMARKS)
    lines = ["benchmarks (python -m benchmarks NAME [--quick] [--out DIR]; NAME=all runs all):"]
    lines += [f"  {name.ljust(width)}  {DESCRIPTIONS[name]}" for name in BENCHMARKS]
    lines += ["", "python -m benchmarks report [--check]: render benchmarks/RESULTS.md from "
              "the result files (--check: exit 1 if it is out of date)"]
    return "\n".join(lines)


class _Recorder:
    """The `parser` a benchmark's `add_arguments(parser)` receives: it records every
    `add_argument(*flags, **kwargs)` call (validated on a scratch parser of the
    benchmark's own, whose `Action` it returns), so that `main` can add each flag once —
    with `all`, `--repeats` is one option passed to every benchmark that declares it."""

    def __init__(self, name: str):
        self.calls: list[tuple[tuple, dict, str]] = []
        self._scratch = argparse.ArgumentParser(prog=name, add_help=False)

    def add_argument(self, *flags, **kwargs):
        action = self._scratch.add_argument(*flags, **kwargs)
        self.calls.append((flags, kwargs, action.dest))
        return action


def _add_options(parser, names) -> dict[str, list[str]]:
    """Add the options of the benchmarks `names` to `parser`, each flag once; returns the
    option names (`dest`) of each benchmark."""
    seen: dict[str, str] = {}  # flag -> dest
    owned: dict[str, list[str]] = {}
    for name in names:
        recorder = _Recorder(name)
        adder = getattr(load(name), "add_arguments", None)
        if adder is not None:
            adder(recorder)
        group = None
        owned[name] = []
        for flags, kwargs, dest in recorder.calls:
            known = {seen[f] for f in flags if f in seen}
            if known and known != {dest}:
                raise ValueError(
                    f"benchmark {name!r}: option {flags[0]} has dest {dest!r}, but another "
                    f"benchmark declared it with {known.pop()!r}"
                )
            if not known:
                if group is None:
                    group = parser.add_argument_group(name)
                group.add_argument(*flags, **kwargs)
                seen.update(dict.fromkeys(flags, dest))
            owned[name].append(dest)
    return owned


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["report"]:
        return _report.main(argv[1:])
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
    owned = _add_options(parser, names)
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
