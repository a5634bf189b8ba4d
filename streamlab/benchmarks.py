"""Benchmark results: read them, print them as a table, publish them to the website.

Each benchmark in ``bench/`` writes ``build/bench/NAME.json`` (see ``bench/_common.py``)
with its figures, the machine it ran on, and a list of targets::

    {"name": "latency", "title": ..., "measured_at": ..., "machine": {...}, "settings": {...},
     "figures": {...}, "targets": [{"figure": ..., "value": 412, "unit": "ms",
                                    "target": "<= 500", "met": true, "note": ""}],
     "charts": ["latency.svg"]}

``publish`` copies results and charts into ``site/benchmarks/``, where the website's
``<!-- benchmarks -->`` marker turns them into tables and charts (see ``streamlab.mkdocs_hooks``).
"""

from __future__ import annotations

import json
import shutil
from html import escape
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


# -- micro-batch breakdown -------------------------------------------------------------------------

#: The parts of a micro-batch's ``durationMs``, in the order Spark runs them.
BATCH_PARTS = (
    "latestOffset",
    "getBatch",
    "queryPlanning",
    "walCommit",
    "addBatch",
    "commitOffsets",
)


def batch_parts(progress: dict) -> dict[str, float]:
    """A progress report's ``triggerExecution`` split into its parts, in milliseconds.

    The parts are :data:`BATCH_PARTS` (0 when a report lacks one), any other timed step the
    report names, and ``other``: what ``triggerExecution`` holds beyond them all (never below 0).
    """
    durations = dict(progress.get("durationMs") or {})
    total = float(durations.pop("triggerExecution", 0))
    parts = {name: float(durations.pop(name, 0)) for name in BATCH_PARTS}
    parts.update({name: float(value) for name, value in sorted(durations.items())})
    parts["other"] = max(0.0, total - sum(parts.values()))
    return parts


def state_times(progress: dict) -> dict[str, float]:
    """A progress report's state store times (``commitTimeMs``, ``allUpdatesTimeMs``,
    ``allRemovalsTimeMs``), summed over its stateful operators, in milliseconds.

    Each is a sum over the operator's tasks, which may run at once: a part of ``addBatch``'s
    work, not of its wall time.
    """
    names = ("commitTimeMs", "allUpdatesTimeMs", "allRemovalsTimeMs")
    operators = progress.get("stateOperators") or []
    return {name: float(sum(op.get(name, 0) or 0 for op in operators)) for name in names}


# -- charts -------------------------------------------------------------------------------------

#: Average advance of a sans-serif glyph, in ems: generous, so text fits in any common font.
_EM_PER_CHAR = 0.62
_PALETTE = ["#3f51b5", "#009688", "#ff9800", "#9c27b0", "#607d8b", "#e91e63"]
#: Colours of a stacked chart's parts: more of them, neighbours far apart.
_STACK_PALETTE = _PALETTE + ["#8bc34a", "#795548", "#00bcd4", "#ffc107", "#f44336", "#9e9e9e"]
_WIDTH, _FONT, _PAD = 720, 13, 12
#: Widest a bar's label may be before it wraps onto a second line, in pixels.
_LABEL_MAX = 260


def text_width(text: str, size: float) -> float:
    """An upper estimate of ``text``'s width in pixels at font size ``size``."""
    return len(text) * size * _EM_PER_CHAR


def _wrap(text: str, size: float, width: float) -> list[str]:
    """``text`` in lines no wider than ``width``, broken between words only."""
    lines: list[str] = []
    for word in text.split():
        if lines and text_width(f"{lines[-1]} {word}", size) <= width:
            lines[-1] += f" {word}"
        else:
            lines.append(word)
    return lines or [""]


def _number(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _text(x: float, y: float, lines: list[str], size: float, step: float, **attributes) -> str:
    extra = "".join(f' {name.replace("_", "-")}="{value}"' for name, value in attributes.items())
    spans = "".join(
        f'<tspan x="{x:.1f}" dy="{0 if i == 0 else step}">{escape(line)}</tspan>'
        for i, line in enumerate(lines)
    )
    return f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}"{extra}>{spans}</text>'


