"""The time view in a real JupyterLab and Chromium, offline: a finished query's numbers.

A notebook runs one query of each of labs 02, 07 and 09, built from the lab's solution, saves
each query's progress reports as JSON beside the notebook and shows ``TimeView.of`` the query.
The test reads every batch's numbers off each view and holds them to those reports.
"""

from __future__ import annotations

import json

import jupyter_support as lab
import pytest
from offline_browser import accessibility_violations, offline_context

from streamlab.paths import BUILD_DIR, REPO_ROOT

ARTIFACTS = BUILD_DIR / "artifacts"

#: One query of each lab that draws the view, built from the lab's solution: lab 02's final
#: counts (tumbling windows, a late heartbeat dropped), lab 07's sliding-window samples, lab 09's
#: join of status changes with maintenance windows (two watermarks, no window in its state).
#: Each story is its own, not an exercise's: the site shows them before any exercise passes.
CELLS = [
    """\
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from pyspark.sql import functions as F

import streamlab
from streamlab.deadlines import finish
from streamlab.deliveries import read_deliveries, run_deliveries, write_deliveries
from streamlab.solutions import load_solution
from streamlab.widgets import TimeView

spark = streamlab.spark_session("local[2]", conf={"spark.sql.shuffle.partitions": "2"})
START = datetime(2026, 11, 22, 10, 0, tzinfo=timezone.utc)


def at(second):
    return (START + timedelta(seconds=second)).isoformat()


def run(name, df):
    # Deliver, run once with availableNow into a memory table, keep the progress reports.
    folder = Path(name).resolve()
    query = (df.writeStream.format("memory").queryName(name).outputMode("append")
             .option("checkpointLocation", str(folder / "checkpoint"))
             .trigger(availableNow=True).start())
    finish(query, within=300, what=f"lab {name}'s query to read every delivery")
    Path(f"{name}.json").write_text(json.dumps([json.loads(p.json) for p in query.recentProgress]))
    return query, str(folder / "checkpoint")""",
    """\
lab02 = load_solution("02")
beats = Path("in02").resolve()
beat = lambda m, s: {"machine_name": m, "machine_time": at(s), "event_time": at(s)}
write_deliveries(beats, [[beat("a", 5), beat("a", 6)], [beat("a", 14), beat("b", 34)],
                         [beat("a", 48)], [beat("b", 7), beat("a", 8)]])
query, checkpoint = run("lab02", lab02.final_counts(
    read_deliveries(spark, beats, lab02.HEARTBEAT_SCHEMA)))
view = TimeView.of(query, spark=spark, checkpoint=checkpoint, title="lab 02: final counts")
Path("lab02.html").write_text(view.html())
view""",
    """\
lab07 = load_solution("07")
readings = Path("in07").resolve()
reading = lambda d, s, n: {"device_id": d, "sensor_freq": 50.0, "event_time": at(s),
                           "sequence_number": n}
write_deliveries(readings, [[reading("s1", 10, 0), reading("s1", 40, 1)],
                            [reading("s1", 100, 2)], [reading("s1", 150, 3)], [reading("s1", 20, 4)]])
ddl = "device_id STRING, sensor_freq DOUBLE, event_time TIMESTAMP, sequence_number BIGINT"
query, checkpoint = run("lab07", lab07.window_samples(read_deliveries(spark, readings, ddl)))
view = TimeView.of(query, spark=spark, checkpoint=checkpoint, title="lab 07: sliding-window samples")
Path("lab07.html").write_text(view.html())
view""",
    """\
lab09 = load_solution("09")
story = Path("in09").resolve()
change = lambda m, s: {"kind": "change", "machine_name": m, "status": "Unhealthy",
                       "previous_status": "Healthy", "last_status_change_time": at(s)}
window = lambda m, a, b: {"kind": "window", "machine_name": m, "maintenance_start": at(a),
                          "maintenance_end": at(b)}
write_deliveries(story, [[window("m4", 0, 30)], [change("m4", 20), change("m5", 25)],
                         [change("m6", 70)], [window("m9", 120, 125), change("m5", 130)]])
rows = read_deliveries(spark, story, "kind STRING, machine_name STRING, status STRING, "
                       "previous_status STRING, last_status_change_time TIMESTAMP, "
                       "maintenance_start TIMESTAMP, maintenance_end TIMESTAMP")
changes = rows.where("kind = 'change'").drop("kind", "maintenance_start", "maintenance_end")
windows = rows.where("kind = 'window'").select("machine_name", "maintenance_start", "maintenance_end")
query, checkpoint = run("lab09", lab09.outside_maintenance(changes, windows))
view = TimeView.of(query, spark=spark, checkpoint=checkpoint, title="lab 09: changes outside maintenance")
Path("lab09.html").write_text(view.html())
view""",
]

