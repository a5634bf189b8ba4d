"""Hints: tiers that teach without the solution's code, shown one at a time, on the site."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import markdown
import nbformat
import pytest

from streamlab.course import registry
from streamlab.course.notebooks import exercise_id, solution_regions
from streamlab.paths import REPO_ROOT
from streamlab.tooling import hint_leaks, hints, mkdocs_hooks

# Exercise 2.1's hint as it stood when it carried the answer.
TELLING_HINT = (
    'heartbeats.groupBy(F.window("event_time", size), "machine_name").agg('
    'F.count("*").alias("heartbeats")), then select window.start as window_start '
    "and window.end as window_end."
)


def _solution(exercise: str) -> str:
    lab, _ = hints.find_exercise(exercise)
    notebook = nbformat.read(lab.notebook(REPO_ROOT / "solutions"), as_version=4)
    return "\n".join(
        region
        for cell in notebook.cells
        if exercise_id(cell) == exercise
        for region in solution_regions(cell.source)
    )


# --- the standard: a hint never repeats the solution's code --------------------------------


def test_every_hint_of_the_course_keeps_the_solution_to_itself():
    found = {
        key: leaked for lab in registry.labs() for key, leaked in hint_leaks.lab_leaks(lab).items()
    }
    assert not found, "hints that repeat their solution: " + "; ".join(
        f"{key}: {', '.join(leaked)}" for key, leaked in found.items()
    )


def test_a_hint_that_repeats_the_call_chain_is_caught():
    assert 'F.window("event_time",size),"machine_name").agg(' in "".join(
        hint_leaks.leaks(TELLING_HINT, _solution("2.1"))
    )


def test_whitespace_and_quotes_do_not_hide_a_call_chain():
    solution = "return (\n    events\n    .groupBy('partitionKey')\n    .agg(F.max('x'))\n)"
    assert hint_leaks.leaks('`events.groupBy("partitionKey").agg(...)`', solution)


@pytest.mark.parametrize(
    "hint, leaked",
    [
        ('Use the output mode `"complete"`.', '"complete"'),
        (
            "Set the option `spark.sql.streaming.noDataMicroBatches.enabled`.",
            '"spark.sql.streaming.noDataMicroBatches.enabled"',
        ),
        ("Keep the stored pair in `saved` first.", "saved"),
        ("Compare with last_seen_ms plus the delay.", "last_seen_ms"),
    ],
)
def test_a_literal_or_a_helper_name_of_the_solution_is_caught(hint, leaked):
    solution = (
        "saved = self.machine.get()\nlast_seen_ms = saved[1]\n"
        'spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")\n'
        'mode = "complete"'
    )
    assert leaked in hint_leaks.leaks(hint, solution)


@pytest.mark.parametrize(
    "hint",
    [
        "Group by the window and the machine name, then count the rows of each group.",
        "`transformWithState` is called on a grouped DataFrame, with keyword arguments.",
        "`F.window` gives each row its window; `spark.readStream` starts the reader.",
        "The memory sink adds every row; the complete mode rewrites the whole result (saved here).",
    ],
)
def test_plain_english_and_a_public_api_name_pass(hint):
    solution = _solution("2.1") + "\n" + _solution("4.4") + "\nsaved = 1\nmode = 'complete'"
    assert hint_leaks.leaks(hint, solution) == []


def test_what_the_notebook_already_shows_is_not_a_leak():
    solution = "rows = fleet_size * heartbeats_per_second * t / 1000"
    hint = "`rows = fleet_size * heartbeats_per_second * t / 1000` for each pair."
    assert hint_leaks.leaks(hint, solution)
    assert (
        hint_leaks.leaks(
            hint,
            solution,
            visible="- `rows = fleet_size × x`\n"
            "- rows = fleet_size * heartbeats_per_second * t / 1000",
        )
        == []
    )


def test_the_late_row_hint_names_the_watermark_of_the_batch_before():
    # Spark filters a windowed count's late rows with the previous batch's watermark; a hint
    # that names the batch's own gives right answers from a wrong rule.
    late = registry.lab("02").exercise("2.4").hints[-1]
    assert "the watermark of the batch before its own" in late
    assert "eventTimeWatermarkForLateEvents" in late


def test_tiers_differ_and_grow():
    for lab in registry.labs():
        for exercise in lab.exercises:
            first, *rest = exercise.hints
            assert all(tier not in first and first not in tier for tier in rest), exercise.id


# --- nox -s hint ---------------------------------------------------------------------------


@pytest.fixture
def course(tmp_path):
    """A checkout whose build/ is empty: the course's registry and notebooks, linked."""
    for name in ("course.toml", "solutions"):
        (tmp_path / name).symlink_to(REPO_ROOT / name)
    return tmp_path


