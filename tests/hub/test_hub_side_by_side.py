"""Emulators side by side: a second one never refuses to start because the first holds the
folder or the port, and one that keeps its events apart leaves no folder behind."""

from __future__ import annotations

import os
import subprocess
import sys

from azure.eventhub import EventData
from eventhub_clients import DEADLINE, port_of, producer, receive

from streamlab.hub.api import start_beside_others, start_subprocess


def _partition_ids(conn_str: str) -> list[str]:
    with producer(conn_str) as client:
        return client.get_eventhub_properties()["partition_ids"]


def test_a_second_emulator_on_a_held_folder_and_port_takes_its_own(tmp_path, monkeypatch):
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))  # where the second one's own folder goes
    data = tmp_path / "hub"
    said: list[str] = []
    with start_beside_others(data, 0, say=said.append) as first:
        port = port_of(first.connection_string)
        assert said == []
        with producer(first.connection_string) as client:
            client.send_event(EventData("kept in the shared folder"), partition_id="0")
        with start_beside_others(data, port, say=said.append) as second:
            assert port_of(second.connection_string) != port
            assert said == [
                f"Another Event Hubs emulator is using {data}; this one keeps its events in a "
                "temporary folder, deleted when it stops.",
                f"Port {port} is taken; the Event Hubs emulator takes another one.",
            ]
            assert _partition_ids(second.connection_string) == ["0", "1", "2", "3"]
            assert len(os.listdir(temp)) == 1  # its own folder
        assert os.listdir(temp) == []  # removed when it stopped
    # The first one's events are where a restarted one finds them.
    with start_subprocess(data_dir=data) as again:
        events = receive(again.connection_string, 1, partition_id="0", starting_position="-1")
    assert [e.body_as_str() for e in events] == ["kept in the shared folder"]


def test_a_notebooks_own_hub_leaves_no_folder_behind(tmp_path):
    temp = tmp_path / "tmp"
    temp.mkdir()
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os\n"
            "from streamlab.hub import course_connection_string\n"
            "print(course_connection_string())\n"
            "print(os.listdir(os.environ['TMPDIR']))\n",
        ],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        env={
            **{k: v for k, v in os.environ.items() if k != "STREAMLAB_HUB_CONNECTION_STRING"},
            "TMPDIR": str(temp),
            "STREAMLAB_ROOT": str(tmp_path),  # so that build/ would be here
        },
    )
    assert run.returncode == 0, run.stderr
    connection_string, during = run.stdout.splitlines()
    assert connection_string.startswith("Endpoint=sb://127.0.0.1:")
    assert during.startswith("['streamlab-hub-")  # the hub's folder while it ran
    assert os.listdir(temp) == []
    assert not (tmp_path / "build").exists()
