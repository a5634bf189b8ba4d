"""The grader: loading exercise cells, verdicts, the report, and the command end to end."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import nbformat
import pytest
from grader_runs import run_grader
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from streamlab.course import registry
from streamlab.course.notebooks import exercise_id, without_markers
from streamlab.grading import loader, report
from streamlab.grading.plugin import CheckResult
from streamlab.grading.timeout import CheckTimeout, time_limit
from streamlab.grading.verdict import (
    FAILED,
    NOT_STARTED,
    PASSED,
    CellFailed,
    Verdict,
    combine,
    verdict_for,
)
from streamlab.paths import REPO_ROOT


def _write(tmp_path: Path, *cells) -> Path:
    notebook = new_notebook()
    notebook.cells = list(cells)
    path = tmp_path / "lab.ipynb"
    nbformat.write(notebook, path)
    return path


def _code(source: str, *tags: str):
    cell = new_code_cell(source)
    cell.metadata["tags"] = list(tags)
    return cell


def test_only_graded_cells_run_in_a_fresh_module(tmp_path):
    path = _write(
        tmp_path,
        new_markdown_cell("# intro"),
        _code("import math", "graded-setup"),
        _code("LEFTOVER = 1"),  # an ordinary cell: the grader must not see its names
        _code("def area(r):\n    return math.pi * r * r", "exercise-1.1"),
    )
    loaded = loader.load_notebook(path)
    assert loaded.area(1) == pytest.approx(3.14159, rel=1e-4)
    with pytest.raises(loader.MissingName):
        _ = loaded.LEFTOVER
    assert loaded.exercises == {"1.1"} and loaded.problems == []


def test_a_syntax_error_names_the_cell_and_spares_other_exercises(tmp_path):
    path = _write(
        tmp_path,
        new_markdown_cell("# intro"),
        _code("def broken(:\n    pass", "exercise-1.1"),
        _code("def fine():\n    return 2", "exercise-1.2"),
    )
    loaded = loader.load_notebook(path)
    problem = loaded.problem_for("1.1")
    assert problem is not None and problem.kind == "syntax"
    # Named as JupyterLab shows it (a tag and a first line), never by a position it hides.
    assert problem.sentence().startswith(
        "The cell tagged exercise-1.1 (`def broken(:`) has a syntax error: line 1"
    )
    assert loaded.problem_for("1.2") is None and loaded.fine() == 2


def test_a_broken_setup_cell_blocks_every_exercise(tmp_path):
    path = _write(
        tmp_path,
        _code("import no_such_module_here", "graded-setup"),
        _code("def f():\n    return 1", "exercise-1.1"),
    )
    problem = loader.load_notebook(path).problem_for("1.1")
    assert problem is not None and "ModuleNotFoundError" in problem.sentence()
    assert "the graded-setup cell (`import no_such_module_here`)" in problem.sentence()


def test_an_endless_loop_at_cell_level_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(loader, "CELL_TIME_LIMIT", 0.5)
    path = _write(tmp_path, _code("while True:\n    pass", "exercise-1.1"))
    problem = loader.load_notebook(path).problem_for("1.1")
    assert problem is not None and problem.kind == "timeout"
    assert "endless loop" in problem.sentence()


def test_a_stub_at_cell_level_means_not_started(tmp_path):
    path = _write(
        tmp_path, _code('raise NotImplementedError("exercise 1.1 is not done yet")', "exercise-1.1")
    )
    problem = loader.load_notebook(path).problem_for("1.1")
    assert verdict_for(CellFailed(problem), "1.1").status == NOT_STARTED


def test_a_cell_that_still_holds_its_stub_is_not_started(tmp_path):
    stub = 'def f():\n    raise NotImplementedError("exercise 1.1 is not done yet")'
    path = _write(
        tmp_path, _code(stub, "exercise-1.1"), _code("def g():\n    return 1", "exercise-1.2")
    )
    loaded = loader.load_notebook(path)
    assert loaded.problem_for("1.1").kind == "not-done"
    assert loaded.problem_for("1.2") is None


def test_time_limit_interrupts_a_loop():
    with pytest.raises(CheckTimeout, match="0.2 s"):
        with time_limit(0.2) as running:
            while True:
                pass
    assert running.expired


@pytest.mark.parametrize(
    "error, status, words",
    [
        (None, PASSED, ""),
        (NotImplementedError("exercise 4.2 is not done yet"), NOT_STARTED, "not done yet"),
        (
            RuntimeError(
                "PythonException: ... NotImplementedError: exercise 4.2 is not done yet\n at"
            ),
            NOT_STARTED,
            "not done yet",
        ),
        (NotImplementedError("exercise 4.1 is not done yet"), FAILED, "finish exercise 4.1 first"),
        (loader.MissingName("build_it", Path("x")), FAILED, "Did you rename it"),
        (CheckTimeout(30), FAILED, "endless loop"),
        (
            AssertionError("Expected 3 rows, got 2.\nassert 2 == 3"),
            FAILED,
            "Expected 3 rows, got 2.",
        ),
        (
            TypeError("unsupported operand"),
            FAILED,
            "Your code raised TypeError: unsupported operand",
        ),
    ],
)
def test_verdicts_speak_in_sentences(error, status, words):
    verdict = verdict_for(error, "4.2")
    assert verdict.status == status and words in verdict.message
    assert "\nassert" not in verdict.message and "Traceback" not in verdict.message


def test_a_check_that_waits_on_an_earlier_exercise_gives_no_hint_of_its_own():
    from streamlab.course import registry
    from streamlab.grading import report
    from streamlab.grading.verdict import CheckResult

    lab = registry.lab("03")
    waits = verdict_for(NotImplementedError("exercise 3.1 is not done yet"), "3.4")
    own = verdict_for(TypeError("unsupported operand"), "3.4")
    hints = {}
    for name, verdict in (("waits", waits), ("own", own)):
        graded = report.grade([lab], [CheckResult("03", "3.4", "c", verdict)], exercises={"3.4"})
        (row,) = graded["labs"][0]["exercises"]
        hints[name] = row["hint"]
    assert hints == {"waits": "", "own": lab.exercise("3.4").hint}


def test_an_exercise_passes_only_when_every_check_passes():
    ok, todo, bad = Verdict(PASSED, ""), Verdict(NOT_STARTED, "todo"), Verdict(FAILED, "bad")
    assert combine([ok, ok]).status == PASSED
    assert combine([todo, todo]).status == NOT_STARTED
    assert combine([ok, bad]) == Verdict(FAILED, "bad")
    assert combine([ok, todo]).status == FAILED
    assert combine([]).status == FAILED


def test_grade_json_has_the_documented_shape():
    lab = registry.lab("00")
    first, second = lab.exercises[0], lab.exercises[1]
    results = [
        CheckResult("00", first.id, "a", Verdict(PASSED, "")),
        CheckResult("00", second.id, "b", Verdict(FAILED, "Expected 5 rows.")),
    ]
    graded = report.grade([lab], results)
    entry = graded["labs"][0]
    assert (entry["id"], entry["title"]) == ("00", lab.title)
    statuses = {e["id"]: (e["status"], e["message"]) for e in entry["exercises"]}
    assert statuses[first.id] == ("passed", "")
    assert statuses[second.id] == ("failed", "Expected 5 rows.")
    assert set(entry["exercises"][0]) >= {"id", "title", "status", "message"}
    text = report.render(graded)
    assert "Expected 5 rows." in text and text.splitlines()[-1].startswith("1 passed, ")


def _with_cell(source_dir: Path, target_dir: Path, exercise: str, new_source: str) -> None:
    """Copy lab 00's notebook from source_dir to target_dir with one exercise cell replaced."""
    lab = registry.lab("00")
    notebook = nbformat.read(lab.notebook(source_dir), as_version=4)
    for cell in notebook.cells:
        if f"exercise-{exercise}" in cell.metadata.get("tags", []):
            cell.source = new_source
    target = lab.notebook(target_dir)
    target.parent.mkdir(parents=True)
    nbformat.write(notebook, target)


