"""A check that fails because an earlier exercise's code is broken blames that exercise."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
from grader_runs import run_grader

from streamlab.course import registry
from streamlab.grading import blame, calls
from streamlab.grading.verdict import FAILED, PASSED, CheckResult, Verdict
from streamlab.paths import REPO_ROOT

LAB07 = registry.lab("07")


def test_the_loader_knows_which_earlier_exercise_each_exercise_runs():
    cells = [
        (None, "import json\n\ndef helper(): ..."),
        ("7.7", "def once_per_batch(path, app_id):\n    return helper"),
        ("7.8", "DIAGNOSIS_7_8 = {}\n\ndef samples_writer(s, t):\n    return once_per_batch(t, t)"),
    ]
    assert calls.uses(cells) == {"7.8": {"7.7": ["once_per_batch"]}}


def test_a_failure_by_an_error_is_blamed_on_a_failing_earlier_exercise_only():
    used = {"07": {"7.8": {"7.7": ["once_per_batch"]}}}
    raised = Verdict(FAILED, "Your code raised ...", hint="Output modes.", cause="TypeError")
    wrong = Verdict(FAILED, "The table should hold ...", hint="Output modes.")
    later = [CheckResult("07", "7.8", "a", raised), CheckResult("07", "7.8", "b", wrong)]
    broken = [CheckResult("07", "7.7", "c", Verdict(FAILED, "A replayed batch ..."))]
    fine = [CheckResult("07", "7.7", "c", Verdict(PASSED, ""))]
    assert blame.unchecked(later, used, ["7.8"]) == ["7.7"]
    assert blame.unchecked(later, used, ["7.7", "7.8"]) == []
    said = blame.blamed(later, used, broken)
    assert "from exercise 7.7, which fails its own checks" in said[0].verdict.message
    assert "TypeError" in said[0].verdict.message
    assert said[0].verdict.hint == "" and said[0].verdict.hintless
    assert said[1] == later[1]  # a wrong result is the exercise's own
    assert blame.blamed(later, used, fine) == later


def _lab07(folder: Path) -> None:
    """Lab 07 solved, but for 7.7's writer, which skips a replayed batch before computing it."""
    notebook = nbformat.read(LAB07.notebook(REPO_ROOT / "solutions"), as_version=4)
    cell = next(c for c in notebook.cells if "exercise-7.7" in c.metadata.get("tags", []))
    first = "        rows = batch.toArrow()                 # the whole batch, written or not\n"
    assert first in cell.source
    source = cell.source.replace(first, "")
    cell.source = source.replace(
        "        write_deltalake(path, rows,",
        "        rows = batch.toArrow()\n        write_deltalake(path, rows,",
    )
    target = LAB07.notebook(folder)
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)


def test_a_right_7_8_on_a_broken_7_7_blames_7_7_with_the_deepest_cause(tmp_path):
    _lab07(tmp_path / "nb")
    grade_json = tmp_path / "grade.json"
    out = run_grader(
        tmp_path / "nb", "07", json_path=grade_json, extra=("--exercise", "7.8"), timeout=1500
    )
    (row,) = [
        e for e in json.loads(grade_json.read_text())["labs"][0]["exercises"] if not e["earlier"]
    ]
    assert row["id"] == "7.8" and row["status"] == "failed", row
    message = row["message"]
    assert "from exercise 7.7, which fails its own checks" in message, message
    assert "STATE_STORE_COMMIT_VALIDATION_FAILED" in message, message
    assert row["hint"] == ""
    assert "Traceback" not in out.stdout + out.stderr


def test_the_deepest_cause_is_spark_s_innermost_class_and_never_a_hidden_wrapper():
    from streamlab.spark_errors import deepest_cause

    try:
        try:
            raise RuntimeError("An error occurred while calling o42.set")
        except RuntimeError:
            raise ValueError("the key is not a valid setting") from None
    except ValueError as error:
        converted = error
    assert deepest_cause(converted).name == "ValueError"

    class StreamingQueryException(Exception):
        _stackTrace = (
            "org.apache.spark.sql.streaming.StreamingQueryException: [STREAM_FAILED] Query ...\n"
            "Caused by: org.apache.spark.SparkException: Exception thrown in awaitResult: \n"
            "\tat org.apache.spark.util.SparkThreadUtils$.awaitResult(SparkThreadUtils.scala:53)\n"
            "Caused by: org.apache.spark.sql.execution.streaming.state."
            "StateStoreCommitValidationFailed: [STATE_STORE_COMMIT_VALIDATION_FAILED] State "
            "store commit validation failed for batch 2.\n"
        )

    failed = StreamingQueryException(
        "[STREAM_FAILED] Query [id = 1] terminated with exception: Exception thrown in "
        "awaitResult: SQLSTATE: XXKST"
    )
    cause = deepest_cause(failed)
    assert cause.name == "STATE_STORE_COMMIT_VALIDATION_FAILED"
    assert "commit validation failed for batch 2" in str(cause)
