"""``build/grade.json`` is read as records and refused, with a sentence, when it is not one."""

from __future__ import annotations

import json

import pytest

from streamlab.grading import grade_file
from streamlab.grading.grade_file import Grade, GradeFileInvalid, GradeStatus, LabStatus
from streamlab.grading.verdict import Status

GOLDEN = grade_file.Path(__file__).parent / "golden" / "grade.json"


def test_the_golden_grade_reads_as_records_and_writes_back_the_same_text(tmp_path):
    grade = grade_file.read(GOLDEN)
    assert grade is not None and grade.status is GradeStatus.GRADED
    lab = grade.labs[0]
    assert (lab.id, lab.status) == ("04", LabStatus.GRADED)
    assert [row.status for row in lab.exercises][:2] == [Status.PASSED, Status.FAILED]
    assert grade.earlier_labs[0].exercises[0].status is Status.PASSED
    grade_file.write(grade, tmp_path / "grade.json")
    assert (tmp_path / "grade.json").read_text(encoding="utf-8") == GOLDEN.read_text("utf-8")


def test_no_file_is_no_grade(tmp_path):
    assert grade_file.read(tmp_path / "grade.json") is None


def test_a_grade_in_progress_is_one(tmp_path):
    path = tmp_path / "grade.json"
    path.write_text('{"status": "in-progress"}')
    assert grade_file.read(path) == Grade(GradeStatus.IN_PROGRESS, fields={"status": "in-progress"})


def _golden() -> dict:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


def _broken(change) -> dict:
    grade = _golden()
    change(grade)
    return grade


@pytest.mark.parametrize(
    ("grade", "says"),
    [
        ("{not json", "it is not JSON"),
        (json.dumps([1, 2]), "the grade should be an object; it is list"),
        (json.dumps({"status": "done"}), "its status is 'done'; it should be one of graded, "),
        (
            json.dumps({**_golden(), "format_version": 1}),
            "its format_version is 1, and this course writes 2",
        ),
        (json.dumps(_broken(lambda g: g.pop("labs"))), "labs should be a list; it is NoneType"),
        (
            json.dumps(_broken(lambda g: g["labs"][0]["exercises"][1].update(status="pass"))),
            "labs[0].exercises[1].status is 'pass'; it should be one of passed, failed, ",
        ),
        (
            json.dumps(_broken(lambda g: g["earlier_labs"][0].pop("id"))),
            "earlier_labs[0].id should be a string; it is None",
        ),
    ],
)
def test_a_file_of_another_shape_is_refused_with_a_sentence(tmp_path, grade, says):
    path = tmp_path / "grade.json"
    path.write_text(grade)
    with pytest.raises(GradeFileInvalid) as refused:
        grade_file.read(path)
    sentence = str(refused.value)
    assert sentence.startswith(f"{path} is not a grade this course writes: ")
    assert says in sentence


def _of_version_1(tmp_path):
    path = tmp_path / "grade.json"
    path.write_text(json.dumps({**_golden(), "format_version": 1}))
    return path


def test_the_grader_refuses_a_grade_of_another_shape(tmp_path):
    from streamlab.grading import report

    path = _of_version_1(tmp_path)
    with pytest.raises(ValueError, match="is not a grade this course writes: its format_version"):
        report.read_json(path)


def test_grading_over_a_grade_of_another_shape_says_so(tmp_path, capsys):
    from streamlab.grading.__main__ import _earlier

    assert _earlier(_of_version_1(tmp_path)) is None
    said = capsys.readouterr().err
    assert "is not a grade this course writes: its format_version is 1" in said
    assert said.strip().endswith("this grading writes a new one, without what it held.")


def test_the_site_says_why_a_grade_of_another_shape_opens_no_solution(tmp_path, caplog):
    from streamlab.tooling import mkdocs_hooks

    assert mkdocs_hooks.passed_exercises(_of_version_1(tmp_path)) == frozenset()
    assert "is not a grade this course writes: its format_version is 1" in caplog.text
    assert "no exercise's solution opens" in caplog.text
