"""A newcomer's first hour in JupyterLab and Chromium, step by step, every step photographed.

What ``nox -s lab`` starts (the launcher: the hub and JupyterLab) and the line it prints;
lab 00's Run All, which stops under exercise 0.1's own cell in one sentence; 0.1 to 0.3
written in the editor and checked with ``%check``, the grader's progress on screen while it
works; lab 01's producer panel with a producer added and one paused, and the cell after it,
which waits for exactly the producers running; a time view with every window's label inside
its box and round times on its axis; ``nox -s check -- 00`` in JupyterLab's terminal. The
screenshots are kept under ``build/artifacts/newcomer/``.
"""

from __future__ import annotations

import json
import re
import shutil
import time
import urllib.request

import nbformat
import pytest
from jupyter_support import TOKEN, lab_settings, run_all_cells, running_jupyterlab
from lab00_answers import solved
from offline_browser import offline_context
from test_time_view import LABELS_OUTSIDE

from streamlab.course.notebooks import exercise_id
from streamlab.paths import BUILD_DIR, REPO_ROOT

ARTIFACTS = BUILD_DIR / "artifacts" / "newcomer"
LAB00, LAB01 = "00-orientation", "01-ingestion"
LIVE = "01-live.ipynb"
#: The grader's progress while ``%check`` waits: "check 2 of 5" and the seconds elapsed.
PROGRESS = re.compile(r"check \d+ of \d+")


TIME_VIEW_CELL = """from streamlab.deliveries import read_deliveries, write_deliveries
from streamlab.widgets import TimeView


def beat(machine: str, second: int) -> dict:
    return {"machine_name": machine, "event_time": f"2026-11-22T10:00:{second:02d}Z"}


timed = work / f"time-view-{time.time_ns()}"
write_deliveries(timed / "in", [[beat("Producer 1", 1), beat("Producer 1", 2)],
                                [beat("Producer 1", 12), beat("Producer 2", 31)],
                                [beat("Producer 1", 45)], [beat("Producer 1", 3)]])
counted = (read_deliveries(spark, timed / "in", "machine_name STRING, event_time TIMESTAMP")
           .withWatermark("event_time", "5 seconds")
           .groupBy(F.window("event_time", "10 seconds"), "machine_name").count()
           .writeStream.format("memory").queryName("time_view_counts").outputMode("append")
           .option("checkpointLocation", str(timed / "checkpoint"))
           .trigger(availableNow=True).start())
finish(counted, within=300, what="the windowed count to read every delivery")
TimeView.of(counted, spark=spark, checkpoint=str(timed / "checkpoint"))"""

STOP_CELL = """for query in spark.streams.active:
    query.stop()
fleet.stop()
print("stopped")"""


def _live_notebook(folder) -> None:
    """Lab 01 solved, cut to what section 8 needs (its setup, the exercises it uses, the
    panel and the live cell), then a time view and a cell that stops everything."""
    source = nbformat.read(REPO_ROOT / "solutions" / LAB01 / f"{LAB01}.ipynb", as_version=4)
    keep = {"c02", "c05", "96d6e0f6", "c26", "c27", "c28"}
    cells = [
        c
        for c in source.cells
        if c.get("id") in keep or "graded-setup" in c.metadata.get("tags", []) or exercise_id(c)
    ]
    for cell in cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    extra = [nbformat.v4.new_code_cell(TIME_VIEW_CELL), nbformat.v4.new_code_cell(STOP_CELL)]
    extra[0].id, extra[1].id = "time-view", "stop-all"
    source.cells = cells + extra
    nbformat.write(source, folder / LIVE)


def _settings(tmp_path) -> None:
    """Every cell in the page (no windowing), and the terminal's text also in its screen
    reader's tree, which the test reads (xterm draws on a canvas)."""
    lab_settings(
        tmp_path,
        {
            "notebook-extension/tracker": {"windowingMode": "none"},
            "terminal-extension/plugin": {"screenReaderMode": True},
            "docmanager-extension/plugin": {"autosave": False},
        },
    )


@pytest.fixture
def labs(tmp_path):
    folder = tmp_path / "labs"
    shutil.copytree(REPO_ROOT / "labs" / LAB00, folder / LAB00)
    (folder / LAB01).mkdir()
    _live_notebook(folder / LAB01)
    return folder


def _shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def _notebook(name: str) -> str:
    """The notebook shown (each step opens its notebook by its address, ``name``)."""
    return ".jp-NotebookPanel:not(.lm-mod-hidden)"


