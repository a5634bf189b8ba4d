"""The widgets a learner reads pass an automated accessibility check (axe-core, WCAG 2.1 AA)
in Chromium, and say each status in text and shape, not colour alone.

The widgets' HTML is laid out in one page as the notebook shows it: the status board with a
machine in each status, the time view of two micro-batches (one late row dropped), the alert
feed and the backlog. The producer panel is ipywidgets' own buttons; it is checked in JupyterLab
by ``tests/test_jupyterlab_board.py``, with the keyboard.
"""

from __future__ import annotations

import html
import re

import ipywidgets
from offline_browser import accessibility_violations, offline_context

from streamlab.widgets import COLOURS, StatusBoard
from streamlab.widgets.board import SHAPES
from streamlab.widgets.time_view import TimeView

STATUSES = ["Initializing", "Healthy", "Unhealthy"]

REPORTS = [
    {
        "batchId": 0,
        "numInputRows": 2,
        "eventTime": {
            "min": "2026-11-22T10:00:01.000Z",
            "max": "2026-11-22T10:00:31.000Z",
            "watermark": "1970-01-01T00:00:00.000Z",
        },
        "stateOperators": [
            {
                "operatorName": "stateStoreSave",
                "numRowsTotal": 2,
                "numRowsUpdated": 2,
                "numRowsRemoved": 0,
                "numRowsDroppedByWatermark": 0,
            }
        ],
        "sink": {"numOutputRows": 0},
    },
    {
        "batchId": 1,
        "numInputRows": 1,
        "eventTime": {
            "min": "2026-11-22T10:00:03.000Z",
            "max": "2026-11-22T10:00:03.000Z",
            "watermark": "2026-11-22T10:00:26.000Z",
        },
        "stateOperators": [
            {
                "operatorName": "stateStoreSave",
                "numRowsTotal": 1,
                "numRowsUpdated": 0,
                "numRowsRemoved": 1,
                "numRowsDroppedByWatermark": 1,
            }
        ],
        "sink": {"numOutputRows": 1},
    },
]


def _html_of(widget) -> str:
    """The HTML widgets inside ``widget``, in order, as the notebook lays them out."""
    parts = []
    if isinstance(widget, ipywidgets.HTML):
        classes = " ".join(widget._dom_classes)
        parts.append(f'<div class="{html.escape(classes)}">{widget.value}</div>')
    for child in getattr(widget, "children", ()):
        parts.append(_html_of(child))
    return "".join(parts)


def _board() -> StatusBoard:
    board = StatusBoard()
    board.update(
        [
            {
                "machine_name": f"Producer {n}",
                "status": status,
                "previous_status": None,
                "last_status_change_time": None,
            }
            for n, status in enumerate(STATUSES, 1)
        ],
        measure=False,
    )
    return board


def _busy_board() -> StatusBoard:
    """A board whose transition log is longer than its box: the box scrolls."""
    board = _board()
    for round_ in range(12):
        board.update(
            [
                {
                    "machine_name": f"Producer {n}",
                    "status": STATUSES[(n + round_) % 3],
                    "previous_status": STATUSES[(n + round_ - 1) % 3],
                    "last_status_change_time": None,
                }
                for n in range(1, 4)
            ],
            measure=False,
        )
    return board


def test_the_widgets_pass_the_accessibility_check_in_chromium(browser):
    board = _busy_board()
    page_html = (
        '<html lang="en"><head><title>widgets</title></head><body><main>'
        f'<section class="board">{_html_of(board.widget)}</section>'
        f'<section class="time">{TimeView(REPORTS).html()}</section>'
        "</main></body></html>"
    )
    blocked: list[str] = []
    context = offline_context(browser, blocked)
    page = context.new_page()
    try:
        page.set_content(page_html)
        found = {
            "board": accessibility_violations(page, ".board"),
            "time view": accessibility_violations(page, ".time"),
        }
    finally:
        context.close()
    assert found == {"board": [], "time view": []}
    assert blocked == []
    assert board.log.value.count("&rarr;") > 12  # the log is longer than its box


def test_a_badge_says_its_status_in_text_and_shape_not_colour_alone():
    board = _board()
    said = {}
    for n, status in enumerate(STATUSES, 1):
        value = board.badge(f"Producer {n}").value
        text = re.sub(r"<[^>]+>", " ", value)
        said[status] = (SHAPES[status] in text, status in text, COLOURS[status] in value)
    assert said == {status: (True, True, True) for status in STATUSES}
    assert len({SHAPES[s] for s in [None, *STATUSES]}) == 4  # one shape per status
