"""An exercise with a diagnosis and a fix is graded by part, and each part's failure gets its
own hint."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

import nbformat
import pytest

from streamlab.course import registry
from streamlab.grading import report, supervisor
from streamlab.grading.verdict import FAILED, NOT_STARTED, PASSED, CheckResult, Verdict
from streamlab.paths import REPO_ROOT

DEBUG = [e for lab in registry.labs() for e in lab.exercises if e.kind == "debug"]


def _markers(lab: registry.Lab) -> list[tuple[str, dict, str]]:
    """(exercise, the marker's keyword arguments as source, the check's source) per check."""
    found = []
    for check in lab.check_files:
        source = check.read_text(encoding="utf-8")
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef):
                found += _marked(source, node)
    return found


def _marked(source: str, node: ast.FunctionDef) -> list[tuple[str, dict, str]]:
    found = []
    for decorator in node.decorator_list:
        if (
            isinstance(decorator, ast.Call)
            and getattr(decorator.func, "id", "") == "exercise"
            and isinstance(decorator.args[0], ast.Constant)
        ):
            kwargs = {k.arg: ast.get_source_segment(source, k.value) for k in decorator.keywords}
            found.append(
                (decorator.args[0].value, kwargs, ast.get_source_segment(source, node) or "")
            )
    return found


def _has_diagnosis(exercise: registry.Exercise) -> bool:
    lab = registry.lab(exercise.id.partition(".")[0])
    text = lab.notebook(REPO_ROOT / "solutions").read_text(encoding="utf-8")
    return f"DIAGNOSIS_{exercise.id.replace('.', '_')}" in text


@pytest.mark.parametrize("exercise", [e for e in DEBUG if _has_diagnosis(e)], ids=lambda e: e.id)
def test_a_debug_exercise_grades_its_diagnosis_apart_and_hints_its_fix(exercise):
    lab = registry.lab(exercise.id.partition(".")[0])
    name = f"DIAGNOSIS_{exercise.id.replace('.', '_')}"
    checks = [(kwargs, body) for ex, kwargs, body in _markers(lab) if ex == exercise.id]
    diagnosis = [kwargs for kwargs, body in checks if f"nb.{name}" in body]
    fix = [kwargs for kwargs, body in checks if f"nb.{name}" not in body]
    assert diagnosis and fix
    assert all(k.get("part") == '"diagnosis"' for k in diagnosis), diagnosis
    assert all(k.get("part") == '"fix"' and k.get("hint") for k in fix), fix


def _grade(*verdicts: tuple[str, Verdict]) -> dict:
    lab = registry.lab("02")
    results = [CheckResult("02", "2.5", f"c{n}", v, part=p) for n, (p, v) in enumerate(verdicts)]
    (row,) = report.grade([lab], results, exercises={"2.5"})["labs"][0]["exercises"]
    return row


def test_a_right_diagnosis_with_the_fix_not_done_says_so_without_a_hint():
    row = _grade(
        ("diagnosis", Verdict(PASSED, "")),
        ("fix", Verdict(NOT_STARTED, "Exercise 2.5 is not done yet.")),
    )
    assert row["status"] == FAILED
    assert row["message"].endswith("Diagnosis: right; the fix is not done yet.")
    assert row["hint"] == ""


def test_a_wrong_fix_after_a_right_diagnosis_gets_the_fixs_hint():
    row = _grade(
        ("diagnosis", Verdict(PASSED, "")),
        ("fix", Verdict(FAILED, "The table holds a window twice.", hint="Weigh the modes.")),
    )
    assert "Diagnosis: right. The fix: The table holds a window twice." in row["message"]
    assert row["hint"] == "Weigh the modes."
    wrong = _grade(
        ("diagnosis", Verdict(FAILED, "DIAGNOSIS_2_5 against a run.", hint="Measure.")),
        ("fix", Verdict(FAILED, "The table holds a window twice.", hint="Weigh the modes.")),
    )
    assert wrong["hint"] == "Measure." and "Diagnosis: right" not in wrong["message"]


def _lab02(folder: Path, change) -> None:
    lab = registry.lab("02")
    notebook = nbformat.read(lab.notebook(REPO_ROOT / "solutions"), as_version=4)
    cell = next(c for c in notebook.cells if "exercise-2.5" in c.metadata.get("tags", []))
    cell.source = change(cell.source)
    target = lab.notebook(folder)
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)


def test_grading_2_5_by_part_on_spark(tmp_path):
    """The diagnosis right and the fix a stub, then the fix in the wrong output mode."""
    lab = registry.lab("02")
    checks = _check_module("02", "2.5")
    stub = 'raise NotImplementedError("exercise 2.5 is not done yet")'

    def fix_stubbed(source: str) -> str:
        head, _, _ = source.partition("    # BEGIN SOLUTION\n    return")
        return head + "    " + stub + "\n"

    def wrong_mode(source: str) -> str:
        return source.replace('.outputMode("complete")', '.outputMode("update")')

    said = {}
    for name, change in (("stub", fix_stubbed), ("update", wrong_mode)):
        _lab02(tmp_path / name, change)
        outcome = supervisor.run(
            [lab], str(tmp_path / name), exercises=["2.5"], log_path=tmp_path / f"{name}.log"
        )
        graded = report.grade([lab], outcome.results, exercises={"2.5"})
        (row,) = graded["labs"][0]["exercises"]
        said[name] = row
    assert re.search(r"Diagnosis: right; the fix is not done yet\.$", said["stub"]["message"])
    assert said["stub"]["hint"] == ""
    assert "Diagnosis: right. The fix:" in said["update"]["message"], said["update"]["message"]
    assert said["update"]["hint"] in (
        checks.BOARD_FIX_HINT,
        "The table holds a window twice: weigh each output mode against what your diagnosis "
        "found the sink does with the rows a batch hands it.",
    )
    assert said["update"]["hint"] != lab.exercise("2.5").hint


def _check_module(lab_id: str, exercise: str):
    """A lab's checks as a module: the file of ``exercise`` in the lab's folder, which imports
    its lab's story from beside it, as pytest does; its story for ``exercise="story"``."""
    lab = registry.lab(lab_id)
    name = f"story_{lab_id}" if exercise == "story" else f"test_{exercise.replace('.', '_')}"
    path = lab.check_dir / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"lab{lab_id}_checks", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def test_the_first_hint_of_a_failure_is_aimed_at_it():
    from types import SimpleNamespace

    from streamlab.grading.expect import CheckFailed
    from streamlab.grading.verdict import verdict_for

    lab00 = _check_module("00", "0.2")
    returns_nothing = SimpleNamespace(run_once=lambda *args: None)
    with pytest.raises(CheckFailed) as failed:
        lab00._run(returns_nothing, None, "in", "out", "checkpoint")
    verdict = verdict_for(failed.value, "0.2")
    assert "NoneType" in verdict.message
    assert "wait until it has ended" in verdict.hint
    assert verdict.hint != registry.lab("00").exercise("0.2").hint
    # Any check that says a function returned None, without a hint of its own.
    plain = verdict_for(CheckFailed("f() should return a dict; it returned NoneType."), "2.3")
    assert "`return`" in plain.hint


def test_a_sample_with_only_its_middle_wrong_gets_the_middles_hint_not_the_orders():
    from streamlab.grading.expect import CheckFailed

    lab07 = _check_module("07", "story")
    readings = [(10, 1, 50.0), (20, 2, 50.0), (30, 3, 50.0), (40, 4, 50.0), (50, 5, 50.0)]
    want = lab07.expected_sample("s", 0, readings)
    middle_off = (*want[:5], readings[1], *want[6:])
    with pytest.raises(CheckFailed) as failed:
        lab07.compare([middle_off], [want], "rule")
    assert failed.value.hint == lab07.PART_HINTS["middle"]
    first_off = (*want[:4], readings[1], *want[5:])
    with pytest.raises(CheckFailed) as failed:
        lab07.compare([first_off], [want], "rule")
    assert failed.value.hint == lab07.ORDER_HINT
