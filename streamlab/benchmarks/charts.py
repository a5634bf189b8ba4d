"""Benchmark charts: horizontal bars drawn by matplotlib from a result's chart data.

A chart is data first, kept in its result's JSON (``chart_data``, by file name)::

    {"kind": "bar", "title": "Heartbeat to transition row", "unit": "ms",
     "bars": [["p50, trigger 250 ms", 411], ...],
     "reference": ["target p50 500 ms", 500], "note": "2 cores, emulator, RocksDB"}

A ``stacked`` chart's bars are ``[label, [[part, value], ...]]``: one segment per part, a
part the same colour in every bar, named once in a legend. Each bar ends with its value (a
stacked one with its total); ``reference`` is a dashed line (a target, a ceiling). The SVG
keeps its text as text (``svg.fonttype`` none), so a browser and a test can read it, and the
picture is cut to what it holds, so no label is clipped. :func:`redraw` draws the published
charts again from their data, with no benchmark run.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamlab.benchmarks.results import PUBLISHED_DIR, load

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

PALETTE = ["#3f51b5", "#009688", "#ff9800", "#9c27b0", "#607d8b", "#e91e63"]
#: Colours of a stacked chart's parts: more of them, neighbours far apart.
STACK_PALETTE = PALETTE + ["#8bc34a", "#795548", "#00bcd4", "#ffc107", "#f44336", "#9e9e9e"]
REFERENCE_COLOUR = "#d32f2f"
NOTE_COLOUR = "#555555"
#: Characters per line of a bar's label, the title and the note before they wrap.
LABEL_CHARS, TITLE_CHARS, NOTE_CHARS = 32, 80, 100
#: Sizes in points; the SVG is in points, so 9.75 pt shows as 13 px.
FONT, TITLE_FONT, NOTE_FONT = 9.75, 12.0, 9.0
WIDTH_IN = 7.5
#: One bar's slot, in points: the bar, and a line more for each wrapped line of its label.
BAR_PT, LINE_PT, GAP_PT = 19.5, 12.0, 9.0
#: The margin around everything, in points, and the columns of a stacked chart's legend.
PAD_PT, LEGEND_COLUMNS = 9.0, 4
STYLE: dict[RcKeyType, Any] = {
    "svg.fonttype": "none",  # text stays text, in the font the browser has
    "svg.hashsalt": "streamlab-benchmarks",  # the same ids every time the chart is drawn
    "font.family": "sans-serif",
    "font.size": FONT,
}

Chart = dict[str, Any]


def bar(
    title: str,
    bars: list[tuple[str, float]],
    unit: str,
    *,
    reference: tuple[str, float] | None = None,
    note: str = "",
) -> Chart:
    """A bar chart's data: one bar per ``(label, value)``."""
    return _chart("bar", title, [[label, value] for label, value in bars], unit, reference, note)


def stacked(
    title: str,
    bars: list[tuple[str, list[tuple[str, float]]]],
    unit: str,
    *,
    reference: tuple[str, float] | None = None,
    note: str = "",
) -> Chart:
    """A stacked chart's data: one bar per ``(label, [(part, value), ...])``."""
    rows = [[label, [[part, value] for part, value in parts]] for label, parts in bars]
    return _chart("stacked", title, rows, unit, reference, note)


def _chart(
    kind: str, title: str, bars: list, unit: str, reference: tuple[str, float] | None, note: str
) -> Chart:
    return {
        "kind": kind,
        "title": title,
        "bars": bars,
        "unit": unit,
        "reference": list(reference) if reference else None,
        "note": note,
    }


def number(value: float) -> str:
    """A bar's value as it is written after the bar."""
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _segments(chart: Chart) -> list[list[tuple[str, float]]]:
    """Each bar's segments: one for a plain bar, its parts for a stacked one."""
    if chart["kind"] == "stacked":
        return [[(part, float(value)) for part, value in parts] for _, parts in chart["bars"]]
    return [[("", float(value))] for _, value in chart["bars"]]


def _colours(chart: Chart) -> dict[str, str]:
    """The colour of each stacked part, in the order the parts first appear."""
    names: list[str] = []
    for segments in _segments(chart):
        names += [name for name, _ in segments if name not in names]
    return {name: STACK_PALETTE[i % len(STACK_PALETTE)] for i, name in enumerate(names)}


