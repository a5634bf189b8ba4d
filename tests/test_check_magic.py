"""``%check`` in a real IPython shell: grades a cell as last run, as ``nox -s check`` would."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys

import nbformat
import pytest
from IPython.core.interactiveshell import InteractiveShell
from lab00_answers import SOLVED_0_1, WRONG_0_1
from traitlets.config import Config

from streamlab.grading import cell_history, magic, tries
from streamlab.paths import REPO_ROOT

LAB = "00-orientation"


@pytest.fixture
def shell(tmp_path, monkeypatch):
    """An IPython shell working in a copy of lab 00, as JupyterLab starts its kernel."""
    folder = tmp_path / "labs" / LAB
    shutil.copytree(REPO_ROOT / "labs" / LAB, folder)
    monkeypatch.chdir(folder)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.setattr(cell_history, "LAST_RUNS", {})
    monkeypatch.setattr(magic, "LAST_RUNS", cell_history.LAST_RUNS)
    # The learner's record of tries: this test's own, not the checkout's build/.
    monkeypatch.setattr(tries, "RECORD", tmp_path / "first-tries.json")
    config = Config()
    config.HistoryManager.enabled = False  # keep the learner's own IPython history clean
    shell = InteractiveShell.instance(config=config)
    assert shell.run_cell("%load_ext streamlab").success
    return shell


def _cell_id(notebook, exercise: str) -> str:
    content = nbformat.read(notebook, as_version=4)
    return next(c.id for c in content.cells if f"exercise-{exercise}" in c.metadata.get("tags", []))


def _graded_by_the_grader(tmp_path, source: str) -> dict:
    """Exercise 0.1's entry in the grade of ``python -m streamlab.grading`` on a saved copy."""
    labs = tmp_path / "saved"
    shutil.copytree(REPO_ROOT / "labs" / LAB, labs / LAB)
    notebook = labs / LAB / f"{LAB}.ipynb"
    content = nbformat.read(notebook, as_version=4)
    next(c for c in content.cells if "exercise-0.1" in c.metadata.get("tags", [])).source = source
    nbformat.write(content, notebook)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "streamlab.grading",
            "00",
            "--notebooks",
            str(labs),
            "--json",
            str(tmp_path / "saved.json"),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        timeout=120,
    )
    graded = json.loads((tmp_path / "saved.json").read_text())
    return next(e for e in graded["labs"][0]["exercises"] if e["id"] == "0.1")


def test_check_grades_the_cell_as_last_run_before_it_is_saved(shell, tmp_path):
    notebook = tmp_path / "labs" / LAB / f"{LAB}.ipynb"
    saved = notebook.read_bytes()
    cell = _cell_id(notebook, "0.1")

    assert shell.run_cell(WRONG_0_1, cell_id=cell).success
    failed = magic.check("0.1")
    [graded] = failed.exercises
    expected = _graded_by_the_grader(tmp_path, WRONG_0_1)
    assert (graded.status, graded.message) == ("failed", expected["message"])
    assert "pins nothing" in graded.message and graded.actual == "{}"
    assert graded.hint and graded.hint == magic._first_hint(expected)
    assert (graded.expected, graded.actual, graded.diff) == (
        expected["expected"],
        expected["actual"],
        expected["diff"],
    )
    assert "as you last ran it" in graded.version and "not saved yet" in graded.version

    assert shell.run_cell(SOLVED_0_1, cell_id=cell).success
    [graded] = magic.check("0.1").exercises
    assert graded.status == "passed", graded
    assert "not saved yet" in graded.version
    assert notebook.read_bytes() == saved


def test_check_alone_grades_the_lab_of_the_notebook_as_saved(shell, capsys):
    assert shell.run_cell("%check").success
    shown = capsys.readouterr().out
    for exercise in ("0.1", "0.2", "0.3"):
        assert f"Exercise {exercise} is not done yet." in shown
    assert "Exercise 0.3 · Predict the restart after a crash: not started" in shown
    # Not started is not a failed attempt: no hint unasked.
    assert "Hint: " not in shown
    assert "as saved at" in shown and "not saved yet" not in shown


def _failed(**fields) -> magic.Graded:
    """A failed exercise as ``%check`` shows it; ``fields`` replace the defaults."""
    defaults = dict(
        id="0.3",
        title="Summarise",
        status="failed",
        message="Expected '<b>', got 1.",
        hint="Read the `dict`.",
        version="the cell tagged exercise-0.3 as you last ran it at 10:42:13, not saved yet",
    )
    return magic.Graded(**{**defaults, **fields})


def test_the_report_in_html_escapes_the_learners_text():
    report = magic.CheckReport("00", REPO_ROOT / f"{LAB}.ipynb", (_failed(),), seconds=1.0)
    html = report._repr_html_()
    assert "streamlab-check-failed" in html and "Expected &#x27;&lt;b&gt;&#x27;, got 1." in html
    assert "Read the <code>dict</code>." in html
    assert (
        "Graded: the cell tagged exercise-0.3 as you last ran it at 10:42:13, not saved yet."
        in str(report)
    )


def test_the_report_shows_what_the_check_compared_and_its_own_hint():
    graded = _failed(
        message="After 5 s of silence the machine should turn Unhealthy.",
        hint="A timer fires only when no heartbeat came before it.",
        expected="[('m1', 'Unhealthy')]",
        actual="nothing",
    )
    listed = dataclasses.replace(
        graded, diff="ok       ('m1', 'Healthy')\nmissing  ('m1', 'Unhealthy')"
    )
    text = str(magic.CheckReport("04", REPO_ROOT / "x.ipynb", (graded,), 1.0))
    assert "  Expected:\n    [('m1', 'Unhealthy')]\n  Your code:\n    nothing" in text
    assert "Hint: A timer fires only when no heartbeat came before it." in text
    report = magic.CheckReport("04", REPO_ROOT / "x.ipynb", (listed,), 1.0)
    assert "Expected against your code:\n    ok       ('m1', 'Healthy')\n    missing  " in str(
        report
    )
    assert "missing  (&#x27;m1&#x27;, &#x27;Unhealthy&#x27;)" in report._repr_html_()


@pytest.mark.parametrize(
    "line, sentence",
    [
        ("0.9", "lab 00 has no exercise 0.9"),
        ("0.1 2.1", "%check grades one lab at a time"),
    ],
)
def test_a_wrong_argument_is_one_sentence(shell, capsys, line, sentence):
    assert shell.run_cell(f"%check {line}").success
    shown = capsys.readouterr().out
    assert sentence in shown and "Traceback" not in shown


def test_importing_streamlab_stays_cheap_in_a_kernel():
    code = (
        "import sys; from IPython.core.interactiveshell import InteractiveShell; "
        "shell = InteractiveShell.instance(); import streamlab; "
        "print('check' in shell.magics_manager.magics['line'], "
        "'pyspark' in sys.modules, 'nbformat' in sys.modules, 'pytest' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.stdout.split() == ["True", "False", "False", "False"], (
        result.stdout + result.stderr
    )


def test_a_grader_that_never_ends_is_stopped_and_named(monkeypatch):
    monkeypatch.setattr(magic, "GRADER_WITHIN", 0.5)
    stuck = [sys.executable, "-c", "import time; time.sleep(60)"]
    with pytest.raises(magic.CheckError, match="had not finished after .* and was stopped"):
        magic._grade(stuck)
