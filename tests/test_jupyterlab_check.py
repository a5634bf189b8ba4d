"""``%check`` end to end in a real JupyterLab and Chromium, without saving the notebook.

The learner's way: open lab 00, type a wrong answer into exercise 0.1, run it, run
``%check 0.1`` below and see *failed* with the grader's sentence; fix the cell, run it and
the check again and see *passed*. Autosave is off and nothing is saved: the check grades the
cells as last run in the kernel.
"""

from __future__ import annotations

import re
import shutil

import nbformat
import pytest
from jupyter_support import TOKEN, lab_settings, running_jupyterlab
from lab00_answers import SOLVED_0_1, WRONG_0_1

from streamlab.paths import BUILD_DIR, REPO_ROOT

ARTIFACTS = BUILD_DIR / "artifacts"
LAB = "00-orientation"
WRONG, FIXED = WRONG_0_1.rstrip(), SOLVED_0_1.rstrip()


def _settings(tmp_path) -> None:
    """No autosave (the test shows that nothing needs saving) and every cell in the page."""
    lab_settings(
        tmp_path,
        {
            "docmanager-extension/plugin": {"autosave": False},
            "notebook-extension/tracker": {"windowingMode": "none"},
        },
    )


@pytest.fixture
def jupyter(tmp_path):
    """JupyterLab alone (no hub: nothing here uses it) on a copy of lab 00 that loads ``%check``."""
    labs = tmp_path / "labs"
    shutil.copytree(REPO_ROOT / "labs" / LAB, labs / LAB)
    notebook = labs / LAB / f"{LAB}.ipynb"
    content = nbformat.read(notebook, as_version=4)
    loader = nbformat.v4.new_code_cell("%load_ext streamlab")
    loader.id = "load-check"
    content.cells.insert(1, loader)
    nbformat.write(content, notebook)
    _settings(tmp_path)
    # %check keeps the learner's tries in build/: this test's own, not the checkout's.
    env = {"STREAMLAB_SPARK_MASTER": "local[2]", "STREAMLAB_BUILD_DIR": str(tmp_path / "build")}
    with running_jupyterlab(tmp_path, f"--notebook-dir={labs}", hub=False, env=env) as lab:
        yield lab.base, notebook


@pytest.fixture
def page(browser):
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    yield page
    if not page.is_closed():  # the test stopped early: keep what the browser showed
        _shot(page, "failure")
        page.close()


def _shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"jupyterlab-check-{name}.png"))


def _cell(page, text: str):
    return page.locator(".jp-CodeCell", has_text=text).first


def _type_into(page, cell, source: str) -> None:
    """Replace a cell's source as a learner would (inserted, so no auto-indent or brackets)."""
    cell.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(source)


def _run(page, cell) -> None:
    cell.locator(".cm-content").click()
    page.keyboard.press("Shift+Enter")


def test_check_in_the_notebook_grades_the_cell_as_last_run(page, jupyter):
    from playwright.sync_api import expect

    base, notebook = jupyter
    saved = notebook.read_bytes()
    page.goto(f"{base}/lab/tree/{LAB}/{LAB}.ipynb?token={TOKEN}")
    page.get_by_text("| Idle").wait_for(timeout=60_000)
    loader = _cell(page, "%load_ext streamlab")
    # The page may show an idle kernel before its connection is up: run until it ran.
    for _ in range(10):
        _run(page, loader)
        try:
            expect(loader.locator(".jp-InputPrompt")).to_have_text(
                re.compile(r"\[\d+\]"), timeout=6_000
            )
            break
        except AssertionError:
            continue

    exercise = _cell(page, "def effective_settings")
    _type_into(page, exercise, WRONG)
    _run(page, exercise)
    # The cell right under the exercise is its check.
    check = _cell(page, "%check 0.1")
    _run(page, check)
    verdict = check.locator(".streamlab-check")
    expect(verdict).to_contain_text("failed", timeout=60_000)
    expect(verdict).to_contain_text("A checkpoint folder that does not exist pins nothing")
    expect(verdict).to_contain_text("Your code")
    expect(verdict).to_contain_text("Hint:")
    expect(verdict).to_contain_text("as you last ran it")
    expect(verdict).to_contain_text("not saved yet")
    verdict.scroll_into_view_if_needed()
    _shot(page, "failed")

    _type_into(page, exercise, FIXED)
    _run(page, exercise)
    _run(page, check)
    expect(check.locator(".streamlab-check-passed")).to_contain_text("passed", timeout=60_000)
    expect(check.locator(".streamlab-check")).to_contain_text("not saved yet")
    check.scroll_into_view_if_needed()
    _shot(page, "passed")
    page.close()
    assert notebook.read_bytes() == saved, "the notebook was saved during the test"
