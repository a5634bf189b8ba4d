"""`nox -s connect_notebooks`: nbval's verdict per notebook over Spark Connect, in one line each."""

from __future__ import annotations

import subprocess
import sys

from streamlab.tooling import connect_notebooks
from streamlab.tooling.connect_notebooks import read_junit


def test_a_notebooks_cells_are_counted_from_pytests_own_report(tmp_path):
    cells = tmp_path / "test_cells.py"
    cells.write_text(
        "import pytest\n"
        "def test_one(): pass\n"
        "def test_two(): assert 1 == 2\n"
        "@pytest.mark.skip\n"
        "def test_three(): pass\n"
    )
    report = tmp_path / "report.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", str(cells), "-q", "-p", "no:cacheprovider",
         f"--junitxml={report}"],
        cwd=tmp_path, capture_output=True, check=False,
    )  # fmt: skip
    run = read_junit("04", report, 12.4)
    assert (run.passed, run.skipped, run.failed) == (1, 1, ["test_two"])
    assert run.line().startswith("lab 04  1 cell(s) differ or fail")
    assert "1 of 2 cells" in run.line() and "12 s: test_two" in run.line()


def test_a_notebook_that_never_ran_is_not_counted_as_passed(tmp_path):
    run = read_junit("07", tmp_path / "missing.xml", 1.0)
    assert run.failed == ["(nbval did not run: see the log)"]


def test_an_unknown_lab_gets_a_sentence_and_no_server(capsys):
    assert connect_notebooks.main(["99"]) == 2
    assert "There is no lab '99'" in capsys.readouterr().err


def test_a_classic_only_cell_is_skipped_over_connect(tmp_path):
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell(
            "raise RuntimeError('needs the JVM')", metadata={"tags": ["classic-only"]}
        ),
    ]
    path = tmp_path / "lab.ipynb"
    nbformat.write(notebook, path)
    report = tmp_path / "report.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", str(path), "-q", "-p", "no:cacheprovider", "--nbval-lax",
         f"--junitxml={report}", "-p", "streamlab.tooling.connect_nbval"],
        cwd=tmp_path, capture_output=True, check=False,
    )  # fmt: skip
    run = read_junit("xx", report, 0)
    assert (run.passed, run.classic_only, run.failed) == (1, 1, [])