def test_the_untouched_labs_grade_as_not_started(tmp_path):
    # Not started is not a failure (exit 0 without --complete), but --complete tells: 3.
    out = run_grader("labs", json_path=tmp_path / "grade.json", extra=("--complete",))
    assert out.returncode == 3, out.stdout + out.stderr
    graded = json.loads((tmp_path / "grade.json").read_text())
    total = 0
    for lab in graded["labs"]:
        assert lab["status"] == "graded"
        for exercise in lab["exercises"]:
            assert exercise["status"] == "not-started", (lab["id"], exercise)
            total += 1
    assert graded["complete"] is False
    assert graded["progress"]["next"]["id"] == "0.1"
    assert "Traceback" not in out.stdout + out.stderr
    assert out.stdout.strip().splitlines()[-1] == f"0 passed, 0 failed, {total} not started"
    assert f"Course progress: 0 of {total} exercises passed" in out.stdout


def test_the_solutions_pass_every_check(tmp_path):
    # Every lab from cold: five minutes on a quiet 2-core machine, three times that on a busy one.
    out = run_grader(
        "solutions", json_path=tmp_path / "grade.json", extra=("--complete",), timeout=1500
    )
    assert out.returncode == 0, out.stdout + out.stderr
    graded = json.loads((tmp_path / "grade.json").read_text())
    assert graded["complete"] is True and graded["progress"]["next"] is None
    failing = [
        (e["id"], e["message"])
        for lab in graded["labs"]
        for e in lab["exercises"]
        if e["status"] != "passed"
    ]
    assert failing == []
    total = sum(len(lab["exercises"]) for lab in graded["labs"])
    assert out.stdout.strip().splitlines()[-1] == f"{total} passed, 0 failed"