def _cell(page, scope: str, text: str):
    """The first code cell whose source (not its output) holds ``text``."""
    source = page.locator(".jp-InputArea-editor", has_text=text)
    return page.locator(f"{scope} .jp-CodeCell").filter(has=source).first


def _type_into(page, cell, source: str) -> None:
    cell.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(source)


def _run(page, cell) -> None:
    cell.locator(".cm-content").click()
    page.keyboard.press("Shift+Enter")


def _outputs_text(page, scope: str) -> str:
    return "\n".join(page.locator(f"{scope} .jp-OutputArea-output").all_inner_texts())


def _check(page, scope: str, exercise: str) -> bool:
    """Run ``%check N.M`` under the exercise; wait for *passed*; whether progress showed."""
    from playwright.sync_api import expect

    cell = _cell(page, scope, f"%check {exercise}")
    _run(page, cell)
    verdict = cell.locator(".streamlab-check-passed")
    progressed = False
    deadline = time.monotonic() + 240
    while verdict.count() == 0 and time.monotonic() < deadline:
        text = " ".join(cell.locator(".jp-OutputArea-output").all_inner_texts())
        if not progressed and PROGRESS.search(text):
            progressed = True
            cell.scroll_into_view_if_needed()
            _shot(page, f"03-check-{exercise}-waiting")
        page.wait_for_timeout(200)
    expect(verdict).to_contain_text("passed", timeout=5_000)
    cell.scroll_into_view_if_needed()
    _shot(page, f"03-check-{exercise}-passed")
    return progressed


def _shut_down_kernels(base: str) -> None:
    """As the lab's closing cell says: shut the kernel down before the next lab."""
    headers = {"Authorization": f"token {TOKEN}"}
    listing = urllib.request.Request(f"{base}/api/kernels", headers=headers)
    for kernel in json.loads(urllib.request.urlopen(listing, timeout=10).read()):
        request = urllib.request.Request(
            f"{base}/api/kernels/{kernel['id']}", method="DELETE", headers=headers
        )
        urllib.request.urlopen(request, timeout=60).read()