def draw(chart: Chart, path: Path) -> Path:
    """Draw ``chart`` as an SVG at ``path``."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with matplotlib.rc_context(STYLE):
        layout = _Layout(chart)
        figure = Figure(figsize=(WIDTH_IN, layout.height / 72))
        FigureCanvasAgg(figure)  # a renderer, to measure the labels
        axes = figure.add_axes((0, 0, 1, 1))
        labels, values = _bars(axes, chart, layout)
        layout.place(figure, axes, labels, values)
        _reference(axes, chart)
        _title_legend_note(figure, chart, layout)
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(
            path, format="svg", bbox_inches="tight", pad_inches=0.1, metadata={"Date": None}
        )
    return path


class _Layout:
    """Where the title, bars, legend and note go, top down, in points."""

    def __init__(self, chart: Chart) -> None:
        self.labels = [textwrap.wrap(label, LABEL_CHARS) or [""] for label, _ in chart["bars"]]
        self.slots = [BAR_PT + LINE_PT * (len(lines) - 1) + GAP_PT for lines in self.labels]
        self.title = textwrap.wrap(chart["title"], TITLE_CHARS)
        self.note = textwrap.wrap(chart["note"], NOTE_CHARS) if chart["note"] else []
        parts = len(_colours(chart)) if chart["kind"] == "stacked" else 0
        self.legend_rows = -(-parts // LEGEND_COLUMNS)
        self.top = 8 + 15 * len(self.title) + (18 if chart["reference"] else 6)
        self.bars = sum(self.slots)
        self.below = (8 + 16 * self.legend_rows if parts else 0) + (
            12 + 12 * len(self.note) if self.note else 0
        )
        self.height = self.top + self.bars + self.below

    def place(self, figure, axes, labels: list, values: list) -> None:
        """Fit the axes between the labels on the left and the values on the right."""
        renderer = figure.canvas.get_renderer()
        width = WIDTH_IN * 72

        def widest(texts) -> float:
            return max([t.get_window_extent(renderer).width * 72 / figure.dpi for t in texts] + [0])

        left = PAD_PT + widest(labels) + 6
        right = PAD_PT + widest(values) + 4
        axes.set_position(
            (
                left / width,
                self.below / self.height,
                (width - left - right) / width,
                self.bars / self.height,
            )
        )


def _bars(axes, chart: Chart, layout: _Layout) -> tuple[list, list]:
    """The bars top down, each with its label on the left and its value (or total) after it;
    returns the label and value texts."""
    colours, unit, top = _colours(chart), chart["unit"], 0.0
    labels, values = [], []
    for i, (segments, slot, lines) in enumerate(zip(_segments(chart), layout.slots, layout.labels)):
        middle, bar_height, left = top + slot / 2, slot - GAP_PT, 0.0
        for name, value in segments:
            colour = colours[name] if name else PALETTE[i % len(PALETTE)]
            part = list(colours).index(name) if name else 0
            gid = f"bar-{i}-part-{part}"  # the SVG's id of the segment, for tests
            axes.barh(middle, value, left=left, height=bar_height, color=colour, gid=gid)
            left += value
        values.append(_beside(axes, f"{number(left)} {unit}", (left, middle), 4, 0, "left"))
        first = LINE_PT * (len(lines) - 1) / 2
        labels += [
            _beside(axes, line, (0, middle), -6, first - LINE_PT * j, "right")
            for j, line in enumerate(lines)
        ]
        top += slot
    axes.set_ylim(top, 0)  # the first bar on top
    axes.set_axis_off()
    totals = [sum(v for _, v in segments) for segments in _segments(chart)]
    reference = chart["reference"][1] if chart["reference"] else 0
    axes.set_xlim(0, max(totals + [reference, 1e-9]))
    return labels, values


def _beside(axes, text: str, at: tuple[float, float], dx: float, dy: float, ha: str):
    """One line of text ``dx``, ``dy`` points from the point ``at`` (data units): a text
    of its own per line, so that the SVG places each one by its ``x`` and ``y``."""
    return axes.annotate(
        text,
        at,
        xytext=(dx, dy),
        textcoords="offset points",
        ha=ha,
        va="center",
        annotation_clip=False,
    )


def _reference(axes, chart: Chart) -> None:
    if not chart["reference"]:
        return
    label, value = chart["reference"]
    axes.axvline(value, color=REFERENCE_COLOUR, linewidth=1.5, linestyle=(0, (4, 3)))
    axes.annotate(
        label,
        (value, 0),
        xytext=(0, 4),
        textcoords="offset points",
        ha="center",
        va="bottom",
        color=REFERENCE_COLOUR,
        annotation_clip=False,
    )


def _title_legend_note(figure, chart: Chart, layout: _Layout) -> None:
    x, height = PAD_PT / (WIDTH_IN * 72), layout.height
    for i, line in enumerate(layout.title):  # a text per line, as for the labels
        top = 1 - (6 + 15 * i) / height
        figure.text(x, top, line, ha="left", va="top", fontsize=TITLE_FONT, fontweight="bold")
    below = layout.below / height
    if chart["kind"] == "stacked":
        from matplotlib.patches import Patch

        colours = _colours(chart)
        figure.legend(
            handles=[Patch(color=colour, label=name) for name, colour in colours.items()],
            loc="upper left",
            bbox_to_anchor=(x, below - 4 / height),
            borderaxespad=0,
            borderpad=0,
            ncols=LEGEND_COLUMNS,
            frameon=False,
            handlelength=1.0,
            handleheight=1.0,
            columnspacing=2.0,
        )
    for i, line in enumerate(layout.note):
        top = (2 + 12 * (len(layout.note) - i)) / height
        figure.text(x, top, line, ha="left", va="top", fontsize=NOTE_FONT, color=NOTE_COLOUR)


def redraw(folder: Path = PUBLISHED_DIR) -> list[Path]:
    """Draw every chart of the results in ``folder`` again from their chart data."""
    drawn = []
    for result in load(folder):
        for name, chart in result.get("chart_data", {}).items():
            drawn.append(draw(chart, folder / name))
    return drawn