def test_broken_cells_get_one_line_reasons(tmp_path):
    # A learner's lab 00 with the solution pasted into 0.1, a syntax error in 0.2 and an
    # endless loop in 0.3.
    notebooks = tmp_path / "mine"
    _with_cell(
        REPO_ROOT / "solutions",
        notebooks,
        "0.2",
        "def run_once(spark, input_dir, output_dir, checkpoint_dir):\n    return {'a': 1\n",
    )
    nb_path = registry.lab("00").notebook(notebooks)
    notebook = nbformat.read(nb_path, as_version=4)
    for cell in notebook.cells:
        if "exercise-0.3" in cell.metadata.get("tags", []):
            cell.source = "def summarise_progress(progress):\n    while True:\n        pass\n"
    nbformat.write(notebook, nb_path)

    out = run_grader(
        notebooks, "00", json_path=tmp_path / "grade.json", extra=("--max-check-seconds", "3")
    )
    assert out.returncode == 1
    exercises = {
        e["id"]: e
        for e in json.loads((tmp_path / "grade.json").read_text())["labs"][0]["exercises"]
    }
    assert exercises["0.1"]["status"] == "passed"
    syntax = exercises["0.2"]["message"]
    assert exercises["0.2"]["status"] == "failed" and "syntax error" in syntax
    assert syntax.startswith("The cell tagged exercise-0.2 (`def run_once(spark, input_dir, ")
    loop = exercises["0.3"]["message"]
    assert exercises["0.3"]["status"] == "failed" and "did not finish within" in loop
    assert "endless loop" in loop
    assert "Traceback" not in out.stdout


def test_a_missing_tag_and_sys_exit_name_their_cells(tmp_path):
    path = _write(
        tmp_path,
        new_markdown_cell("# intro"),
        _code("import sys\ndef f():\n    return 1\nsys.exit(1)", "exercise-1.1"),
    )
    loaded = loader.load_notebook(path, expected=["1.1", "1.2"])
    exited = loaded.problem_for("1.1")
    assert exited.kind == "exit" and exited.sentence().startswith(
        "Running the cell tagged exercise-1.1 (`import sys`) ended the program with sys.exit(1) "
        "(line 4"
    )
    assert loaded.f() == 1  # what the cell defined before it exited still counts
    missing = loaded.problem_for("1.2")
    assert missing.kind == "missing-tag" and "No cell of" in missing.sentence()
    assert "tagged exercise-1.2" in missing.sentence()


