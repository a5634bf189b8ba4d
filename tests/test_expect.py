"""A failed check shows expected against actual, whole in grade.json, and its own hint."""

from __future__ import annotations

import pytest
from pyspark.sql import Row

from streamlab.course import registry
from streamlab.grading import report
from streamlab.grading.expect import CheckFailed, expect_equal, expect_keys, list_diff
from streamlab.grading.verdict import FAILED, CheckResult, verdict_for


def test_equal_values_pass_and_different_ones_say_both():
    expect_equal([1, 2], [1, 2], "same")
    with pytest.raises(CheckFailed) as failed:
        expect_equal([("m1", "Healthy")], [("m1", "Unhealthy")], "The machine should fail.")
    assert failed.value.expected == "[('m1', 'Unhealthy')]"
    assert failed.value.actual == "[('m1', 'Healthy')]"


def test_none_from_the_learner_s_code_is_shown_as_none():
    with pytest.raises(CheckFailed) as failed:
        expect_equal(None, 86_440_000, "The partition's timer.")
    assert (failed.value.expected, failed.value.actual) == ("86440000", "None")
    with pytest.raises(CheckFailed) as expected_none:
        expect_equal(5, None, "No timer.")
    assert (expected_none.value.expected, expected_none.value.actual) == ("None", "5")
    assert CheckFailed("A sentence alone.").actual == ""  # nothing given, nothing shown


def test_the_verdict_keeps_the_whole_comparison_and_the_checks_hint():
    rows = [("Producer 1", "Healthy", "Initializing", 1_000 * n) for n in range(40)]
    error = CheckFailed(
        "Forty rows were expected." + " x" * 300,
        expected=rows,
        actual=rows[:3],
        hint="Count the rows your handler yields.",
    )
    verdict = verdict_for(error, "4.2")
    assert verdict.status == FAILED
    assert verdict.message.endswith(" x" * 300)  # never cut
    assert len(verdict.expected.splitlines()) == 40 and len(verdict.actual.splitlines()) == 3
    assert verdict.hint == "Count the rows your handler yields."


def test_the_table_shortens_what_grade_json_keeps_whole():
    lab = registry.lab("04")
    exercise = lab.exercises[1]
    rows = [f"row {n}" for n in range(30)]
    error = CheckFailed(
        "Wrong rows.",
        expected="\n".join(rows),
        actual="nothing",
        hint="Emit a row only on a change.",
    )
    graded = report.grade(
        [lab],
        [CheckResult("04", exercise.id, "c", verdict_for(error, "4.2"))],
        exercises={exercise.id},
    )
    row = graded["labs"][0]["exercises"][0]
    assert row["expected"].splitlines() == rows and row["actual"] == "nothing"
    assert row["hint"] == "Emit a row only on a change."
    text = report.render(graded)
    assert "row 11" in text and "row 12" not in text
    assert "18 more lines in build/grade.json" in text
    assert "Hint: Emit a row only on a change." in text


def test_a_long_sentence_is_whole_in_grade_json_and_shortened_in_the_table():
    lab = registry.lab("04")
    sentence = "The machine should turn Unhealthy after five seconds of silence, " * 20
    graded = report.grade(
        [lab],
        [CheckResult("04", "4.2", "c", verdict_for(AssertionError(sentence), "4.2"))],
        exercises={"4.2"},
    )
    row = graded["labs"][0]["exercises"][0]
    assert row["message"] == sentence.strip()
    text = report.render(graded)
    assert "(the whole message is in build/grade.json)" in " ".join(text.split())
    assert len(" ".join(text.split())) < len(sentence) + 800