LABS = ["lab02", "lab07", "lab09"]


@pytest.fixture
def jupyter(tmp_path):
    notebooks = lab.notebook_folder(tmp_path, "time_view.ipynb", CELLS)
    env = {"STREAMLAB_SPARK_MASTER": "local[2]", "PYTHONPATH": lab.course_pythonpath()}
    with lab.running_jupyterlab(
        tmp_path, f"--notebook-dir={notebooks}", env=env, hub=False
    ) as running:
        yield running, notebooks


def test_each_labs_view_shows_its_progress_reports_numbers_in_the_browser(browser, jupyter):
    running, notebooks = jupyter
    blocked: list[str] = []
    context = offline_context(browser, blocked, viewport={"width": 1280, "height": 1100})
    page = context.new_page()
    try:
        page.goto(f"{running.base}/lab/tree/time_view.ipynb?token={lab.TOKEN}")
        lab.run_all_cells(page)
        views = page.locator(".streamlab-time-view")
        # A JVM starts, the three labs' solutions load and their queries run before the last
        # view is drawn.
        views.nth(len(LABS) - 1).locator("tr.streamlab-time-row").first.wait_for(timeout=600_000)
        for index, name in enumerate(LABS):
            reports = json.loads((notebooks / f"{name}.json").read_text())
            _same_numbers(views.nth(index), reports, name)
        assert accessibility_violations(page, ".streamlab-time-view") == []
        drawn = {name: (notebooks / f"{name}.html").read_text() for name in LABS}
        for name, still in drawn.items():
            _artifact(f"time-view-{name}.html").write_text(still)
        assert [_still_on_site(name) for name in LABS] == [_wrapped(drawn[n]) for n in LABS], (
            "a site page's still of the time view is not what its lab's query draws: copy "
            "build/artifacts/time-view-labNN.html between the page's time-view markers"
        )
        late = views.nth(0).locator("tr.streamlab-time-row[data-batch='3'] .streamlab-dropped")
        assert (
            late.inner_text() == "2 late"
        )  # lab 02's heartbeats of 10:00:07 and 10:00:08, in words
        views.nth(0).screenshot(path=str(_artifact("jupyterlab-time-view.png")))
    except Exception:
        page.screenshot(path=str(_artifact("jupyterlab-time-view-failure.png")))
        raise
    finally:
        context.close()
    assert blocked == []


def _same_numbers(view, reports: list[dict], name: str) -> None:
    """Each batch's numbers on the page are its progress report's."""
    assert reports, f"{name}: the query reported no batch"
    assert view.locator("tr.streamlab-time-row").count() == len(reports), name
    for report in reports:
        batch = report["batchId"]
        row = view.locator(f"tr.streamlab-time-row[data-batch='{batch}']")
        operators = report["stateOperators"]
        shown = {
            "input": row.locator(".streamlab-input-rows").inner_text(),
            "dropped": row.locator(".streamlab-dropped").get_attribute("data-dropped"),
            "state": row.locator(".streamlab-state-rows").all_inner_texts(),
            "output": row.locator(".streamlab-output-rows").inner_text(),
            "watermark": row.locator(".streamlab-watermark").get_attribute("data-watermark"),
        }
        assert shown == {
            "input": str(report["numInputRows"]),
            "dropped": str(sum(op["numRowsDroppedByWatermark"] for op in operators)),
            "state": [str(op["numRowsTotal"]) for op in operators],
            "output": str(report["sink"]["numOutputRows"]),
            "watermark": report["eventTime"].get("watermark"),
        }, f"{name}, batch {batch}"
        windowed = view.locator(f".streamlab-time-batch[data-batch='{batch}']")
        if name != "lab09":  # a join's state has no window in its key: nothing to draw there
            (operator,) = operators
            assert windowed.locator(".streamlab-window-open").count() == operator["numRowsTotal"]
            assert (
                windowed.locator(".streamlab-window-closed").count() == (operator["numRowsRemoved"])
            )


#: The site page that shows each lab's view as a still, between these two lines.
STILLS = {
    "lab02": "02-event-time",
    "lab07": "07-complex-event-processing",
    "lab09": "09-monitor-in-context",
}
STILL_START, STILL_END = "<!-- time view: start -->", "<!-- time view: end -->"


def _wrapped(drawn: str) -> str:
    return f'<div class="streamlab-still" markdown="0">{drawn}</div>'


def _still_on_site(name: str) -> str:
    """What the lab's site page shows between its time-view markers."""
    text = (REPO_ROOT / "site" / "labs" / f"{STILLS[name]}.md").read_text()
    return text.split(STILL_START, 1)[-1].split(STILL_END, 1)[0].strip()


def _artifact(name: str):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / name
