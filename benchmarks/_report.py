"""Render `benchmarks/RESULTS.md` from the committed result files: `python -m benchmarks
report [--check] [--results DIR] [--output FILE]`.

One section per benchmark, in the order of `benchmarks.BENCHMARKS`: its header from
`benchmarks._headers` (what it measures, its target in words), then for each of its
result files the command, the date and machine of the run, and the tables, targets and
notes the file holds. The rendering depends on the files alone (no clock, no machine
state), so `--check` can compare the committed RESULTS.md with it: it exits with status 1
when they differ, or when a result file is shown by no section (a side experiment: git
keeps it, the product does not) or a section names a file that is missing.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from pathlib import Path

from . import BENCHMARKS
from ._common import DEFAULT_OUT, markdown_table, render_markdown
from ._headers import INTRO, SECTIONS, Run, Section

__all__ = ["RESULTS_MD", "main", "render", "run_line", "unlisted"]

#: the rendered file
RESULTS_MD = Path(__file__).resolve().parent / "RESULTS.md"


def _slug(title: str) -> str:
    """The anchor a Markdown renderer gives the heading `title` (GitHub's rule)."""
    kept = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return kept.replace(" ", "-")


def machine_words(machine: dict) -> str:
    """`AMD EPYC, 1 of 2 logical cores, JAX 0.10.2 (cpu)`, with the load average when
    the file records it."""
    cores = machine.get("logical_cores")
    used = machine.get("cores_available", cores)
    words = f"{machine.get('cpu_model', 'unknown CPU')}, "
    words += f"{used} of {cores} logical cores" if used != cores else f"{cores} logical cores"
    words += f", JAX {machine.get('jax', '?')} ({machine.get('jax_backend', '?')})"
    load = machine.get("load_average")
    if load:
        words += (", load average " + " / ".join(f"{x:.2f}" for x in load)
                  + " at the end of the run (1, 5, 15 min)")
    return words


def run_line(payload: dict) -> str:
    """The date (the day), wall time and machine of a run."""
    day = str(payload.get("date", "?"))[:10]
    minutes = payload.get("wall_s", 0.0) / 60
    quick = " (**quick run: its figures mean nothing**)" if payload.get("quick") else ""
    return f"{day}, {minutes:.1f} min on {machine_words(payload.get('machine', {}))}{quick}"


def _prose(text: str) -> str:
    return textwrap.fill(text, width=88, break_long_words=False, break_on_hyphens=False)


def _runs(name: str, section: Section) -> tuple[Run, ...]:
    return section.runs or (Run(f"{name}.json"),)


def _load(results_dir: Path, run: Run) -> dict | None:
    path = results_dir / run.file
    if not path.exists():
        return None
    payload = json.loads(path.read_text())
    if run.where:
        wanted = dict(run.where)
        tables = []
        for t in payload["tables"]:
            rows = [r for r in t["rows"] if all(r.get(k) == v for k, v in wanted.items())]
            tables.append(dict(t, rows=rows))
        payload = dict(payload, tables=tables)
    return payload


def _shown(payload: dict, section: Section) -> dict:
    """The part of a payload that the section shows."""
    tables = payload["tables"]
    if section.tables is not None:
        tables = [tables[i] for i in section.tables if i < len(tables)]
    return dict(
        payload,
        tables=tables,
        targets=payload["targets"] if section.targets else [],
        notes=payload.get("notes", []) if section.notes else [],
    )


def _command(payload: dict) -> str:
    return f"```bash\n{payload['command']}\n```"


def _one_run(payload: dict, section: Section) -> str:
    body = render_markdown(_shown(payload, section), level=3)
    run = f"Run: {run_line(payload)}."
    return "\n\n".join(p for p in (_command(payload), run, body) if p)


def _merged(payloads: list[dict], section: Section) -> str:
    """The shown table of every run as one table, its rows numbered by run."""
    index = (section.tables or (0,))[0]
    lines, rows, columns, title = [], [], None, None
    for number, payload in enumerate(payloads, 1):
        lines.append(f"{number}. `{payload['command']}` — {run_line(payload)}")
        table = payload["tables"][index]
        title = title or table["title"]
        if columns is not None and table["columns"] != columns:
            raise ValueError(f"{payload['command']}: its table's columns differ from the "
                             "other runs' and cannot be merged")
        columns = table["columns"]
        rows += [dict(r, _run=number) for r in table["rows"]]
    merged = markdown_table([("_run", "run", ""), *map(tuple, columns)], rows)
    return "Runs:\n\n" + "\n".join(lines) + f"\n\n### {title}\n\n" + merged


def _targets_met(payloads: list[dict], section: Section) -> str:
    if not section.targets:
        return "-"
    judged = [t["met"] for p in payloads for t in p["targets"] if t.get("met") is not None]
    return f"{sum(judged)} of {len(judged)}" if judged else "-"


def _section(name: str, section: Section, payloads: list[dict], results_dir: Path) -> str:
    parts = [f"## {section.title}", _prose(section.about)]
    if section.target:
        parts.append(_prose(section.target))
    if not payloads:
        parts.append(f"No recorded run: `python -m benchmarks {name}` writes one.")
    elif section.merge:
        parts.append(_merged(payloads, section))
    else:
        parts += [_one_run(p, section) for p in payloads]
    for figure in section.figures:
        if (results_dir / figure).exists():
            parts.append(f"![{figure}](results/{figure})")
    return "\n\n".join(parts)


def unlisted(results_dir=None) -> list[str]:
    """The result files (`.json`, `.png`) of `results_dir` that no section shows, and the
    files that a section names but `results_dir` lacks (prefixed `missing: `)."""
    results_dir = DEFAULT_OUT if results_dir is None else Path(results_dir)
    named = {run.file for name in BENCHMARKS for run in _runs(name, SECTIONS[name])}
    named |= {figure for section in SECTIONS.values() for figure in section.figures}
    present = {p.name for p in results_dir.iterdir() if p.suffix in (".json", ".png")}
    return sorted(present - named) + [f"missing: {f}" for f in sorted(named - present)]


def _overview(rows: list[dict]) -> str:
    columns = [("title", "benchmark", ""), ("name", "command", ""),
               ("date", "latest run", ""), ("met", "targets met", "")]
    return markdown_table(columns, rows)


def render(results_dir=None) -> str:
    """RESULTS.md as rendered from the result files in `results_dir` (default
    `benchmarks/results/`)."""
    results_dir = DEFAULT_OUT if results_dir is None else Path(results_dir)
    sections, overview = [], []
    for name in BENCHMARKS:
        section = SECTIONS[name]
        payloads = [p for p in (_load(results_dir, r) for r in _runs(name, section)) if p]
        sections.append(_section(name, section, payloads, results_dir))
        dates = sorted(str(p.get("date", ""))[:10] for p in payloads)
        overview.append({
            "title": f"[{section.title}](#{_slug(section.title)})",
            "name": f"`python -m benchmarks {name}`",
            "date": dates[-1] if dates else "-",
            "met": _targets_met(payloads, section),
        })
    head = f"# Benchmark results\n\n{INTRO}\n\n{_overview(overview)}"
    return "\n\n".join([head, *sections]) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks report",
        description="Render benchmarks/RESULTS.md from the result files.",
    )
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit with status 1 if the file differs from "
                             "the rendering")
    parser.add_argument("--results", default=None,
                        help="directory of the result files (default benchmarks/results)")
    parser.add_argument("--output", default=str(RESULTS_MD),
                        help="the file to write or check (default benchmarks/RESULTS.md)")
    args = parser.parse_args(argv)
    text = render(args.results)
    output = Path(args.output)
    if args.check:
        current = output.read_text() if output.exists() else None
        stray = unlisted(args.results)
        if stray:
            print("result files that no section of benchmarks/_headers.py shows, or that "
                  f"it names and do not exist: {', '.join(stray)}", file=sys.stderr)
        if current != text:
            print(f"{output} differs from the rendering of the result files: run "
                  "`python -m benchmarks report`", file=sys.stderr)
        if stray or current != text:
            return 1
        print(f"{output} is up to date")
        return 0
    output.write_text(text)
    print(f"wrote {output} ({text.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
