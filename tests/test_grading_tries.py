"""What the learner tried, kept across gradings: first tries, reveals, and answers opened.

Each test grades with the real grader (``python -m streamlab.grading``, its checks in a child
process) on a small course of its own (``STREAMLAB_ROOT``): a prediction (1.1), a debug
exercise whose diagnosis has a check of its own (``part="diagnosis"``, 1.2) and a build
exercise (1.3), with answer cells after each ``%check`` in the solution notebook.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
from grader_runs import run_grader
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from streamlab.paths import REPO_ROOT

COURSE = """\
format_version = 1
[[labs]]
id = "01"
slug = "tries"
title = "Tries"
[[labs.exercises]]
id = "1.1"
title = "Predict the totals"
kind = "predict"
hints = ["Count each machine's rows.", "Add them window by window."]
[[labs.exercises]]
id = "1.2"
title = "Find the lost rows"
kind = "debug"
hints = ["Read the report.", "Count what the sink holds."]
[[labs.exercises]]
id = "1.3"
title = "Double it"
hints = ["Multiply.", "By two."]
"""

#: The checks, a file an exercise in the lab's folder (checks/lab_01/test_1_1.py, ...).
CHECKS = {
    "1.1": """\
from streamlab.grading import exercise, expect_equal, expect_keys


@exercise("1.1")
def test_totals_match_spark(nb):
    predicted = expect_keys(nb.TOTALS, "TOTALS", ["m1", "m2"])
    expect_equal(predicted, {"m1": 24, "m2": 3}, "Your prediction against what Spark counts.")
""",
    "1.2": """\
from streamlab.grading import exercise, expect_equal


@exercise("1.2", part="diagnosis")
def test_diagnosis(nb):
    expect_equal(nb.DIAGNOSIS_1_2, {"lost": 2, "batch": 1}, "DIAGNOSIS_1_2 against the run.")


@exercise("1.2", part="fix")
def test_fix(nb):
    expect_equal(nb.kept(), 5, "kept() should keep the 5 rows.")
""",
    "1.3": """\
from streamlab.grading import exercise, expect_equal


@exercise("1.3")
def test_double(nb):
    expect_equal(nb.double(2), 4, "double(2) should be 4.")
