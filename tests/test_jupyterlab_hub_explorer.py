"""The hub explorer widget in a real JupyterLab and Chromium, offline, on the course's hub.

A notebook sends three heartbeats of one machine with the real SDK and shows the explorer;
the test reads the partition's sequence numbers off the page, sends a fourth event from
outside, presses Refresh and sees it arrive.
"""

from __future__ import annotations

import jupyter_support as lab
import pytest
from eventhub_clients import send
from offline_browser import offline_context

from streamlab.hub import partition_for_key
from streamlab.paths import BUILD_DIR

ARTIFACTS = BUILD_DIR / "artifacts"
PARTITION = partition_for_key("Producer 7", 4)

CELLS = [
    """\
from azure.eventhub import EventData, EventHubProducerClient

from streamlab.hub import course_connection_string
from streamlab.widgets import HubExplorer

hub = course_connection_string()  # the hub `nox -s lab` started
with EventHubProducerClient.from_connection_string(hub, eventhub_name="heartbeats") as producer:
    for second in range(3):
        batch = producer.create_batch(partition_key="Producer 7")
        batch.add(EventData(f'{{"machine_name": "Producer 7", "second": {second}}}'))
        producer.send_batch(batch)""",
    """\
explorer = HubExplorer(hub, ["heartbeats"], recent=4)
explorer.refresh()
explorer""",
]


@pytest.fixture
def jupyter(tmp_path):
    notebooks = lab.notebook_folder(tmp_path, "explorer.ipynb", CELLS)
    env = {
        # A hub of its own, empty: sequence numbers then start at 0 whatever ran before.
        "STREAMLAB_BUILD_DIR": str(tmp_path / "build"),
        "PYTHONPATH": lab.course_pythonpath(),
    }
    with lab.running_jupyterlab(tmp_path, f"--notebook-dir={notebooks}", env=env) as running:
        yield running


def test_the_explorer_shows_a_machines_partition_and_refreshes_in_the_browser(browser, jupyter):
    blocked: list[str] = []
    context = offline_context(browser, blocked, viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    try:
        page.goto(f"{jupyter.base}/lab/tree/explorer.ipynb?token={lab.TOKEN}")
        lab.run_all_cells(page)
        row = page.locator(f'.streamlab-hub-partition[data-partition="{PARTITION}"]')
        row.wait_for(timeout=120_000)
        assert (row.get_attribute("data-first"), row.get_attribute("data-last")) == ("0", "2")
        events = page.locator(".streamlab-hub-event")
        assert events.count() == 3
        assert "Producer 7" in events.first.inner_text()
        assert '"second": 2' in events.last.inner_text()
        page.locator(".streamlab-hub-explorer").screenshot(
            path=str(_artifact("jupyterlab-hub-explorer.png"))
        )

        hub = jupyter.line_starting("Event Hubs emulator: ").split(": ", 1)[1].strip()
        send(hub, ['{"machine_name": "Producer 7", "second": 3}'], partition_key="Producer 7")
        page.locator(".streamlab-hub-explorer button", has_text="Refresh").click()
        page.locator(
            f'.streamlab-hub-partition[data-partition="{PARTITION}"][data-last="3"]'
        ).wait_for(timeout=60_000)
        assert events.count() == 4
        assert '"second": 3' in events.last.inner_text()
    except Exception:
        page.screenshot(path=str(_artifact("jupyterlab-hub-explorer-failure.png")))
        raise
    finally:
        context.close()
    assert blocked == []


def _artifact(name: str):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / name