def test_next_up_is_the_first_exercise_not_passed_and_the_tally_tells_them_apart():
    lab = registry.lab("00")
    first, second, third = lab.exercises[:3]
    results = [
        CheckResult("00", first.id, "a", Verdict(PASSED, "")),
        CheckResult("00", second.id, "b", Verdict(FAILED, "Expected 5 rows.")),
        CheckResult("00", third.id, "c", Verdict(NOT_STARTED, "not done")),
    ]
    graded = report.grade([lab], results)
    assert graded["progress"]["next"]["id"] == second.id
    assert (
        graded["progress"]["passed"],
        graded["progress"]["failed"],
        graded["progress"]["not-started"],
    ) == (1, 1, 1)
    text = report.render(graded)
    assert f"Next up: exercise {second.id}" in text and "(failed)" in text
    assert text.splitlines()[-1] == "1 passed, 1 failed, 1 not started"
    assert f"Hint: {' '.join(second.hint.split())}" in " ".join(text.split())
    # Graded alone, one exercise; the course tally counts an earlier run's other labs.
    only = report.grade(
        [lab],
        results[:1],
        exercises={first.id},
        earlier={
            "status": "graded",
            "notebooks": "labs",
            "labs": [{"id": "01", "exercises": [{"id": "1.1", "title": "t", "status": "passed"}]}],
        },
    )
    assert [e["id"] for e in only["labs"][0]["exercises"]] == [first.id]
    assert only["progress"]["course_passed"] == 2 and only["complete"] is True
    total = sum(len(lab.exercises) for lab in registry.labs())
    assert f"Course progress: 2 of {total} exercises passed" in report.render(only)


def test_next_up_stays_within_the_labs_graded_and_shows_no_hint_unasked():
    lab04, lab05 = registry.lab("04"), registry.lab("05")
    earlier = report.grade(
        [lab04], [CheckResult("04", "4.2", "a", Verdict(FAILED, "Wrong."))], exercises={"4.2"}
    )
    results = [CheckResult("05", e.id, "a", Verdict(NOT_STARTED, "")) for e in lab05.exercises]
    graded = report.grade([lab05], results, earlier=earlier)
    assert graded["progress"]["next"]["id"] == lab05.exercises[0].id
    text = report.render(graded)
    assert (
        f"Next up: exercise {lab05.exercises[0].id}," in text
        and "4.2" not in text.split("Next up")[1]
    )
    assert "Hint:" not in text
    # Not started is no failed attempt: grade.json holds no hint for it either.
    assert all(e["hint"] == "" for e in graded["labs"][0]["exercises"])
    solved = [CheckResult("05", e.id, "a", Verdict(PASSED, "")) for e in lab05.exercises]
    # Every exercise graded now has passed: next is the first of the labs after them.
    after = report.grade([lab05], solved, earlier=earlier)["progress"]["next"]
    assert after["id"] == registry.lab("06").exercises[0].id


