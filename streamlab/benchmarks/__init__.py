"""The course's benchmark results, as notebooks, the website and ``nox -s bench`` read them.

- :mod:`~streamlab.benchmarks.results`: load, table, publish and show results;
- :mod:`~streamlab.benchmarks.breakdown`: a micro-batch's time split into its parts;
- :mod:`~streamlab.benchmarks.charts`: the charts, drawn by matplotlib from the results.

The benchmarks themselves are the scripts in ``bench/`` (``nox -s bench``). In a notebook::

    from streamlab import benchmarks
    benchmarks.show("state_providers", "changelog")
"""

from __future__ import annotations

from streamlab.benchmarks.breakdown import BATCH_PARTS, batch_parts, state_times
from streamlab.benchmarks.results import (
    ORDER,
    PUBLISHED_DIR,
    RESULTS_DIR,
    BenchmarkError,
    displays,
    load,
    machine_line,
    markdown_section,
    publish,
    show,
    text_table,
    value_text,
    verdict,
)

__all__ = [
    "BATCH_PARTS",
    "ORDER",
    "PUBLISHED_DIR",
    "RESULTS_DIR",
    "BenchmarkError",
    "batch_parts",
    "displays",
    "load",
    "machine_line",
    "markdown_section",
    "publish",
    "show",
    "state_times",
    "text_table",
    "value_text",
    "verdict",
]
