"""`nox -s lab`: the hub and JupyterLab on the labs; a kernel there reaches the hub."""

from __future__ import annotations

import json
import signal
import urllib.request

from azure.eventhub import EventHubConsumerClient
from jupyter_support import TOKEN, running_jupyterlab


def _call(url: str, method: str = "GET", body: dict | None = None):
    request = urllib.request.Request(
        url, method=method, data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"null")


def test_jupyterlab_serves_the_labs_with_a_hub_and_stops_cleanly(tmp_path):
    with running_jupyterlab(tmp_path) as lab:
        listing = _call(f"{lab.base}/api/contents/00-orientation")
        assert "00-orientation.ipynb" in {item["name"] for item in listing["content"]}
        assert _call(f"{lab.base}/api/kernels", "POST", {"name": "python3"})["name"] == "python3"
        html = urllib.request.urlopen(f"{lab.base}/lab?token={TOKEN}", timeout=10).read().decode()
        assert "JupyterLab" in html

        announced = lab.line_starting("Event Hubs emulator: ").split(": ", 1)[1].strip()
        client = EventHubConsumerClient.from_connection_string(
            announced, consumer_group="$Default", eventhub_name="heartbeats")
        with client:
            assert client.get_partition_ids() == ["0", "1", "2", "3"]

        lab.process.send_signal(signal.SIGINT)
        assert lab.process.wait(timeout=60) == 0