def test_two_lists_of_transitions_are_shown_as_a_diff():
    expected = [("m1", "Initializing", None, 0), ("m1", "Unhealthy", "Healthy", 7_000)]
    actual = [("m1", "Initializing", None, 0), ("m1", "Unhealthy", "Healthy", 8_000), ("m2", "x")]
    with pytest.raises(CheckFailed) as failed:
        expect_equal(actual, expected, "The transitions differ.")
    assert failed.value.diff.splitlines() == [
        "ok       ('m1', 'Initializing', None, 0)",
        "changed  ('m1', 'Unhealthy', 'Healthy', 7000)",
        "     to  ('m1', 'Unhealthy', 'Healthy', 8000)",
        "extra    ('m2', 'x')",
    ]
    with pytest.raises(CheckFailed) as short:
        expect_equal(actual[:1], [], "Nothing was expected.")
    assert short.value.diff == ""  # one item against none: expected and actual say it
    missing = list_diff(expected, expected[:1])
    assert missing.splitlines()[-1] == "missing  ('m1', 'Unhealthy', 'Healthy', 7000)"

    lab = registry.lab("04")
    graded = report.grade(
        [lab], [CheckResult("04", "4.2", "c", verdict_for(failed.value, "4.2"))], exercises={"4.2"}
    )
    row = graded["labs"][0]["exercises"][0]
    assert row["diff"] == failed.value.diff and row["expected"] and row["actual"]
    text = report.render(graded)
    assert "expected against your code:" in text and "     to  ('m1', 'Unhealthy'" in text
    assert "your code:" not in [line.strip() for line in text.splitlines()]  # a diff, not lists


def test_numbers_equal_as_numbers_are_no_difference_in_a_diff():
    # Lab 5.8: the answers were right but for one, and came as floats where ints were
    # expected; the diff must point at the one wrong row, not at every 13 against 13.0.
    cases = ["read to its end", "cut short", "no numbers", "one row", "ahead", "no number"]
    cases += ["repeated", "late", "ends"]
    expected = [(case, 13) for case in cases]
    actual = [(case, 13.0) for case in cases]
    actual[4] = ("ahead", 14.0)
    with pytest.raises(CheckFailed) as failed:
        expect_equal(actual, expected, "read_until for each case.")
    lines = failed.value.diff.splitlines()
    assert [line.split()[0] for line in lines].count("ok") == 8
    assert [line for line in lines if not line.startswith("ok")] == [
        "changed  ('ahead', 13)",
        "     to  ('ahead', 14)",
    ]
    # Equal as numbers is equal, in rows and dicts too; only the diff's lines are rendered
    # alike, what the code returned is shown as it was.
    expect_equal(actual[:4], expected[:4], "equal")
    assert "13.0" in failed.value.actual
    rows = [Row(name=f"m{n}", seen={"count": 2, "seconds": n + 0.5}) for n in range(4)]
    floats = [Row(name=f"m{n}", seen={"count": 2.0, "seconds": n + 0.5}) for n in range(4)]
    floats[3] = Row(name="m9", seen={"count": 2.0, "seconds": 3.5})
    lines = list_diff(rows, floats).splitlines()
    assert lines == [
        "ok       Row(name='m0', seen={'count': 2, 'seconds': 0.5})",
        "ok       Row(name='m1', seen={'count': 2, 'seconds': 1.5})",
        "ok       Row(name='m2', seen={'count': 2, 'seconds': 2.5})",
        "changed  Row(name='m3', seen={'count': 2, 'seconds': 3.5})",
        "     to  Row(name='m9', seen={'count': 2, 'seconds': 3.5})",
    ]


def test_a_diff_shows_each_item_the_way_the_check_shows_its_list():
    # A check's `show` renders a whole list of rows; the diff shows each row the same way.
    def show(rows) -> str:
        return "\n".join(f"{m} {n}" for m, n in rows) or "nothing"

    with pytest.raises(CheckFailed) as failed:
        expect_equal([("m1", 1), ("m2", 2.0)], [("m1", 1.0), ("m2", 3)], "Counts.", show=show)
    assert failed.value.expected == "m1 1.0\nm2 3"
    assert failed.value.diff.splitlines() == ["ok       m1 1", "changed  m2 3", "     to  m2 2"]


def test_a_dict_with_other_keys_says_which_were_expected_and_which_it_has():
    assert expect_keys({"b": 1, "a": 2}, "DIAGNOSIS_9_9", ["a", "b"]) == {"b": 1, "a": 2}
    with pytest.raises(CheckFailed) as missing:
        expect_keys({"a": 2}, "DIAGNOSIS_9_9", ["a", "b"], hint="Read the progress report.")
    assert missing.value.message == "DIAGNOSIS_9_9 should have exactly the keys 'a' and 'b'."
    assert (missing.value.expected, missing.value.actual) == ("['a', 'b']", "['a']")
    assert missing.value.hint == "Read the progress report."
    with pytest.raises(CheckFailed) as not_a_dict:
        expect_keys([("a", 2)], "DIAGNOSIS_9_9", ["a", "b"])
    assert (not_a_dict.value.expected, not_a_dict.value.actual) == ("a dict", "list")
