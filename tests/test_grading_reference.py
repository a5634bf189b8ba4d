"""A course without its reference notebooks: what it cannot grade is not graded, never failed.

The checks of several labs compare the learner's code with the course's reference notebooks
in ``solutions/`` (:func:`streamlab.solutions.load_solution`): lab 10's checks load lab 05's
reference when they are imported, a graded-setup cell of lab 08 loads it when the notebook
runs, and 5.6's checks load it in the middle of a check. Each test grades with the real
grader on a copy of the course (``STREAMLAB_ROOT``) whose ``solutions/`` lacks lab 05.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from grader_runs import run_grader

from streamlab.course import registry
from streamlab.grading import magic, report, supervisor
from streamlab.grading.events import EventKind
from streamlab.paths import REPO_ROOT

LAB05 = registry.lab("05")
MISSING = "solutions/05-restart-recovery/05-restart-recovery.ipynb"
RESTORE = (
    f"compare your code with the course's reference notebooks in solutions/, and {MISSING} is "
    "missing: restore it with `git checkout -- solutions/` (or download the course again), "
    "then grade again."
)


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """A copy of the course whose solutions/ lacks lab 05, and a learner's notebooks beside it."""
    root = tmp_path_factory.mktemp("course")
    shutil.copy(REPO_ROOT / "course.toml", root / "course.toml")
    shutil.copytree(REPO_ROOT / "checks", root / "checks")
    shutil.copytree(REPO_ROOT / "solutions", root / "solutions")
    shutil.rmtree(root / "solutions" / LAB05.name)
    mine = root / "mine"
    for lab in ("08", "10"):
        name = registry.lab(lab).name
        shutil.copytree(REPO_ROOT / "labs" / name, mine / name)
    # A learner who solved lab 05: its own notebook is there, the course's reference is not.
    shutil.copytree(REPO_ROOT / "solutions" / LAB05.name, mine / LAB05.name)
    return root


def _grade(course: Path, *args: str) -> tuple[str, int, dict]:
    json_path = course / "build" / "grade.json"
    out = run_grader(
        course / "mine",
        *args,
        json_path=json_path,
        env={"STREAMLAB_ROOT": str(course)},
        timeout=300,
    )
    text = out.stdout + out.stderr
    assert "Traceback" not in text
    return out.stdout, out.returncode, json.loads(json_path.read_text())


def _rows(graded: dict, lab: str) -> dict[str, dict]:
    entry = next(entry for entry in graded["labs"] if entry["id"] == lab)
    return {row["id"]: row for row in entry["exercises"]}


def test_labs_whose_reference_is_missing_are_not_graded_and_not_failed(course):
    stdout, code, graded = _grade(course, "08", "10")
    assert code == 1  # not graded is not a pass, but nothing failed
    lab10 = next(entry for entry in graded["labs"] if entry["id"] == "10")
    # Lab 10's checks do not even load without lab 05's reference: one sentence for the lab.
    assert lab10["message"] == f"Lab 10's checks {RESTORE}"
    assert {row["status"] for row in lab10["exercises"]} == {"not-graded"}
    # Lab 08's notebook loads lab 05's reference in its graded-setup cell; lab 10's broken
    # checks do not keep lab 08 from being graded.
    lab08 = _rows(graded, "08")
    assert {row["status"] for row in lab08.values()} == {"not-graded"}
    assert {row["message"] for row in lab08.values()} == {f"This lab's checks {RESTORE}"}
    assert all(row["hint"] == "" for row in [*lab08.values(), *lab10["exercises"]])

    total = len(lab08) + len(lab10["exercises"])
    assert graded["progress"]["failed"] == 0 and graded["progress"]["not-graded"] == total
    assert stdout.strip().splitlines()[-1] == f"0 passed, 0 failed, {total} not graded"
    words = " ".join(stdout.split())
    assert f"Not graded: Lab 10's checks {RESTORE}" in words
    assert f"This lab's checks {RESTORE}" in words
    assert words.count("(or download the course again)") == 2  # once a lab, not an exercise
    assert "✗" not in stdout and " failed\n" not in stdout
    assert "Hint:" not in stdout and "bug in the course" not in stdout
    for row in lab10["exercises"]:
        assert f"{row['id']} " in stdout and row["title"] in stdout
    assert "not graded" in next(line for line in stdout.splitlines() if "10.1 " in line)


def test_an_exercise_whose_check_needs_the_missing_reference_is_not_graded(course):
    stdout, code, graded = _grade(course, "--exercise", "5.1", "--exercise", "5.6")
    rows = _rows(graded, "05")
    assert rows["5.1"]["status"] == "passed"
    assert rows["5.6"]["status"] == "not-graded"
    assert rows["5.6"]["message"] == f"The checks of exercise 5.6 {RESTORE}"
    assert rows["5.6"]["hint"] == ""
    assert code == 1
    assert stdout.strip().splitlines()[-1] == "1 passed, 0 failed, 1 not graded"
    assert "Hint:" not in stdout and "In the cell tagged" not in stdout


def test_check_in_a_notebook_says_not_graded(course, monkeypatch):
    # %check runs the same grader: the learner sees the status and the sentence, no hint.
    monkeypatch.setenv("STREAMLAB_ROOT", str(course))
    folder = course / "mine" / registry.lab("08").name
    checked = magic.check("8.1", cwd=folder)
    [exercise] = checked.exercises
    assert (exercise.status, exercise.message) == ("not-graded", f"This lab's checks {RESTORE}")
    assert exercise.hint == ""
    text = str(checked)
    assert f"Exercise 8.1 · {exercise.title}: not graded" in text
    assert "Hint:" not in text and "failed" not in text and "Graded:" not in text
    assert "  Read: the cell tagged exercise-8.1 (" in text
    assert "not graded" in checked._repr_html_()


def test_a_check_file_broken_for_another_reason_is_still_a_course_bug():
    outcome = supervisor.Outcome()
    supervisor._follow(
        {
            "event": EventKind.BROKEN,
            "check": "checks/lab_10/test_10_1.py",
            "message": "E NameError: x",
        },
        supervisor._Run(outcome, supervisor._Plan(), cell_limit=1.0, cap=None),
    )
    assert "This is a bug in the course" in outcome.lab_errors["10"]
    assert outcome.not_graded == set()
    graded = report.grade([registry.lab("10")], [], lab_errors=outcome.lab_errors)
    assert {row["status"] for row in graded["labs"][0]["exercises"]} == {"failed"}
