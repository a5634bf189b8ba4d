"""Answer cells: what explains an exercise's answer opens in labs/ only once it is graded.

A solution notebook tags the cells after an exercise's ``%check`` that explain or show its
answer ``answer-N.M``. In ``labs/`` a markdown one is a one-line placeholder that says where
the text opens, and a code one holds only a call that stops it, with one sentence, until N.M
has been graded once, then shows and runs the solved cell's code.
"""

from __future__ import annotations

import json

import nbformat
import pytest
from IPython.core.interactiveshell import InteractiveShell
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from streamlab.course import registry
from streamlab.course.notebooks import answer_id, read_cells, source
from streamlab.grading import tries
from streamlab.paths import REPO_ROOT
from streamlab.tooling.authoring import AuthoringError, make_lab_notebook

LAB = registry.lab("02")
PREDICT = next(e.id for e in LAB.exercises if e.kind == "predict")

TOLD = "5 + 10 + 7 + 2 = 24: the window counts every row that arrived before it closed."
MEASURED = "rows = spark.table('counts').collect()\nprint(rows)"


def _tagged(cell, *tags):
    cell.metadata["tags"] = list(tags)
    return cell


def _exercises():
    return [
        _tagged(
            new_code_cell(f"def f{i}():\n    # BEGIN SOLUTION\n    return {i}\n    # END SOLUTION"),
            f"exercise-{e.id}",
        )
        for i, e in enumerate(LAB.exercises)
    ]


def _generated(*answer_cells):
    notebook = new_notebook()
    notebook.cells = [*_exercises(), new_code_cell(f"%check {PREDICT}"), *answer_cells]
    notebook.cells.append(new_markdown_cell("## What comes next"))
    return make_lab_notebook(notebook, LAB).cells[len(LAB.exercises) + 1 :]


def test_a_markdown_answer_cell_becomes_a_one_line_placeholder_that_keeps_its_tag():
    cells = _generated(_tagged(new_markdown_cell(TOLD), f"answer-{PREDICT}"))
    placeholder = cells[0]
    assert placeholder.cell_type == "markdown"
    assert answer_id(placeholder) == PREDICT
    assert "\n" not in placeholder.source.strip()
    assert "24" not in placeholder.source and "counts every row" not in placeholder.source
    assert f"`%check {PREDICT}`" in placeholder.source
    assert f"`nox -s reveal -- {PREDICT}`" in placeholder.source
    assert f"opens when {PREDICT} passes" in placeholder.source
    assert cells[1].source == "## What comes next"


def test_consecutive_answer_cells_of_one_exercise_share_one_placeholder():
    cells = _generated(
        _tagged(new_markdown_cell(TOLD), f"answer-{PREDICT}"),
        _tagged(new_markdown_cell("Batch 3 closed the window."), f"answer-{PREDICT}"),
    )
    assert [c.source for c in cells[1:]] == ["## What comes next"]
    assert "Batch 3" not in cells[0].source


def test_an_answer_code_cell_holds_only_the_call_that_runs_it_once_graded():
    code = _tagged(new_code_cell(MEASURED), f"answer-{PREDICT}")
    cells = _generated(
        _tagged(new_markdown_cell(TOLD), f"answer-{PREDICT}"),
        code,
        _tagged(new_markdown_cell("Batch 3 closed the window."), f"answer-{PREDICT}"),
    )
    assert [c.cell_type for c in cells] == ["markdown", "code", "markdown"]
    assert cells[1].source == (
        f'from streamlab.grading import answer_cell; answer_cell("{PREDICT}", "{code.id}")'
    )
    assert answer_id(cells[1]) == PREDICT
    # The text after the code is the same run of answer cells: its placeholder said it all.
    assert cells[2].source == "## What comes next"


def test_no_line_of_an_answer_code_cell_is_in_the_learners_notebook():
    calls = 0
    for lab in registry.labs():
        solved = {c.get("id"): c for c in read_cells(lab.notebook(REPO_ROOT / "solutions"))}
        for cell in read_cells(lab.notebook(REPO_ROOT / "labs")):
            exercise = answer_id(cell)
            if exercise is None or cell["cell_type"] != "code":
                continue
            calls += 1
            assert source(cell) == (
                f'from streamlab.grading import answer_cell; answer_cell("{exercise}", "{cell["id"]}")'
            ), f"{lab.name}: {source(cell)[:200]}"
            assert answer_id(solved[cell["id"]]) == exercise
    assert calls > 40