def test_a_newcomers_first_hour(browser, labs, tmp_path):
    from playwright.sync_api import expect

    _settings(tmp_path)
    blocked: list[str] = []
    env = {"STREAMLAB_SPARK_MASTER": "local[2]"}
    with running_jupyterlab(tmp_path, f"--notebook-dir={labs}", env=env) as lab:
        context = offline_context(browser, blocked, viewport={"width": 1280, "height": 1000})
        page = context.new_page()
        try:
            # 1. What `nox -s lab` starts says which address to open, after the emulator's line.
            opened = lab.line_starting("Open ")
            url = re.search(r"http://\S+", opened).group(0)
            assert url == f"{lab.base}/lab?token={TOKEN}", opened
            page.goto(url)
            page.locator(".jp-DirListing-item", has_text=LAB00).wait_for(timeout=60_000)
            _shot(page, "01-start")

            # 2. Run All on the untouched lab: Spark starts, the run stops under exercise 0.1.
            lab00 = _notebook(f"{LAB00}.ipynb")
            page.goto(f"{lab.base}/lab/tree/{LAB00}/{LAB00}.ipynb?token={TOKEN}")
            run_all_cells(page, lab00)
            exercise = _cell(page, lab00, "def effective_settings")
            stop = exercise.locator(".jp-OutputArea-output", has_text="is not done yet")
            stop.wait_for(timeout=240_000)
            said = stop.inner_text().strip()
            assert said.startswith("Exercise 0.1 is not done yet") and "\n" not in said, said
            assert "Spark started in" in _outputs_text(page, lab00)
            everything = _outputs_text(page, lab00)
            assert "Traceback" not in everything and "----------" not in everything, everything
            assert everything.count("is not done yet") == 1, everything
            exercise.scroll_into_view_if_needed()
            _shot(page, "02-run-all-stops-at-0.1")

            # 3. 0.1 to 0.3 written in the editor, each checked under its cell.
            progress_seen = {}
            for number in ("0.1", "0.2", "0.3"):
                cell = page.locator(f"{lab00} .jp-CodeCell").nth(
                    _exercise_index(page, lab00, number)
                )
                _type_into(page, cell, solved(number).rstrip())
                _run(page, cell)
                progress_seen[number] = _check(page, lab00, number)
            page.keyboard.press("Control+s")
            page.wait_for_timeout(1_000)
            _shut_down_kernels(lab.base)

            # 4. Lab 01's panel: a producer added, one paused; the live cell then finishes.
            live = _notebook(LIVE)
            page.goto(f"{lab.base}/lab/tree/{LAB01}/{LIVE}?token={TOKEN}")
            page.get_by_text("| Idle").wait_for(timeout=60_000)
            panel_cell = _cell(page, live, "ProducerPanel(fleet)")
            panel_cell.locator(".jp-InputArea").click()
            page.locator(".lm-MenuBar-item", has_text="Run").first.click()
            page.locator(".lm-Menu-item[data-command='notebook:run-all-above']").click()
            _run(page, panel_cell)
            panel = page.locator(f"{live} .streamlab-producer-panel")
            expect(panel.locator(".streamlab-producer")).to_have_count(3, timeout=240_000)
            panel.get_by_role("button", name="Add producer").click()
            expect(panel.locator(".streamlab-producer")).to_have_count(4, timeout=30_000)
            row = panel.locator(".streamlab-producer", has_text="Producer 2")
            row.get_by_role("button", name="Pause").click()
            expect(row).to_have_class(re.compile("streamlab-producer-paused"), timeout=30_000)
            expect(row).to_contain_text("paused")
            expect(panel).to_contain_text("Producer 2 paused.")
            panel.scroll_into_view_if_needed()
            _shot(page, "04-panel-added-and-paused")

            waiting = _cell(page, live, "machines_heard")
            _run(page, waiting)
            heard = waiting.locator(".jp-OutputArea-output", has_text="Heard from")
            heard.wait_for(timeout=240_000)
            assert (
                heard.inner_text()
                .strip()
                .endswith("Heard from Producer 1, Producer 3, Producer 4.")
            ), heard.inner_text()
            expect(waiting.locator(".jp-OutputArea-output").last).to_contain_text(
                "machine_name", timeout=60_000
            )
            assert "Traceback" not in _outputs_text(page, live)
            waiting.scroll_into_view_if_needed()
            _shot(page, "05-live-cell-finished")

            # 5. The time view: every window's label inside its box, round times on the axis.
            view_cell = _cell(page, live, "TimeView.of(counted")
            _run(page, view_cell)
            view = view_cell.locator(".streamlab-time-view")
            view.locator(".streamlab-window").first.wait_for(timeout=300_000)
            assert page.evaluate(LABELS_OUTSIDE) == []
            ticks = view.locator(".streamlab-axis-tick").all_inner_texts()
            assert len(ticks) >= 2 and all(re.fullmatch(r"\d\d:\d\d(:\d\d)?", t) for t in ticks)
            view.scroll_into_view_if_needed()
            view.screenshot(path=str(ARTIFACTS / "06-time-view.png"))
            _run(page, _cell(page, live, 'print("stopped")'))
            _cell(page, live, 'print("stopped")').locator(
                ".jp-OutputArea-output", has_text="stopped"
            ).wait_for(timeout=120_000)
            _shut_down_kernels(lab.base)

            # 6. `nox -s check -- 00` in JupyterLab's terminal: the tally and what is next.
            # (on the notebooks of this test, not the course's labs/)
            _terminal(page, lab.base, f"nox -s check -- 00 --notebooks {labs}")
            screen = page.locator(".jp-Terminal .xterm-accessibility-tree")
            expect(screen).to_contain_text("3 passed", timeout=300_000)
            expect(screen).to_contain_text(re.compile(r"Next up: exercise \d+\.\d+"))
            _shot(page, "07-terminal-check")
        except Exception:
            _shot(page, "failure")
            raise
        finally:
            context.close()
    assert blocked == []
    # The grader's progress, "check K of N", showed while a Spark exercise was graded.
    assert progress_seen["0.2"], "no `check K of N` on screen while %check 0.2 waited"


def _exercise_index(page, scope: str, exercise: str) -> int:
    """The position among the notebook's code cells of exercise ``exercise``'s cell."""
    cells = page.locator(f"{scope} .jp-CodeCell")
    first_lines = {
        "0.1": "def effective_settings",
        "0.2": "HEARTBEAT_SCHEMA = StructType",
        "0.3": "def summarise_progress",
    }
    texts = cells.all_inner_texts()
    return next(i for i, text in enumerate(texts) if first_lines[exercise] in text)


def _terminal(page, base: str, command: str) -> None:
    """File > New > Terminal, as the README says, then ``command`` typed into it."""
    page.locator(".lm-MenuBar-item", has_text="File").first.click()
    page.locator(".lm-Menu-item", has_text="New").first.hover()
    page.locator(".lm-Menu-item[data-command='terminal:create-new']").click()
    terminal = page.locator(".jp-Terminal .xterm")
    terminal.wait_for(timeout=60_000)
    page.wait_for_timeout(1_000)  # the shell's prompt
    terminal.click()
    page.keyboard.type(command)
    page.keyboard.press("Enter")
