"""Every check says expected against actual: the checks use the kit, never a bare assert."""

from __future__ import annotations

import ast

import pytest

from streamlab.grading import CheckFailed, expect_that
from streamlab.paths import REPO_ROOT

#: The checks, and the helpers they share that fail a check themselves.
CHECK_FILES = [
    *sorted((REPO_ROOT / "checks").glob("*.py")),
    REPO_ROOT / "streamlab" / "kit" / "heartbeat.py",
]


@pytest.mark.parametrize("path", CHECK_FILES, ids=lambda p: p.name)
def test_a_check_file_holds_no_bare_assert(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lines = [node.lineno for node in ast.walk(tree) if _bare(node)]
    assert not lines, (
        f"{path.name} has a bare assert or AssertionError on line(s) {lines}: a learner would "
        "see its sentence without what was expected and what the code did. Use "
        "expect_equal(), expect_that() or CheckFailed(..., expected=, actual=)."
    )


def _bare(node: ast.AST) -> bool:
    if isinstance(node, ast.Assert):
        return True
    if isinstance(node, ast.Raise) and node.exc is not None:
        raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        return isinstance(raised, ast.Name) and raised.id == "AssertionError"
    return False


def test_expect_says_what_was_wanted_and_what_came():
    expect_that(True, "never shown", expected="a DataFrame", actual="a list")
    with pytest.raises(CheckFailed) as failed:
        expect_that(False, "plan() should return a Plan.", expected="a Plan", actual="tuple")
    assert failed.value.message == "plan() should return a Plan."
    assert (failed.value.expected, failed.value.actual) == ("a Plan", "tuple")


def test_expect_dataframe_names_the_function_and_what_it_returned(spark):
    from streamlab.grading import expect_dataframe

    frame = spark.range(1)
    assert expect_dataframe(frame, "windows", ["id"]) is frame
    with pytest.raises(CheckFailed) as failed:
        expect_dataframe([1], "windows")
    assert failed.value.message.startswith("windows() should return a DataFrame.")
    assert (failed.value.expected, failed.value.actual) == ("a DataFrame", "list")
    with pytest.raises(CheckFailed) as failed:
        expect_dataframe(frame, "windows", ["window", "n"])
    assert failed.value.expected == "['window', 'n']"