def test_an_answer_tag_for_an_exercise_the_lab_does_not_have_is_refused():
    with pytest.raises(AuthoringError, match=r"answer-9\.9.*lab 02 has no exercise 9\.9"):
        _generated(_tagged(new_markdown_cell(TOLD), "answer-9.9"))


@pytest.mark.parametrize("other", ["exercise", "graded-setup"])
def test_a_graded_cell_cannot_be_an_answer_cell(other):
    solved = "# BEGIN SOLUTION\nx = 1\n# END SOLUTION"
    tag = f"exercise-{PREDICT}" if other == "exercise" else other
    notebook = new_notebook()
    notebook.cells = [*_exercises(), _tagged(new_code_cell(solved), tag, f"answer-{PREDICT}")]
    with pytest.raises(AuthoringError, match="graded"):
        make_lab_notebook(notebook, LAB)


@pytest.fixture
def record(tmp_path, monkeypatch):
    path = tmp_path / "first-tries.json"
    monkeypatch.setattr(tries, "RECORD", path)
    return path


def _run_in_a_shell(source: str, capsys):
    shell = InteractiveShell.instance()
    try:
        shell.run_line_magic("load_ext", "streamlab")
        result = shell.run_cell(source)
        return result, capsys.readouterr()
    finally:
        InteractiveShell.clear_instance()


@pytest.fixture
def solved(tmp_path):
    """A solutions folder whose lab 02 notebook has one answer code cell of PREDICT."""
    notebook = new_notebook()
    cell = _tagged(
        new_code_cell("shown = 6 * 7\nprint('the answer ran')\nshown"), f"answer-{PREDICT}"
    )
    notebook.cells = [cell]
    path = LAB.notebook(tmp_path / "solutions")
    path.parent.mkdir(parents=True)
    nbformat.write(notebook, path)
    return tmp_path / "solutions", cell.id


def test_an_answer_cell_stops_with_one_sentence_until_graded_then_shows_and_runs_its_code(
    record, solved, capsys
):
    folder, cell_id = solved
    call = f'from streamlab.grading import answer_cell; answer_cell("{PREDICT}", "{cell_id}", {str(folder)!r})\n'
    result, shown = _run_in_a_shell(call, capsys)
    assert result.error_in_exec is not None  # Run All stops here
    text = (shown.out + shown.err).strip()
    assert "Traceback" not in text and "the answer ran" not in text
    assert len(text.splitlines()) == 1, text
    assert f"`%check {PREDICT}`" in text and PREDICT in text

    record.write_text(json.dumps({"exercises": {PREDICT: {"graded": True}}}))
    shell = InteractiveShell.instance()
    try:
        shell.run_line_magic("load_ext", "streamlab")
        result = shell.run_cell(call + "twice = shown * 2")
        out = capsys.readouterr().out
        assert result.success, out
        # It showed its code, ran it (its last expression displayed) in the notebook's names.
        assert "shown = 6 * 7" in out and "the answer ran" in out and "42" in out
        assert shell.user_ns["twice"] == 84
    finally:
        InteractiveShell.clear_instance()


def test_a_revealed_exercise_opens_its_answer_cells(record):
    from streamlab.grading import require_graded

    with pytest.raises(tries.NotGradedYet):
        require_graded(PREDICT)
    record.write_text(json.dumps({"exercises": {PREDICT: {"revealed": True}}}))
    require_graded(PREDICT)


def test_an_answer_cell_missing_from_the_solutions_says_how_to_restore_it(record, solved):
    folder, _ = solved
    record.write_text(json.dumps({"exercises": {PREDICT: {"graded": True}}}))
    with pytest.raises(tries.AnswerCellFailed, match="git checkout --"):
        tries.answer_cell(PREDICT, "no-such-cell", folder)