def test_nox_check_grades_chosen_exercises_without_nox_noise(tmp_path):
    # As a learner types it: the table is the last thing printed, with nothing red after it.
    nox = REPO_ROOT / ".venv" / "bin" / "nox"
    if not nox.exists():
        pytest.skip("nox is not installed in .venv")
    grade_json = tmp_path / "grade.json"
    out = subprocess.run(
        [
            str(nox),
            "-s",
            "check",
            "--",
            "00",
            "--notebooks",
            "solutions",
            "--exercise",
            "0.1",
            "--exercise",
            "0.3",
            "--json",
            str(grade_json),
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=300,
    )
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    assert "uv binary not found" not in text and "Session check" not in text
    assert out.stdout.strip().splitlines()[-1] == "2 passed, 0 failed"
    exercises = json.loads(grade_json.read_text())["labs"][0]["exercises"]
    assert [(e["id"], e["status"]) for e in exercises] == [("0.1", "passed"), ("0.3", "passed")]


def _lab05(folder: Path, solved: tuple[str, ...]) -> Path:
    """Lab 05 as handed out, with the cells of ``solved`` as a learner who solved them has them."""
    lab = registry.lab("05")
    solution = {
        exercise_id(cell): without_markers(cell.source)
        for cell in nbformat.read(lab.notebook(REPO_ROOT / "solutions"), as_version=4).cells
        if exercise_id(cell)
    }
    notebook = nbformat.read(lab.notebook(REPO_ROOT / "labs"), as_version=4)
    for cell in notebook.cells:
        if exercise_id(cell) in solved:
            cell.source = solution[exercise_id(cell)]
    path = lab.notebook(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)
    return path


def test_grading_one_exercise_keeps_the_rest_of_the_labs_record(tmp_path):
    # Lab 05's exercises 5.1, 5.6 and 5.7 need no Spark; the others are left as stubs.
    lab = registry.lab("05")
    total = len(lab.exercises)
    mine, grade_json = tmp_path / "mine", tmp_path / "build" / "grade.json"
    _lab05(mine, ("5.1", "5.6"))
    out = run_grader(mine, "05", json_path=grade_json)
    assert out.returncode == 0, out.stdout + out.stderr
    first = json.loads(grade_json.read_text())["labs"][0]
    assert [e["id"] for e in first["exercises"] if e["status"] == "passed"] == ["5.1", "5.6"]

    # The same code, one exercise again: the others hold as they were graded.
    out = run_grader(mine, "05", json_path=grade_json, extra=("--exercise", "5.1"))
    assert out.returncode == 0, out.stdout + out.stderr
    again = json.loads(grade_json.read_text())
    entry = again["labs"][0]
    assert entry["fingerprint"] == first["fingerprint"] and entry["earlier_exercises"] == []
    assert [e["id"] for e in entry["exercises"]] == [e.id for e in lab.exercises]
    assert [e["id"] for e in entry["exercises"] if not e["earlier"]] == ["5.1"]
    assert again["progress"]["labs"] == [
        {
            "id": "05",
            "earlier": False,
            "total": total,
            "passed": 2,
            "kept": total - 1,
            "outdated": 0,
        }
    ]
    assert f"(lab 05 2/{total}+)" in out.stdout
    assert "as an earlier run graded them, on the same code." in " ".join(out.stdout.split())
    assert "5.6 " not in out.stdout  # the table shows what was graded now
    assert out.stdout.strip().splitlines()[-1] == "1 passed, 0 failed"

    # 5.7 solved, graded alone: the notebook's graded cells changed since the others were
    # graded, so they are kept as recorded, apart, and not claimed for the code of now.
    _lab05(mine, ("5.1", "5.6", "5.7"))
    out = run_grader(mine, "05", json_path=grade_json, extra=("--exercise", "5.7"))
    assert out.returncode == 0, out.stdout + out.stderr
    last = json.loads(grade_json.read_text())
    entry = last["labs"][0]
    assert entry["fingerprint"] != first["fingerprint"]
    assert [(e["id"], e["status"], e["earlier"]) for e in entry["exercises"]] == [
        ("5.7", "passed", False)
    ]
    kept = entry["earlier_exercises"]
    assert [e["id"] for e in kept] == [e.id for e in lab.exercises if e.id != "5.7"]
    assert {e["fingerprint"] for e in kept} == {first["fingerprint"]}
    assert all(e["earlier"] for e in kept)
    assert {e["id"]: e["status"] for e in kept if e["status"] == "passed"} == {
        "5.1": "passed",
        "5.6": "passed",
    }
    assert last["progress"]["labs"][0]["passed"] == 3
    assert last["progress"]["labs"][0]["outdated"] == total - 1
    words = " ".join(out.stdout.split())
    course = sum(len(lab.exercises) for lab in registry.labs())
    assert f"Course progress: 3 of {course} exercises passed (lab 05 3/{total}+)." in words
    assert (
        f"+ lab 05: {total - 1} exercises not graded in this run count as an earlier run graded "
        "them; the notebook's graded cells have changed since: `nox -s check -- 05` grades them "
        "again."
    ) in words
    assert out.stdout.strip().splitlines()[-1] == "1 passed, 0 failed"


def test_a_lab_not_graded_now_keeps_its_earlier_record_whole():
    lab04, lab05 = registry.lab("04"), registry.lab("05")
    rows = [CheckResult("04", e.id, "a", Verdict(PASSED, "")) for e in lab04.exercises]
    earlier = report.grade([lab04], rows, fingerprints={"04": "f1"})
    # Lab 04 named, but only an exercise of lab 05 graded: lab 04 stays as it was.
    graded = report.grade(
        [lab04, lab05],
        [CheckResult("05", "5.1", "a", Verdict(PASSED, ""))],
        exercises={"5.1"},
        earlier=earlier,
    )
    assert [lab["id"] for lab in graded["labs"]] == ["05"]
    assert graded["earlier_labs"] == earlier["labs"]
    # Lab 04 graded again but its checks could not run (no fingerprint): the rest of its
    # record is kept apart, and the table does not say the code changed.
    again = report.grade(
        [lab04],
        [],
        lab_errors={"04": "Lab 04 could not be graded."},
        exercises={"4.1"},
        earlier=earlier,
    )
    entry = again["labs"][0]
    assert [e["id"] for e in entry["exercises"]] == ["4.1"]
    assert [e["fingerprint"] for e in entry["earlier_exercises"]] == ["f1"] * (
        len(lab04.exercises) - 1
    )
    text = " ".join(report.render(again).split())
    assert "this run could not tell whether the code has changed since" in text