class _Frame:
    """Where a horizontal bar chart's parts go: labels wrapped on the left, each bar's value
    (or total) after it, the title above, the note below; the picture grows to fit them."""

    line_h, bar_gap = 16, 12

    def __init__(
        self,
        title: str,
        labels: list[str],
        totals: list[float],
        unit: str,
        reference: tuple[str, float] | None,
        note: str,
    ) -> None:
        self.labels = [_wrap(label, _FONT, _LABEL_MAX) for label in labels]
        self.values = [f"{_number(total)} {unit}" for total in totals]
        self.left = (
            _PAD
            + max([text_width(line, _FONT) for lines in self.labels for line in lines] + [40])
            + 10
        )
        right = max([text_width(v, _FONT) for v in self.values] + [40]) + 6 + _PAD
        self.reference = reference
        self.ref_text = text_width(reference[0], _FONT) if reference else 0
        self.width = max(_WIDTH, self.left + right + 200, self.left + self.ref_text + _PAD)
        self.title_lines = _wrap(title, 16, self.width - 2 * _PAD)
        self.note_lines = _wrap(note, 12, self.width - 2 * _PAD) if note else []
        self.heights = [max(26, 10 + self.line_h * len(lines)) for lines in self.labels]
        self.top = 26 + 20 * (len(self.title_lines) - 1) + 26 + (8 if reference else 0)
        plot = self.width - self.left - right
        self.scale = plot / max(list(totals) + ([reference[1]] if reference else []) + [1e-9])
        self.bottom = self.top + sum(self.heights) + self.bar_gap * len(labels) - self.bar_gap

    def reference_line(self) -> list[str]:
        """The dashed vertical line of the reference and its label, if there is one."""
        if not self.reference:
            return []
        x = self.left + self.reference[1] * self.scale
        anchor_x = min(max(x, self.left + self.ref_text / 2), self.width - _PAD - self.ref_text / 2)
        return [
            f'<line x1="{x:.1f}" y1="{self.top - 8}" x2="{x:.1f}" y2="{self.bottom + 4}" '
            'stroke="#d32f2f" stroke-width="2" stroke-dasharray="6,4"/>',
            _text(
                anchor_x,
                self.top - 12,
                [self.reference[0]],
                _FONT,
                self.line_h,
                fill="#d32f2f",
                text_anchor="middle",
            ),
        ]


