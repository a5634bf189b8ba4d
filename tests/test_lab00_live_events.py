"""Lab 00's live cell, run as the notebook runs it against a real emulator, fleet and Spark:
under "each producer's events sit in one partition", every running producer shows up."""

from __future__ import annotations

import os
import re

from streamlab.course.notebooks import read_cells
from streamlab.hub.api import HUB_ENV
from streamlab.paths import REPO_ROOT

LAB = "00-orientation"


def _cells() -> dict[str, str]:
    cells = read_cells(REPO_ROOT / "solutions" / LAB / f"{LAB}.ipynb")
    return {c.get("id"): c["source"] for c in cells}


def test_the_live_events_show_every_producer(spark, hub, capsys, monkeypatch):
    cells = _cells()
    monkeypatch.setitem(os.environ, HUB_ENV, hub.connection_string)
    namespace: dict = {"spark": spark}
    exec(cells["c23"], namespace)  # the fleet of three and its panel
    try:
        exec(cells["c25"], namespace)  # the stream, then the table of its events
    finally:
        for name in ("live", "fleet"):
            if name in namespace:
                namespace[name].stop()
    table = capsys.readouterr().out.split("partitionKey", 1)[-1]
    shown = sorted(set(re.findall(r"\|(Producer \d+) *\|", table)))
    assert shown == ["Producer 1", "Producer 2", "Producer 3"], table
