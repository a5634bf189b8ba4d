"""nox -s reset: an exercise's stub (or a lab) back, the learner's version kept beside it."""

from __future__ import annotations

import shutil

import nbformat
import pytest

from streamlab.course import registry
from streamlab.grading import unsaved
from streamlab.paths import REPO_ROOT
from streamlab.tooling import reset

LAB = registry.lab("04")


@pytest.fixture
def mine(tmp_path):
    """A learner's labs folder with exercises 4.1 and 4.2 solved."""
    path = LAB.notebook(tmp_path)
    path.parent.mkdir(parents=True)
    shutil.copy(LAB.notebook(REPO_ROOT / "labs"), path)
    solved = nbformat.read(LAB.notebook(REPO_ROOT / "solutions"), as_version=4)
    notebook = nbformat.read(path, as_version=4)
    for cell, answer in zip(notebook.cells, solved.cells):
        if {"exercise-4.1", "exercise-4.2"} & set(cell.metadata.get("tags", [])):
            cell.source = answer.source
    nbformat.write(notebook, path)
    return tmp_path


def _source(path, exercise: str) -> str:
    notebook = nbformat.read(path, as_version=4)
    return next(
        c.source for c in notebook.cells if f"exercise-{exercise}" in c.metadata.get("tags", [])
    )


def test_an_exercise_gets_its_stub_back_and_the_learners_notebook_is_kept(mine, capsys):
    path = LAB.notebook(mine)
    before = path.read_bytes()
    assert reset.main(["4.2", "--notebooks", str(mine)]) == 0
    said = capsys.readouterr().out
    [kept] = path.parent.glob("*.before-reset-4.2-*.ipynb")
    assert kept.read_bytes() == before and kept.name in said
    assert "is the stub again" in said
    assert 'raise NotImplementedError("exercise 4.2 is not done yet")' in _source(path, "4.2")
    assert "BEGIN SOLUTION" not in _source(path, "4.2")
    assert _source(path, "4.1") == _source(kept, "4.1")  # the other exercises untouched

    # Again: nothing to do, and no second copy.
    assert reset.main(["4.2", "--notebooks", str(mine)]) == 0
    assert "already the stub" in capsys.readouterr().out
    assert len(list(path.parent.glob("*.before-reset-*"))) == 1


def test_a_lab_goes_back_as_shipped(mine, capsys):
    path = LAB.notebook(mine)
    assert reset.main(["04", "--notebooks", str(mine)]) == 0
    assert path.read_bytes() == LAB.notebook(REPO_ROOT / "labs").read_bytes()
    [kept] = path.parent.glob("*.before-reset-04-*.ipynb")
    assert "def next_status" in _source(kept, "4.1") and kept.name in capsys.readouterr().out


def test_a_notebook_open_in_jupyterlab_is_refused_and_left_alone(mine, monkeypatch, capsys):
    path = LAB.notebook(mine)
    before = path.read_bytes()
    monkeypatch.setattr(unsaved, "open_notebooks", lambda: {path.resolve()})
    assert reset.main(["4.2", "--notebooks", str(mine)]) == 1
    assert "is open in JupyterLab" in capsys.readouterr().err
    assert path.read_bytes() == before and not list(path.parent.glob("*.before-reset-*"))


def test_an_unknown_exercise_is_one_sentence(mine, capsys):
    assert reset.main(["4.9", "--notebooks", str(mine)]) == 2
    assert capsys.readouterr().err.startswith("Lab 04 has no exercise 4.9")
