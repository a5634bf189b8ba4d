"""Spark's web UI for the labs: started on request, on loopback, read through its REST API and
seen in Chromium with every request outside 127.0.0.1 blocked.

The UI runs in a child process (``spark_ui_child.py``): this process's shared session keeps its
UI off, as the checks' does. Screenshots go where the tour keeps its own.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.parse
from pathlib import Path

import pytest
from offline_browser import offline_context

from streamlab import session
from streamlab.paths import BUILD_DIR, REPO_ROOT
from streamlab.spark_ui import SparkUI, _state_nodes, address, metric_value

ARTIFACTS = BUILD_DIR / "artifacts" / "tour"
CHILD = Path(__file__).with_name("spark_ui_child.py")


# -- without a UI -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, value",
    [
        ("118", 118),
        ("1,234", 1234),
        ("0.0 B", 0),
        ("451 ms", 451),
        ("1.5 s", 1500),
        (
            "total (min, med, max (stageId: taskId))\n2.0 MiB (1026.1 KiB, 1 KiB, 1 KiB (0: 1))",
            2 * 1024**2,
        ),
    ],
)
def test_a_metric_as_the_ui_shows_it_reads_as_a_number(text, value):
    assert metric_value(text) == value


def test_every_state_node_of_a_real_execution_is_found():
    # Batch 1 of lab 06's ui_tour query as the REST API served it: dropDuplicates, then a count.
    tour = json.loads((REPO_ROOT / "checks" / "data" / "06_ui_tour_batch1.json").read_text())
    nodes = _state_nodes(tour["execution"])
    holding = sorted(
        name for name, metrics in nodes.items() if "number of total state rows" in metrics
    )
    assert holding == ["StateStoreSave", "StreamingDeduplicate"]
    assert nodes["StreamingDeduplicate"]["number of total state rows"] == "12"


def test_a_metric_that_is_no_number_is_refused():
    with pytest.raises(ValueError, match="not a metric the UI shows"):
        metric_value("RUNNING")


def test_a_session_without_a_ui_says_how_to_get_one(spark, capsys):
    assert address(spark) is None
    with pytest.raises(RuntimeError, match=r"spark_session\(ui=True\)"):
        SparkUI.of(spark)
    # Asking for the UI once the session runs cannot start it: the call says so.
    assert session.spark_session(ui=True) is spark
    assert "started without its web UI: restart the kernel" in capsys.readouterr().out


# -- a session with its UI, in a child process ------------------------------------------------


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    """(UI address, the child's JSON line) of a running stateful query's session."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    }
    env.pop("SPARK_LOCAL_IP", None)
    checkpoint = tmp_path_factory.mktemp("ui") / "checkpoint"
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(checkpoint)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        said, line = child.stdout.readline(), child.stdout.readline()
        assert said.startswith("Spark UI: http://127.0.0.1:"), said
        assert said.rstrip().endswith("/StreamingQuery/)"), said
        yield said.split()[2], json.loads(line)
    finally:
        child.stdin.close()
        try:
            child.wait(120)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _other_address() -> str | None:
    """This machine's address on its default route (a UDP socket's connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
        except OSError:
            return None
        found = probe.getsockname()[0]
    return None if found.startswith("127.") else found


def test_the_ui_listens_on_loopback_only(ui):
    url, _ = ui
    port = urllib.parse.urlsplit(url).port
    socket.create_connection(("127.0.0.1", port), timeout=5).close()
    other = _other_address()
    if other is None:
        pytest.skip("this machine has no address but loopback")
    with pytest.raises(OSError):
        socket.create_connection((other, port), timeout=5).close()


def test_structured_streaming_has_no_statistics_endpoint_in_the_rest_api(ui):
    # /streaming/statistics is the DStream API's: the SQL executions are what there is.
    url, _ = ui
    rest = SparkUI(url, timeout=120)
    with pytest.raises(urllib.error.HTTPError) as answer:
        rest.get(f"/api/v1/applications/{rest.app_id}/streaming/statistics")
    assert answer.value.code == 404


def test_the_sql_tabs_state_metrics_agree_with_the_progress_report(ui):
    url, child = ui
    progress = child["progress"]
    operator = progress["stateOperators"][0]
    nodes = SparkUI(url, timeout=120).state_metrics(child["run_id"], batch_id=progress["batchId"])
    save = nodes["StateStoreSave"]
    assert metric_value(save["number of total state rows"]) == operator["numRowsTotal"]
    assert metric_value(save["number of updated state rows"]) == operator["numRowsUpdated"]
    # The UI rounds sizes to one decimal of their unit.
    memory = metric_value(save["memory used by state"])
    assert abs(memory - operator["memoryUsedBytes"]) <= 0.05 * operator["memoryUsedBytes"]


#: A chart of the query's page is drawn: an svg with at least one line or bar in it.
CHARTS = [
    ("Input Rate", "input-rate-timeline"),
    ("Process Rate", "process-rate-timeline"),
    ("Batch Duration", "batch-duration-timeline"),
    ("Operation Duration", "duration-area-stack"),
    ("Global Watermark Gap", "watermark-gap-timeline"),
    ("Aggregated Number Of Total State Rows", "aggregated-num-total-state-rows-timeline"),
    ("Aggregated State Memory Used In Bytes", "aggregated-state-memory-used-bytes-timeline"),
]


def test_the_structured_streaming_tab_shows_the_running_query_offline(browser, ui):
    url, child = ui
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    blocked: list[str] = []
    context = offline_context(browser, blocked, viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    try:
        page.goto(f"{url}/StreamingQuery/")
        row = page.locator("tr", has_text=child["name"])
        assert "RUNNING" in row.inner_text() and child["run_id"] in row.inner_text()
        page.screenshot(path=str(ARTIFACTS / "spark-ui-streaming-queries.png"), full_page=True)

        row.locator("a", has_text=child["run_id"]).click()  # the run id leads to its page
        page.wait_for_url("**/StreamingQuery/statistics/**")
        assert f"Name: {child['name']}" in page.inner_text("body")
        for title, chart in CHARTS:
            assert page.get_by_text(title).first.is_visible(), title
            page.wait_for_function(
                f"() => document.querySelector('#{chart} svg path, #{chart} svg rect')",
                timeout=30_000,
            )
        page.screenshot(path=str(ARTIFACTS / "spark-ui-query-statistics.png"), full_page=True)
        # The address labs 06 and 08 print for a query leads to the same page.
        page.goto(SparkUI(url).streaming_page(child["run_id"]))
        assert f"Name: {child['name']}" in page.inner_text("body")
        assert child["run_id"] in page.inner_text("body")

        # The SQL tab: a micro-batch's plan, its state operator and that operator's metrics.
        page.goto(f"{url}/SQL/")
        page.locator("a", has_text=child["name"]).first.wait_for()
        page.screenshot(path=str(ARTIFACTS / "spark-ui-sql.png"), full_page=True)
        execution = SparkUI(url, timeout=120).state_execution(child["run_id"])["id"]
        page.goto(f"{url}/SQL/execution/?id={execution}")
        page.get_by_text("StateStoreSave").first.wait_for(timeout=30_000)
        page.locator("#detailed-labels-checkbox").check()  # metrics in the plan's nodes
        page.get_by_text("number of total state rows").first.wait_for(timeout=30_000)
        page.screenshot(path=str(ARTIFACTS / "spark-ui-sql-batch.png"), full_page=True)
    finally:
        if not page.is_closed():
            page.screenshot(path=str(ARTIFACTS / "spark-ui-last.png"))
        context.close()
    assert not blocked, sorted(set(blocked))
