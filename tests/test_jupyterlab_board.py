"""End to end in a real JupyterLab and Chromium: panel -> hub -> Spark (TWS) -> board.

A notebook starts a hub, a fleet, the producer panel, the lab 04 solution's heartbeat
pipeline (``format("eventhubs")`` -> ``transformWithState`` -> memory table) and a status
board following that table. The test runs all cells in the browser, presses "Add producer"
with the keyboard, watches Producer 1's badge turn blue, then green, and holds the panel and the
board to an accessibility check (axe-core, WCAG 2.1 AA).
"""

from __future__ import annotations

import signal

import pytest
from jupyter_support import (
    TOKEN,
    course_pythonpath,
    notebook_folder,
    run_all_cells,
    running_jupyterlab,
)
from offline_browser import accessibility_violations

from streamlab.paths import BUILD_DIR, REPO_ROOT
from streamlab.widgets.board import SHAPES

ARTIFACTS = BUILD_DIR / "artifacts"
SOLUTION = REPO_ROOT / "solutions" / "04-transform-with-state" / "04-transform-with-state.ipynb"

CELLS = [
    # 1. The hub, the fleet and its panel.
    """\
from pathlib import Path

from pyspark.sql import functions as F

import streamlab
from streamlab.fleet import Fleet
from streamlab.grading.loader import load_notebook
from streamlab.hub import course_connection_string
from streamlab.widgets import ProducerPanel, StatusBoard

hub = course_connection_string()  # the hub `nox -s lab` started
fleet = Fleet(hub)
panel = ProducerPanel(fleet)
panel""",
    # 2. The reference pipeline: lab 04's solution on the hub's heartbeats.
    f"""\
lab04 = load_notebook({str(SOLUTION)!r})
spark = streamlab.spark_session("local[2]", conf={{"spark.sql.shuffle.partitions": "2"}})
heartbeats = (
    spark.readStream.format("eventhubs")
    .option("connectionString", hub).option("eventHubName", "heartbeats")
    .option("startingPosition", "earliest").load()
    .select(F.from_json(F.col("body").cast("string"), lab04.HEARTBEAT_SCHEMA).alias("beat"))
    .select("beat.*").where("machine_name IS NOT NULL"))
query = (
    lab04.status_changes(heartbeats, lab04.LeanHeartbeatProcessor(timeout_ms=5_000))
    .writeStream.format("memory").queryName("machine_status")
    .option("checkpointLocation", str(Path("checkpoint").resolve()))
    .trigger(processingTime="500 milliseconds").start())""",
    # 3. The board, following the query's table.
    """\
board = StatusBoard(fleet=fleet)
board.follow_table(spark, "machine_status", interval=0.25)
board""",
]

CLEANUP = "board.stop(); panel.close(); query.stop(); fleet.stop(); print('stopped', 'cleanly')"

# Records every (machine, status) a badge shows, in order, however briefly it shows it.
RECORD_BADGES = """() => {
  window.__badges = [];
  const record = () => {
    for (const el of document.querySelectorAll('.streamlab-badge')) {
      const name = el.querySelector('b')?.textContent;
      const status = [...el.classList].find(
        c => c.startsWith('streamlab-') && c !== 'streamlab-badge');
      const mine = window.__badges.filter(s => s.startsWith(name + ':'));
      if (name && status && mine[mine.length - 1] !== name + ':' + status) {
        window.__badges.push(name + ':' + status);
      }
    }
  };
  new MutationObserver(record).observe(document.body,
    {subtree: true, childList: true, attributes: true, characterData: true});
  record();
}"""


@pytest.fixture
def jupyter(tmp_path):
    """JupyterLab and its hub (through ``streamlab.tooling.lab_launcher``) on a folder with the board notebook."""
    notebooks = notebook_folder(tmp_path, "board.ipynb", CELLS)
    env = {
        "STREAMLAB_SPARK_MASTER": "local[2]",
        "PYTHONPATH": course_pythonpath(),
    }
    with running_jupyterlab(tmp_path, f"--notebook-dir={notebooks}", env=env) as lab:
        yield lab.base, lab.process


def _shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"jupyterlab-board-{name}.png"))


@pytest.fixture
def page(browser):
    page = browser.new_page(viewport={"width": 1280, "height": 1100})
    yield page
    if not page.is_closed():  # the test stopped early: keep what the browser showed
        _shot(page, "failure")
        page.close()


def test_a_producer_added_in_the_panel_turns_blue_then_green_on_the_board(page, jupyter):
    base, process = jupyter
    page.goto(f"{base}/lab/tree/board.ipynb?token={TOKEN}")
    run_all_cells(page)
    add = page.locator(".streamlab-producer-panel button", has_text="Add producer")
    add.wait_for(timeout=60_000)
    # Spark starts and the query's first batch runs before the board cell does.
    page.locator(".streamlab-status-board").wait_for(timeout=180_000)
    page.evaluate(RECORD_BADGES)

    # With the keyboard, as a learner who does not use a mouse would: focus, then Enter.
    add.focus()
    page.keyboard.press("Enter")
    page.wait_for_function(
        "() => window.__badges.includes('Producer 1:streamlab-initializing')", timeout=90_000
    )
    _shot(page, "initializing")
    page.wait_for_function(
        "() => window.__badges.includes('Producer 1:streamlab-healthy')", timeout=60_000
    )
    _shot(page, "healthy")
    page.locator(".streamlab-status-board").screenshot(
        path=str(ARTIFACTS / "jupyterlab-board-board.png")
    )
    seen = [
        s.split(":")[1] for s in page.evaluate("window.__badges") if s.startswith("Producer 1:")
    ]
    # Grey when the panel adds it (the board knows the fleet), then the pipeline's verdicts.
    # (On a loaded machine a slow batch may show Unhealthy in between; that is allowed.)
    assert seen[:2] == ["streamlab-unknown", "streamlab-initializing"], seen
    assert "streamlab-healthy" in seen[2:], seen
    assert "→ Healthy" in page.locator(".streamlab-status-board").inner_text()
    # Status in text and shape as well as colour; WCAG 2.1 AA by axe-core, in this browser.
    badge = page.locator(".streamlab-badge", has_text="Producer 1").inner_text()
    assert "Healthy" in badge and SHAPES["Healthy"] in badge, badge
    found = {
        widget: accessibility_violations(page, f".streamlab-{widget}")
        for widget in ("producer-panel", "status-board")
    }
    assert found == {"producer-panel": [], "status-board": []}
    assert page.locator(".streamlab-producer", has_text="Producer 1").is_visible()

    # A learner stops everything from a new cell; nothing may hang.
    page.locator(".jp-Cell").last.click()
    page.keyboard.press("Escape")
    page.keyboard.press("b")
    page.keyboard.press("Enter")
    page.keyboard.type(CLEANUP)
    page.keyboard.press("Shift+Enter")
    page.locator(".jp-OutputArea-output", has_text="stopped cleanly").wait_for(timeout=60_000)
    page.close()

    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=60) == 0