""",
}

SOLVED = {
    "1.1": 'TOTALS = {"m1": 24, "m2": 3}',
    "1.2": 'DIAGNOSIS_1_2 = {"lost": 2, "batch": 1}\n\n\ndef kept():\n    return 5',
    "1.3": "def double(x):\n    return 2 * x",
}
STUBS = {e: f'raise NotImplementedError("exercise {e} is not done yet")' for e in SOLVED}

#: What the solution notebook says after each check: the answer cells.
ANSWERS = {
    "1.1": "m1 counts **24**: 5 + 10 + 7 + 2, every row before its window closed.",
    "1.2": "Batch 1 lost 2 rows: the sink appended what update mode re-emitted.",
    "1.3": "Doubling is the identity of the monoid, twice.",
}
DISCUSSION = {"1.1": "Windows close on the watermark, not on the clock."}


def _tagged(cell, *tags):
    cell.metadata["tags"] = list(tags)
    return cell


def _notebook(path: Path, sources: dict[str, str], answers: bool) -> None:
    cells = [new_markdown_cell("# Tries")]
    for exercise, source in sources.items():
        cells.append(new_markdown_cell(f"## Exercise {exercise}"))
        cells.append(_tagged(new_code_cell(source), f"exercise-{exercise}"))
        cells.append(new_code_cell(f"%check {exercise}"))
        if answers:
            cells.append(_tagged(new_markdown_cell(ANSWERS[exercise]), f"answer-{exercise}"))
    if answers:
        proof = new_code_cell("# NBVAL_CHECK_OUTPUT\nprint(5 + 10 + 7 + 2)")
        proof.outputs = [nbformat.v4.new_output("stream", text="24\n")]
        proof.execution_count = 1
        cells.append(_tagged(proof, "answer-1.1"))
        cells.append(_tagged(new_code_cell("print('measured')"), "answer-1.2"))
    notebook = new_notebook()
    notebook.cells = cells
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)


@pytest.fixture
def course(tmp_path) -> Path:
    root = tmp_path / "course"
    (root / "checks").mkdir(parents=True)
    (root / "course.toml").write_text(COURSE)
    (root / "checks" / "lab_01").mkdir()
    for exercise, source in CHECKS.items():
        (root / "checks" / "lab_01" / f"test_{exercise.replace('.', '_')}.py").write_text(source)
    for name in ("pytest.ini", "conftest.py"):
        shutil.copy(REPO_ROOT / "checks" / name, root / "checks" / name)
    solved = {e: f"# BEGIN SOLUTION\n{s}\n# END SOLUTION" for e, s in SOLVED.items()}
    _notebook(root / "solutions" / "01-tries" / "01-tries.ipynb", solved, answers=True)
    _notebook(root / "labs" / "01-tries" / "01-tries.ipynb", STUBS, answers=False)
    (root / "discussions.toml").write_text(
        "".join(f'["{e}"]\ntext = """\n{t}\n"""\n' for e, t in DISCUSSION.items())
    )
    return root


def _env(course: Path) -> dict[str, str]:
    return {"STREAMLAB_ROOT": str(course), "STREAMLAB_WARM_GRADER": "0"}


def _write(course: Path, **sources: str) -> None:
    """The learner's notebook, with these exercises' cells written (ids as 1_1)."""
    written = {e: sources.get(e.replace(".", "_"), stub) for e, stub in STUBS.items()}
    _notebook(course / "labs" / "01-tries" / "01-tries.ipynb", written, answers=False)


def _grade(course: Path, *extra: str) -> tuple[str, dict]:
    json_path = course / "build" / "grade.json"
    out = run_grader("labs", "01", json_path=json_path, extra=extra, env=_env(course), timeout=300)
    assert "Traceback" not in out.stdout + out.stderr, out.stdout + out.stderr
    return out.stdout, json.loads(json_path.read_text())


def _rows(graded: dict) -> dict[str, dict]:
    return {row["id"]: row for lab in graded["labs"] for row in lab["exercises"]}


def _record(course: Path) -> dict:
    path = course / "build" / "first-tries.json"
    return json.loads(path.read_text())["exercises"] if path.exists() else {}


def test_a_labs_checks_in_one_file_beside_the_folders_are_refused_with_where_they_belong(course):
    """The grader reads a lab's checks from its folder only: the same checks in one file,
    ``checks/test_01_tries.py``, are not graded, and the grader says where they belong."""
    folder = course / "checks" / "lab_01"
    flat = "\n\n".join(path.read_text() for path in sorted(folder.glob("test_*.py")))
    (course / "checks" / "test_01_tries.py").write_text(flat)
    shutil.rmtree(folder)
    _write(course, **{"1_3": SOLVED["1.3"]})
    json_path = course / "build" / "grade.json"
    out = run_grader("labs", "01", json_path=json_path, env=_env(course), timeout=300)
    assert out.returncode == 2, out.stdout + out.stderr
    assert (
        "No checks for lab 01: a lab's checks are in checks/lab_01/, one file an exercise "
        "(test_1_1.py, ...)"
    ) in out.stderr
    assert not json_path.exists()


WRONG = 'TOTALS = {"m1": 22, "m2": 3}'


def test_the_first_graded_answer_is_kept_and_a_later_pass_does_not_change_it(course):
    _write(course)
    _, graded = _grade(course)
    # Nothing written yet: no try.
    assert "1.1" not in _record(course)
    assert "first_try" not in _rows(graded)["1.1"]

    _write(course, **{"1_1": WRONG})
    stdout, graded = _grade(course)
    first = {"answer": json.dumps({"TOTALS": {"m1": 22, "m2": 3}}), "right": False}
    assert _record(course)["1.1"]["first_try"] == {**first, "part": "prediction"}
    assert _rows(graded)["1.1"]["first_try"] == {**first, "part": "prediction"}
    assert "Called at the first try: 0 of 1" in stdout

    _write(course, **{"1_1": SOLVED["1.1"]})
    stdout, graded = _grade(course)
    assert _rows(graded)["1.1"]["status"] == "passed"
    assert _record(course)["1.1"]["first_try"] == {**first, "part": "prediction"}
    assert "Called at the first try: 0 of 1" in stdout


def test_a_diagnosis_counts_its_own_check_and_a_cell_that_fails_to_run_is_no_try(course):
    _write(course, **{"1_2": "DIAGNOSIS_1_2 = {'lost': 2, 'batch': 1}\nkept = None + 1"})
    _, graded = _grade(course)
    assert "1.2" not in _record(course)  # the cell raised before any check ran

    fixed_later = "DIAGNOSIS_1_2 = {'lost': 2, 'batch': 1}\n\ndef kept():\n    return 4"
    _write(course, **{"1_1": SOLVED["1.1"], "1_2": fixed_later})
    stdout, graded = _grade(course)
    assert _rows(graded)["1.2"]["status"] == "failed"  # the fix is not right yet
    tried = _record(course)["1.2"]["first_try"]
    assert tried["right"] is True and tried["part"] == "diagnosis"
    assert json.loads(tried["answer"]) == {"DIAGNOSIS_1_2": {"lost": 2, "batch": 1}}
    assert "Called at the first try: 2 of 2" in stdout


def test_a_wrong_prediction_says_which_keys_are_wrong_not_sparks_values(course):
    _write(course, **{"1_1": WRONG})
    stdout, graded = _grade(course)
    row = _rows(graded)["1.1"]
    assert row["status"] == "failed"
    assert "24" not in json.dumps(row) and "24" not in stdout
    assert "'m1'" in row["message"] and "'m2'" in row["message"]
    assert row["expected"] == "" and row["diff"] == ""
    assert "22" in row["actual"]  # the learner's own answer is theirs to see


def test_a_wrong_shape_still_shows_the_keys_asked_for(course):
    _write(course, **{"1_1": 'TOTALS = {"m1": 24}'})
    _, graded = _grade(course)
    assert "m2" in _rows(graded)["1.1"]["expected"] + _rows(graded)["1.1"]["diff"]


def _reveal(course: Path, exercise: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "streamlab.grading.reveal", exercise],
        capture_output=True,
        text=True,
        cwd=course,
        env={**os.environ, **_env(course)},
        timeout=120,
    )


def test_reveal_shows_the_answer_and_the_grade_does_not_count_it_passed(course):
    _write(course, **{"1_3": SOLVED["1.3"]})
    _, graded = _grade(course)
    out = _reveal(course, "1.1")
    assert out.returncode == 0, out.stderr
    assert ANSWERS["1.1"] in out.stdout  # the answer cells
    assert "24" in out.stdout and 'TOTALS = {"m1": 24, "m2": 3}' in out.stdout  # its solution
    assert DISCUSSION["1.1"] in out.stdout
    assert "BEGIN SOLUTION" not in out.stdout
    graded = json.loads((course / "build" / "grade.json").read_text())
    assert _rows(graded)["1.1"]["status"] == "revealed"
    assert graded["progress"]["passed"] == 1 and graded["progress"]["course_passed"] == 1
    # Revealed before any try: a miss.
    assert _record(course)["1.1"]["first_try"]["right"] is False
    assert "counts as missed at the first try" in " ".join(out.stdout.split())

    stdout, graded = _grade(course)
    assert _rows(graded)["1.1"]["status"] == "revealed"
    assert graded["progress"]["course_passed"] == 1 and not graded["complete"]
    assert "1 passed" in stdout and "1 revealed" in stdout

    _write(course, **{"1_1": SOLVED["1.1"], "1_3": SOLVED["1.3"]})
    stdout, graded = _grade(course)
    assert _rows(graded)["1.1"]["status"] == "passed" and _rows(graded)["1.1"]["revealed"]
    assert "passed (revealed)" in stdout


def test_a_wrong_prediction_shows_sparks_values_once_revealed(course):
    _reveal(course, "1.1")
    _write(course, **{"1_1": WRONG})
    _, graded = _grade(course)
    assert "24" in _rows(graded)["1.1"]["expected"] + _rows(graded)["1.1"]["diff"]


def test_a_pass_writes_the_answer_cells_where_the_closing_lines_say(course):
    _write(course, **{"1_1": SOLVED["1.1"]})
    stdout, _ = _grade(course)
    page = course / "build" / "answers" / "1.1.md"
    assert page.exists()
    text = page.read_text()
    assert ANSWERS["1.1"] in text and "24" in text  # the proof cell's recorded output
    lines = [line for line in stdout.splitlines() if "build/answers/1.1.md" in line]
    assert len(lines) == 1
    assert not (course / "build" / "answers" / "1.3.md").exists()  # 1.3 did not pass


def test_grading_the_solutions_records_nothing(course):
    _grade(course, "--notebooks", "solutions")
    assert not (course / "build" / "first-tries.json").exists()


def test_the_guard_opens_once_the_exercise_was_graded(course):
    code = textwrap.dedent(
        """
        from streamlab.grading import tries
        print(tries.opened("1.1"), tries.opened("1.3"))
        """
    )

    def opened() -> str:
        return subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env={**os.environ, **_env(course)},
            check=True,
        ).stdout.strip()

    assert opened() == "False False"
    _write(course, **{"1_1": WRONG})
    _grade(course)
    assert opened() == "True False"


def _check_magic(course: Path, line: str) -> tuple[str, str]:
    """What ``%check LINE`` shows (as text, and as JupyterLab's HTML) in the course."""
    code = (
        "from streamlab.grading import magic\n"
        f"report = magic.check({line!r})\n"
        "print(str(report))\nprint('=' * 20)\nprint(report._repr_html_())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=course,
        env={**os.environ, **_env(course)},
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    text, _, shown = out.stdout.partition("=" * 20)
    return text, shown


def test_check_shows_the_answer_cells_under_a_pass_and_keeps_the_first_try(course):
    _write(course, **{"1_1": WRONG})
    text, shown = _check_magic(course, "1.1")
    assert "failed" in text and ANSWERS["1.1"] not in text and "24" not in text + shown
    assert _record(course)["1.1"]["first_try"]["right"] is False

    _write(course, **{"1_1": SOLVED["1.1"], "1_2": SOLVED["1.2"]})
    text, shown = _check_magic(course, "1.1 1.2")
    assert ANSWERS["1.1"] in text
    assert "<strong>24</strong>" in shown  # the markdown, rendered
    assert "<pre style='margin:2px 0'>24</pre>" in shown  # the proof cell's recorded output
    assert ANSWERS["1.2"] in text
    assert "The code cells tagged answer-1.2 under this exercise's check now run" in text
    assert _record(course)["1.1"]["first_try"]["right"] is False  # still the first try

    assert _reveal(course, "1.3").returncode == 0
    text, _ = _check_magic(course, "1.3")
    assert "revealed" in text and ANSWERS["1.3"] in text  # its code is still a stub


def test_a_wrong_answer_is_told_which_parts_are_wrong_in_words_without_the_right_values():
    from streamlab.grading.attempt import wrong_parts

    spark = {"emitted": [("10:00:00", "P1", 2), ("10:00:20", "P1", 2)], "dropped": 1}
    mine = {"emitted": [("10:00:00", "P1", 2), ("10:00:20", "P1", 3)], "dropped": 1}
    said = wrong_parts(spark, mine)
    assert said == "Right: 'dropped'. Not right yet: 'emitted' (1 of your 2 items right)."
    assert wrong_parts([1, 2, 3], [3, 4]) == "1 of your 2 items are right."
    assert wrong_parts(24, 22) == ""
