"""The grader's formats, held whole: ``build/grade.json`` and the table ``nox -s check`` prints.

The files under ``tests/golden/`` are what one fixed grade must give. A change to either
format fails here; when the change is meant, refresh them and read the diff before
committing::

    STREAMLAB_REFRESH_GOLDEN=1 .nox/course/bin/python -m pytest tests/test_golden.py

A change that removes a field of ``grade.json`` or changes its meaning also moves
``report.FORMAT_VERSION`` on.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from streamlab.course.registry import Exercise, Lab
from streamlab.grading import report
from streamlab.grading.expect import CheckFailed
from streamlab.grading.loader import CellProblem, NotebookMissing, reference_sentence
from streamlab.grading.verdict import (
    NOT_STARTED,
    PASSED,
    CellFailed,
    CheckResult,
    Verdict,
    verdict_for,
)
from streamlab.paths import REPO_ROOT

GOLDEN = Path(__file__).parent / "golden"
REFRESH = os.environ.get("STREAMLAB_REFRESH_GOLDEN") == "1"

HINTS = ("A nudge.", "An approach.")
LAB = Lab(
    id="04",
    slug="state",
    title="State",
    summary="",
    exercises=(
        Exercise("4.1", "The state machine", HINTS),
        Exercise("4.2", "Heartbeats and timeouts", ("Emit a row only on a change.", "Then...")),
        Exercise("4.3", "Two state calls", HINTS),
        Exercise("4.4", "The query", HINTS, kind="predict"),
        Exercise("4.5", "Against the reference", HINTS),
        Exercise("4.6", "Set up on the reference", HINTS),
        Exercise("4.7", "Set up on the reference too", HINTS),
    ),
)


def _graded() -> dict:
    rows = [("m1", "Initializing", None, 0), ("m1", "Unhealthy", "Healthy", 7_000)]
    transitions = CheckFailed(
        "After 5 s of silence the machine should turn Unhealthy.",
        expected=rows,
        actual=[rows[0], ("m1", "Unhealthy", "Healthy", 8_000)],
        hint="A timer fires only when no heartbeat came before it.",
    )
    long = AssertionError("The sink should hold each batch once; " * 25)
    notebook = LAB.notebook(REPO_ROOT / "labs")
    reference = NotebookMissing(REPO_ROOT / "solutions" / "03-state" / "03-state.ipynb")
    setup = CellProblem(
        None, 3, "reference", reference_sentence(reference, "This lab's checks"), "import json"
    )
    results = [
        CheckResult("04", "4.1", "a", Verdict(PASSED, "")),
        CheckResult("04", "4.2", "b", verdict_for(transitions, "4.2")),
        CheckResult("04", "4.3", "c", verdict_for(long, "4.3")),
        CheckResult("04", "4.4", "d", Verdict(NOT_STARTED, "Exercise 4.4 is not done yet.")),
        # The course's reference notebook is missing: not graded, said once, with no hint.
        CheckResult("04", "4.5", "e", verdict_for(reference, "4.5", notebook)),
        CheckResult("04", "4.6", "f", verdict_for(CellFailed(setup), "4.6")),
        CheckResult("04", "4.7", "g", verdict_for(CellFailed(setup), "4.7")),
    ]
    earlier = {
        "status": "graded",
        "notebooks": "labs",
        "labs": [{"id": "03", "exercises": [{"id": "3.1", "title": "t", "status": "passed"}]}],
    }
    graded = report.grade(
        [LAB],
        results,
        cells={"04": {"4.1": 6, "4.2": 10, "4.3": 17, "4.4": 23, "4.5": 30, "4.6": 33, "4.7": 36}},
        first_lines={"04": {"4.2": "class HeartbeatProcessor(StatefulProcessor):"}},
        fingerprints={"04": "0123456789abcdef"},
        earlier=earlier,
        # The learner's record: 4.1 passed after its answer was revealed, 4.3's answer was
        # revealed and its code still fails, 4.4's first try missed (the cell is a stub again).
        tries={
            "4.1": {"graded": True, "revealed": True},
            "4.3": {"graded": True, "revealed": True},
            "4.4": {
                "graded": True,
                "first_try": {"answer": '{"QUERY": 3}', "right": False, "part": "prediction"},
            },
        },
    )
    graded["unsaved"] = [
        {"lab": "04", "exercise": "4.3", "notebook": "labs/x.ipynb", "message": "Did you save?"}
    ]
    return graded


def _same(name: str, text: str) -> None:
    path = GOLDEN / name
    if REFRESH:
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no {path}: refresh the golden files (see this module's docstring)"
    assert text == path.read_text(encoding="utf-8"), (
        f"{name} changed; if that is meant, refresh the golden files (this module's docstring)"
    )


def test_grade_json_is_the_golden_file(tmp_path):
    report.write_json(_graded(), tmp_path / "grade.json")
    text = (tmp_path / "grade.json").read_text(encoding="utf-8")
    assert json.loads(text)["format_version"] == report.FORMAT_VERSION
    _same("grade.json", text)


def test_the_table_is_the_golden_file():
    _same("table.txt", report.render(_graded()) + "\n")


@pytest.mark.skipif(REFRESH, reason="refreshing")
def test_the_golden_files_are_committed():
    assert {p.name for p in GOLDEN.iterdir()} >= {"grade.json", "table.txt"}
