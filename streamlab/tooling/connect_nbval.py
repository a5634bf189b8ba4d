"""A pytest plugin for the solution notebooks over Spark Connect: classic-only cells are skipped.

A cell tagged ``classic-only`` reaches the driver's JVM (a ``sparkContext``, a query's Java
object, a fair-scheduler pool), or needs what such a cell built: over Spark Connect it stops
with PySpark's or the course's sentence saying so, and the site's Setup page lists its section.
``nox -s connect_notebooks`` loads this plugin (``-p streamlab.tooling.connect_nbval``), which
skips those cells with that reason; the classic run (``nox -s test``) runs them all.
"""

from __future__ import annotations

import pytest

#: The cell tag of a cell that needs a classic Spark session.
CLASSIC_ONLY = "classic-only"
REASON = "needs a classic Spark session (tagged classic-only)"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        cell = getattr(item, "cell", None)
        if cell is not None and CLASSIC_ONLY in cell.get("metadata", {}).get("tags", []):
            item.add_marker(pytest.mark.skip(reason=REASON))