def _hint(course, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "streamlab.tooling.hints", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "STREAMLAB_ROOT": str(course)},
    )


def test_each_call_shows_the_next_tier_then_points_to_the_solution(course):
    exercise = registry.lab("02").exercise("2.1")
    shown = [_hint(course, "2.1") for _ in exercise.hints]
    assert all(out.returncode == 0 for out in shown)
    total = len(exercise.hints)
    for tier, (out, hint) in enumerate(zip(shown, exercise.hints), 1):
        assert f"hint {tier} of {total}" in out.stdout
        assert " ".join(out.stdout.split()).find(hint) > 0, (tier, out.stdout)
    assert json.loads((course / "build" / "hints.json").read_text()) == {"2.1": total}

    last = _hint(course, "2.1")
    assert last.returncode == 0
    assert "No more hints for exercise 2.1" in last.stdout
    # A learner stuck after the last tier can ask for the answer, and the grade says so.
    said = " ".join(last.stdout.split())
    assert "`nox -s reveal -- 2.1` shows its answer" in said
    assert "records 2.1 as revealed, not passed" in said
    assert (
        "http://127.0.0.1:8000/labs/02-event-time/#exercise-21-count-heartbeats-in-tumbling-windows"
    ) in last.stdout
    assert "build/site/labs/02-event-time/index.html#exercise-21" in last.stdout
    assert not any(hint in last.stdout for hint in exercise.hints)

    assert _hint(course, "--reset", "2.1").returncode == 0
    assert "hint 1 of" in _hint(course, "2.1").stdout


def test_exercises_keep_their_own_count_and_reset_clears_all(course):
    _hint(course, "2.1")
    _hint(course, "2.1")
    assert "hint 1 of" in _hint(course, "0.1").stdout
    _hint(course, "--reset")
    assert "hint 1 of" in _hint(course, "2.1").stdout


@pytest.mark.parametrize(
    "argument, sentence",
    [
        ("2.9", "Lab 02 has no exercise 2.9 (it has 2.1, 2.2, 2.3, 2.4, 2.5, 2.6, 2.7, 2.8)."),
        ("04", "04 is a lab; name one of its exercises: 4.1, 4.2, 4.3, 4.4, 4.5, 4.6."),
        ("12.1", "There is no lab '12'; the labs are 00"),
    ],
)
def test_an_unknown_exercise_gets_one_sentence(tmp_path, capsys, argument, sentence):
    assert hints.main([argument]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(sentence) and err.count("\n") == 0
    assert not (tmp_path / "hints.json").exists()


def test_an_unknown_exercise_is_one_sentence_on_stderr(course):
    out = _hint(course, "2.9")
    assert out.returncode == 2 and out.stdout == ""
    assert (
        out.stderr.strip()
        == "Lab 02 has no exercise 2.9 (it has 2.1, 2.2, 2.3, 2.4, 2.5, 2.6, 2.7, 2.8)."
    )


def test_a_corrupt_state_file_starts_over(tmp_path):
    state = tmp_path / "hints.json"
    state.write_text("{not json")
    assert "hint 1 of" in hints.next_hint("0.1", state_file=state)


# --- the site ------------------------------------------------------------------------------


def test_the_lab_page_shows_every_tier_collapsed_in_order_with_code():
    lab = registry.lab("02")
    page = markdown.markdown(
        mkdocs_hooks.exercise_sections(lab),
        extensions=["admonition", "pymdownx.details", "pymdownx.superfences"],
    )
    first = lab.exercises[0]
    titles = [f"<summary>Hint {tier}</summary>" for tier in range(1, len(first.hints) + 1)]
    positions = [page.find(title) for title in titles]
    assert all(p >= 0 for p in positions) and positions == sorted(positions)
    assert page.find(titles[-1]) < page.find("<summary>Solution</summary>")
    assert page.count('<details class="tip">') == sum(len(e.hints) for e in lab.exercises)
    assert "<code>F.window</code>" in page and "`" not in page.split("<pre")[0]


def test_the_learners_hint_command_imports_neither_markdown_nor_the_leak_check(course):
    code = (
        "import sys; from streamlab.tooling import hints; hints.next_hint('0.1'); "
        "print(sorted(m for m in ('markdown', 'nbformat', 'streamlab.tooling.hint_leaks') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "STREAMLAB_ROOT": str(course)},
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_the_solution_anchor_is_the_one_markdown_gives_the_heading():
    from markdown.extensions.toc import slugify

    for lab in registry.labs():
        for exercise in lab.exercises:
            heading = hints._heading(lab, exercise)
            assert hints.slugify(heading) == slugify(heading, "-"), heading
