"""The table of every benchmark's targets, and the results published to the website.

Reads ``build/bench/*.json``, prints figure, value, target and verdict for each, and copies
the results and their charts into ``site/benchmarks/`` (the website's Benchmarks page and
lab 06 show them). ``nox -s bench`` runs it after the benchmarks.

    python bench/_report.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from streamlab.benchmarks import results as benchmarks
from streamlab.paths import REPO_ROOT


def main() -> int:
    results = benchmarks.load(benchmarks.RESULTS_DIR)
    if not results:
        print(f"no results in {benchmarks.RESULTS_DIR}: run `nox -s bench` first", file=sys.stderr)
        return 1
    print(benchmarks.text_table(results))
    copied = benchmarks.publish()
    print(f"published {len(copied)} files to {benchmarks.PUBLISHED_DIR.relative_to(REPO_ROOT)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
