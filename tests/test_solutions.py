"""A lab's code for the labs after it: the course's solution, or the learner's own when it passes."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest

from streamlab import solutions
from streamlab.course import registry
from streamlab.kit import heartbeat as heartbeat_checks
from streamlab.paths import REPO_ROOT

LAB04 = registry.lab("04")


def test_the_reference_processor_is_lab_04s_solution_loaded_once():
    module = solutions.load_solution("04")
    assert solutions.load_solution("4") is module
    assert heartbeat_checks.ReferenceHeartbeatProcessor is module.LeanHeartbeatProcessor
    assert module.__name__ == "streamlab_solution_lab04"


def test_a_solution_that_does_not_run_is_one_sentence(tmp_path, monkeypatch):
    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("import no_such_module_here")
    cell.metadata["tags"] = ["graded-setup"]
    notebook.cells = [cell]
    path = LAB04.notebook(tmp_path)
    path.parent.mkdir(parents=True)
    nbformat.write(notebook, path)
    monkeypatch.setattr(solutions, "SOLUTIONS_DIR", tmp_path)
    solutions._load_solution.cache_clear()
    try:
        with pytest.raises(
            solutions.SolutionBroken, match="Lab 04's solution notebook does not load"
        ):
            solutions.load_solution("04")
    finally:
        solutions._load_solution.cache_clear()


@pytest.fixture
def learner(tmp_path, monkeypatch):
    """A learner's course folder with lab 04 solved; grades land in tmp_path."""
    monkeypatch.setattr(solutions, "GRADE_FILE", tmp_path / "build" / "grade.json")
    monkeypatch.setattr(solutions, "DOWNSTREAM_DIR", tmp_path / "build" / "downstream")
    mine = tmp_path / "mine"
    for lab_id in ("04", "05"):
        lab = registry.lab(lab_id)
        target = lab.notebook(mine)
        target.parent.mkdir(parents=True)
        shutil.copy(lab.notebook(REPO_ROOT / "solutions"), target)
    monkeypatch.chdir(registry.lab("05").notebook(mine).parent)
    return mine


def _replace(notebook_path: Path, exercise: str, old: str, new: str) -> None:
    notebook = nbformat.read(notebook_path, as_version=4)
    for cell in notebook.cells:
        if f"exercise-{exercise}" in cell.metadata.get("tags", []):
            assert old in cell.source
            cell.source = cell.source.replace(old, new)
    nbformat.write(notebook, notebook_path)


def test_a_passing_lab_04_is_used_and_its_grade_is_reused_until_a_cell_changes(
    learner, monkeypatch
):
    module, sentence = solutions.learner_or_reference("04", "4.3", uses="LeanHeartbeatProcessor")
    assert module.__name__ == "streamlab_learner_lab04"
    assert sentence == (
        "Lab 05 runs your LeanHeartbeatProcessor from lab 04 (exercise 4.3 passes its checks)."
    )
    # Graded once: the grade holds for exactly these cells, so no second grading.
    graded = solutions._grade_now
    monkeypatch.setattr(solutions, "_grade_now", lambda *a: pytest.fail("graded again"))
    assert solutions.learner_or_reference("04", "4.3")[0].__name__ == "streamlab_learner_lab04"

    # A change after the pass: the old grade does not count, and the new code fails.
    _replace(LAB04.notebook(learner), "4.3", "self.machine.clear()", "pass")
    monkeypatch.setattr(solutions, "_grade_now", graded)
    module, sentence = solutions.learner_or_reference("04", "4.3", uses="LeanHeartbeatProcessor")
    assert module is solutions.load_solution("04")
    assert sentence.startswith(
        "Lab 05 runs the course's reference LeanHeartbeatProcessor from lab 04, because "
        "exercise 4.3 failed: "
    )
    assert "\n" not in sentence and sentence.endswith(".")
    assert "cell tagged" not in sentence  # the exercise is named already


def test_a_stub_is_not_done_and_needs_no_grading(learner, monkeypatch):
    shutil.copy(LAB04.notebook(REPO_ROOT / "labs"), LAB04.notebook(learner))
    monkeypatch.setattr(solutions, "_grade_now", lambda *a: pytest.fail("graded a stub"))
    module, sentence = solutions.learner_or_reference("04", "4.3", uses="LeanHeartbeatProcessor")
    assert module is solutions.load_solution("04")
    assert sentence == (
        "Lab 05 runs the course's reference LeanHeartbeatProcessor from lab 04, because "
        "exercise 4.3 is not done yet."
    )


def test_the_solution_notebooks_run_the_courses_code_without_grading(monkeypatch):
    monkeypatch.chdir(registry.lab("05").notebook(REPO_ROOT / "solutions").parent)
    monkeypatch.setattr(solutions, "_grade_now", lambda *a: pytest.fail("graded the solutions"))
    module, sentence = solutions.learner_or_reference("04", "4.3", uses="LeanHeartbeatProcessor")
    assert module is solutions.load_solution("04")
    assert sentence == (
        "Lab 05 runs the course's LeanHeartbeatProcessor from lab 04 "
        "(these are the solution notebooks)."
    )