def bar_chart_svg(
    title: str,
    bars: list[tuple[str, float]],
    unit: str,
    *,
    reference: tuple[str, float] | None = None,
    note: str = "",
) -> str:
    """A horizontal bar chart as SVG text, every label inside the picture.

    ``reference`` draws a dashed vertical line (a target, or a ceiling) with its label. Long
    labels, titles and notes wrap between words; the picture grows to fit them, never clips.
    """
    f = _Frame(
        title, [label for label, _ in bars], [value for _, value in bars], unit, reference, note
    )
    labels, values, heights, line_h, bar_gap = f.labels, f.values, f.heights, f.line_h, f.bar_gap
    left, width, top, scale, bottom = f.left, f.width, f.top, f.scale, f.bottom
    title_lines, note_lines = f.title_lines, f.note_lines
    height = bottom + (10 + 16 * len(note_lines) + 12 if note_lines else 26)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="sans-serif" font-size="{_FONT}">',
        f'<rect width="{width:.0f}" height="{height:.0f}" fill="white"/>',
        _text(_PAD, 26, title_lines, 16, 20, font_weight="bold"),
    ]
    y = top
    for i, ((_, value), lines, text, bar_h) in enumerate(zip(bars, labels, values, heights)):
        w = max(1.0, value * scale)
        middle = y + bar_h / 2
        first = middle + 4.5 - line_h * (len(lines) - 1) / 2
        parts.append(_text(left - 10, first, lines, _FONT, line_h, text_anchor="end"))
        parts.append(
            f'<rect x="{left:.1f}" y="{y:.1f}" width="{w:.1f}" height="{bar_h}" '
            f'fill="{_PALETTE[i % len(_PALETTE)]}"/>'
        )
        parts.append(_text(left + w + 6, middle + 4.5, [text], _FONT, line_h))
        y += bar_h + bar_gap
    parts += f.reference_line()
    if note_lines:
        parts.append(_text(_PAD, bottom + 10 + 16, note_lines, 12, 16, fill="#555"))
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def stacked_bar_chart_svg(
    title: str,
    bars: list[tuple[str, list[tuple[str, float]]]],
    unit: str,
    *,
    reference: tuple[str, float] | None = None,
    note: str = "",
) -> str:
    """A horizontal stacked bar chart as SVG text: one bar per label, one segment per part.

    ``bars`` is ``[(label, [(part, value), ...]), ...]``; a part has the same colour in every
    bar, and a legend under the bars names the colours. Each bar ends with its total. Like
    :func:`bar_chart_svg`, every text stays inside the picture.
    """
    names: list[str] = []
    for _, segments in bars:
        names += [name for name, _ in segments if name not in names]
    colours = {name: _STACK_PALETTE[i % len(_STACK_PALETTE)] for i, name in enumerate(names)}
    f = _Frame(
        title,
        [label for label, _ in bars],
        [sum(value for _, value in segments) for _, segments in bars],
        unit,
        reference,
        note,
    )
    labels, values, heights, line_h, bar_gap = f.labels, f.values, f.heights, f.line_h, f.bar_gap
    left, width, top, scale, bottom = f.left, f.width, f.top, f.scale, f.bottom
    title_lines, note_lines = f.title_lines, f.note_lines
    # The legend: swatch and name, as many to a row as fit.
    legend, x, y = [], _PAD, bottom + 24
    for name in names:
        item = 14 + 6 + text_width(name, _FONT) + 18
        if x > _PAD and x + item > width - _PAD:
            x, y = _PAD, y + 20
        legend.append(
            f'<rect x="{x:.1f}" y="{y - 11:.1f}" width="14" height="14" fill="{colours[name]}"/>'
        )
        legend.append(_text(x + 20, y, [name], _FONT, line_h))
        x += item
    legend_bottom = y + 8 if names else bottom
    height = legend_bottom + (10 + 16 * len(note_lines) + 12 if note_lines else 18)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="sans-serif" font-size="{_FONT}" '
        'data-chart="stacked">',
        f'<rect width="{width:.0f}" height="{height:.0f}" fill="white"/>',
        _text(_PAD, 26, title_lines, 16, 20, font_weight="bold"),
    ]
    y = top
    for (_, segments), lines, text, bar_h in zip(bars, labels, values, heights):
        middle = y + bar_h / 2
        first = middle + 4.5 - line_h * (len(lines) - 1) / 2
        parts.append(_text(left - 10, first, lines, _FONT, line_h, text_anchor="end"))
        x = left
        for name, value in segments:
            w = value * scale
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{bar_h}" '
                f'fill="{colours[name]}"><title>{escape(name)}: {_number(value)} '
                f"{escape(unit)}</title></rect>"
            )
            x += w
        parts.append(_text(x + 6, middle + 4.5, [text], _FONT, line_h))
        y += bar_h + bar_gap
    parts += f.reference_line()
    parts += legend
    if note_lines:
        parts.append(_text(_PAD, legend_bottom + 10 + 16, note_lines, 12, 16, fill="#555"))
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def chart_data(svg: str) -> dict:
    """The title, bars, unit, reference and note of a chart this module (or its earlier
    drawing code, which wrote the same elements) drew: what :func:`redraw` needs."""
    import xml.etree.ElementTree as ET

    ns = "{http://www.w3.org/2000/svg}"
    root = ET.fromstring(svg)

    def words(element) -> str:
        return " ".join(" ".join(element.itertext()).split())  # lines were tspans

    texts = root.findall(f"{ns}text")
    rects = [r for r in root.findall(f"{ns}rect") if r.get("x") is not None]
    title = next(words(t) for t in texts if t.get("font-weight") == "bold")
    note = next((words(t) for t in texts if t.get("fill") == "#555"), "")
    labels = [words(t) for t in texts if t.get("text-anchor") == "end"]
    reference_label = next((words(t) for t in texts if t.get("fill") == "#d32f2f"), None)
    value_texts = [
        words(t)
        for t in texts
        if t.get("font-weight") != "bold" and t.get("fill") is None and t.get("text-anchor") is None
    ]
    bars, unit = [], ""
    for label, text in zip(labels, value_texts):
        number, unit = text.split(" ", 1)
        bars.append((label, float(number.replace(",", ""))))
    reference = None
    if reference_label is not None:
        line = root.find(f"{ns}line")
        widest = max(range(len(bars)), key=lambda i: bars[i][1])
        scale = float(rects[widest].get("width")) / bars[widest][1]
        x0 = float(rects[0].get("x"))
        value = (float(line.get("x1")) - x0) / scale
        reference = (reference_label, float(f"{value:.3g}"))  # the drawing's rounding undone
    return {"title": title, "bars": bars, "unit": unit, "reference": reference, "note": note}


def redraw(folder: Path = PUBLISHED_DIR) -> list[Path]:
    """Draw every published bar chart again from its own figures (no benchmark runs).

    Stacked charts are left as they are: their figures are in their result's JSON.
    """
    redrawn = []
    for result in load(folder):
        for chart in result.get("charts", []):
            path = folder / chart
            if 'data-chart="stacked"' in path.read_text():
                continue
            data = chart_data(path.read_text())
            path.write_text(
                bar_chart_svg(
                    data["title"],
                    data["bars"],
                    data["unit"],
                    reference=data["reference"],
                    note=data["note"],
                )
            )
            redrawn.append(path)
    return redrawn
