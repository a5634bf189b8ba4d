"""Benchmark results: read them, print them as a table, publish them to the website.

Each benchmark in ``bench/`` writes ``build/bench/NAME.json`` (see ``bench/_common.py``)
with its figures, the machine it ran on, a list of targets, and its charts with the data
they are drawn from (:mod:`streamlab.benchmarks.charts`)::

    {"name": "latency", "title": ..., "measured_at": ..., "machine": {...}, "settings": {...},
     "figures": {...}, "targets": [{"figure": ..., "value": 412, "unit": "ms",
                                    "target": "<= 500", "met": true, "note": ""}],
     "charts": ["latency.svg"], "chart_data": {"latency.svg": {"kind": "bar", ...}}}

``publish`` copies results and charts into ``site/benchmarks/``, where the website's
``<!-- benchmarks -->`` marker turns them into tables and charts (see ``streamlab.tooling.mkdocs_hooks``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from streamlab.paths import BUILD_DIR, REPO_ROOT

RESULTS_DIR = BUILD_DIR / "bench"
PUBLISHED_DIR = REPO_ROOT / "site" / "benchmarks"

#: The order results are shown in: the issue's seven measurements, then the emulator's own.
ORDER = [
    "latency",
    "batch_breakdown",
    "batch_floor",
    "state_machine",
    "state_calls",
    "fleet_capacity",
    "state_providers",
    "changelog",
    "restart_recovery",
    "learner_loop",
    "checkpoint_files",
    "hub_throughput",
    "eventhubs_ingest",
    "cluster_ingest",
    "delta_sink",
]


class BenchmarkError(ValueError):
    """A results file that is not a benchmark result."""


def load(folder: Path) -> list[dict]:
    """Every result in ``folder``, in ``ORDER`` (unknown names last, by name); none when
    ``folder`` does not exist."""
    results = []
    for path in sorted(folder.glob("*.json")):
        try:
            result = json.loads(path.read_text())
        except json.JSONDecodeError as error:
            raise BenchmarkError(f"{path} is not JSON: {error}") from None
        missing = {"name", "title", "machine", "targets"} - set(result)
        if missing:
            raise BenchmarkError(
                f"{path} has no {', '.join(sorted(missing))}: not a benchmark result"
            )
        results.append(result)
    rank = {name: i for i, name in enumerate(ORDER)}
    return sorted(results, key=lambda r: (rank.get(r["name"], len(ORDER)), r["name"]))


def verdict(row: dict) -> str:
    return {True: "met", False: "MISSED", None: "reported"}[row["met"]]


def value_text(row: dict) -> str:
    value = row["value"]
    if value is None:
        return "n/a"
    return f"{value:,}" if isinstance(value, int) or value >= 100 else f"{value:g}"


def text_table(results: list[dict]) -> str:
    """Every target of every result, one line each, for the terminal."""
    lines = [f"{'benchmark':<18} {'figure':<60} {'value':>12} {'unit':<8} {'target':<10} verdict"]
    for result in results:
        for row in result["targets"]:
            lines.append(
                f"{result['name']:<18} {row['figure']:<60} {value_text(row):>12} "
                f"{row['unit']:<8} {row['target']:<10} {verdict(row)}"
            )
    goals = [row for result in results for row in result["targets"] if row["met"] is not None]
    met = sum(row["met"] for row in goals)
    lines.append(
        f"{met} of {len(goals)} targets met"
        + (
            f"; missed: {', '.join(r['figure'] for r in goals if not r['met'])}"
            if met < len(goals)
            else ""
        )
    )
    return "\n".join(lines)


def machine_line(machine: dict) -> str:
    parts = [
        f"{machine.get('cores', '?')} cores",
        f"{machine.get('memory_gib', '?')} GiB",
        f"Python {machine.get('python', '?')}",
        f"PySpark {machine.get('pyspark', '?')}",
        f"azure-eventhub {machine.get('azure-eventhub', '?')}",
        machine.get("java", ""),
    ]
    return ", ".join(p for p in parts if p)


def markdown_section(result: dict, chart_prefix: str | None = "") -> str:
    """One benchmark as markdown: heading, machine, table of targets, and its charts as
    images under ``chart_prefix`` (none when it is None)."""
    rows = [
        f"| {row['figure']} | {value_text(row)} {row['unit']} | {row['target']} | "
        f"{'**MISSED**' if row['met'] is False else verdict(row)} |"
        for row in result["targets"]
    ]
    charts = (
        []
        if chart_prefix is None
        else [f"![{result['title']}]({chart_prefix}{chart})" for chart in result.get("charts", [])]
    )
    command = f"`nox -s bench -- {result.get('script', result['name'])}`"
    return "\n\n".join(
        [
            f"### {result['title']}",
            f"Measured {result.get('measured_at', '')} on {machine_line(result['machine'])}; "
            f"reproduce with {command}.",
            "\n".join(["| figure | value | target | verdict |", "|---|---|---|---|", *rows]),
            *charts,
        ]
    )


def show(*names: str, folder: Path = PUBLISHED_DIR) -> None:
    """In a notebook: each named result as a table of targets with its charts."""
    from IPython.display import display

    for item in displays(*names, folder=folder):
        display(item)


def displays(*names: str, folder: Path = PUBLISHED_DIR) -> list:
    """What :func:`show` displays: a Markdown table per result, then its charts as SVG."""
    from IPython.display import SVG, Markdown

    results = {r["name"]: r for r in load(folder)}
    items: list = []
    for name in names:
        result = results.get(name)
        if result is None:
            items.append(Markdown(f"**{name}**: not measured yet; `nox -s bench` measures it."))
            continue
        items.append(Markdown(markdown_section(result, chart_prefix=None)))
        items += [SVG(filename=str(folder / chart)) for chart in result.get("charts", [])]
    return items


def publish(source: Path = RESULTS_DIR, target: Path = PUBLISHED_DIR) -> list[Path]:
    """Copy every result and its charts from ``source`` into ``target``; return what was copied."""
    target.mkdir(parents=True, exist_ok=True)
    copied = []
    for result in load(source):
        for name in [f"{result['name']}.json", *result.get("charts", [])]:
            shutil.copy2(source / name, target / name)
            copied.append(target / name)
    return copied
