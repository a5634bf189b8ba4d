"""``python -m streamlab.grading [LAB ...]``: grade the lab notebooks (``nox -s check``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from streamlab import registry
from streamlab.grading import report
from streamlab.grading.plugin import results
from streamlab.paths import BUILD_DIR, REPO_ROOT


class _Recorder:
    """Keeps the pytest config and any check file that failed to import."""

    def __init__(self) -> None:
        self.config: pytest.Config | None = None
        self.broken: list[str] = []

    def pytest_configure(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            last = report.longreprtext.strip().splitlines()[-1:] or ["?"]
            self.broken.append(f"{report.nodeid}: {last[0]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nox -s check --", description=__doc__)
    parser.add_argument("labs", nargs="*", help="lab ids to grade, e.g. 04 (default: all)")
    parser.add_argument("--notebooks", default="labs",
                        help="folder of notebooks to grade (default: labs)")
    parser.add_argument("--json", default=str(BUILD_DIR / "grade.json"),
                        help="where to write the grade as JSON")
    parser.add_argument("--max-check-seconds", type=float, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        chosen = [registry.lab(i) for i in args.labs] or list(registry.labs())
    except registry.RegistryError as error:
        print(error, file=sys.stderr)
        return 2
    missing = [lab for lab in chosen if not lab.check_file.exists()]
    if missing:
        print("no checks for lab(s) " + ", ".join(lab.id for lab in missing), file=sys.stderr)
        return 2

    print(f"Grading {len(chosen)} lab(s) in {args.notebooks}/ ...", flush=True)
    recorder = _Recorder()
    pytest.main(
        [str(lab.check_file) for lab in chosen]
        + (["--max-check-seconds", str(args.max_check_seconds)] if args.max_check_seconds else [])
        + ["--notebooks", args.notebooks, "-p", "no:terminal", "-p", "no:cacheprovider",
           "--rootdir", str(REPO_ROOT), "-c", str(REPO_ROOT / "checks" / "pytest.ini")],
        plugins=[recorder],
    )
    if recorder.broken or recorder.config is None:
        print("The checks themselves could not be loaded (a course bug, please report it):")
        for line in recorder.broken:
            print(f"  {line}")
        return 2
    graded = report.grade(chosen, results(recorder.config))
    report.write_json(graded, Path(args.json))
    print()
    print(report.render(graded))
    tally = report.counts(graded)
    return 0 if tally["passed"] == sum(tally.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
