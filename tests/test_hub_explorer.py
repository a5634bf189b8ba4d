"""The hub explorer against a real emulator, with events sent by the real SDK."""

from __future__ import annotations

import html
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from eventhub_clients import Receiver, send, wait_for

from streamlab.hub import Hub, partition_for_key
from streamlab.hub_explorer import HubUnreachable, describe, explore

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def hub():
    with Hub(port=0, eventhubs={"heartbeats": 4, "status": 1}) as running:
        for second in range(7):
            send(
                running.connection_string,
                [f'{{"machine_name": "Producer 1", "second": {second}}}'],
                partition_key="Producer 1",
            )
        send(
            running.connection_string,
            ['{"machine_name": "Producer 2"}'],
            partition_key="Producer 2",
        )
        yield running


def _partition(view, eventhub, partition):
    [hub] = [h for h in view.eventhubs if h.name == eventhub]
    return next(p for p in hub.partitions if p.id == partition)


def test_a_keys_events_sit_in_its_partition_numbered_from_zero(hub):
    view = explore(hub.connection_string, ["heartbeats"], recent=3)
    one = _partition(view, "heartbeats", str(partition_for_key("Producer 1", 4)))
    assert (one.first_sequence_number, one.last_sequence_number, one.is_empty) == (0, 6, False)
    assert [e.sequence_number for e in one.recent] == [4, 5, 6]
    assert [e.body for e in one.recent] == [
        f'{{"machine_name": "Producer 1", "second": {s}}}' for s in (4, 5, 6)
    ]
    assert {e.partition_key for e in one.recent} == {"Producer 1"}
    assert one.recent[-1].enqueued_time == one.last_enqueued_time
    assert one.recent[0].enqueued_time <= one.recent[-1].enqueued_time
    used = {str(partition_for_key(k, 4)) for k in ("Producer 1", "Producer 2")}
    for part in _hub(view, "heartbeats").partitions:
        assert part.is_empty == (part.id not in used)
        if part.is_empty:
            assert part.recent == () and part.last_enqueued_time is None


def _hub(view, name):
    return next(h for h in view.eventhubs if h.name == name)


def test_default_eventhubs_are_the_courses_and_unknown_ones_are_named(hub):
    assert [h.name for h in explore(hub.connection_string, recent=0).eventhubs] == [
        "heartbeats",
        "status",
    ]
    named = explore(hub.connection_string_for("status"), recent=0)
    assert [h.name for h in named.eventhubs] == ["status"]
    view = explore(hub.connection_string, ["status", "nope"], recent=0)
    assert [h.name for h in view.eventhubs] == ["status"] and view.missing == ("nope",)
    assert "nope: no such event hub here" in describe(view)


def test_an_open_receiver_shows_where_its_consumer_group_stands(hub):
    partition = str(partition_for_key("Producer 1", 4))
    with Receiver(
        hub.connection_string,
        consumer_group="dashboard",
        partition_id=partition,
        starting_position=2,
        starting_position_inclusive=True,
    ) as receiver:
        receiver.wait_count(5)
        readers = wait_for(
            lambda: [
                r
                for r in _hub(
                    explore(hub.connection_string, ["heartbeats"], recent=0), "heartbeats"
                ).readers
                if r.consumer_group == "dashboard"
            ],
            what="the dashboard's receiver",
        )
    assert [(r.partition, r.next_sequence_number) for r in readers] == [(partition, 7)]
    wait_for(
        lambda: (
            "readers: none open"
            in describe(explore(hub.connection_string, ["heartbeats"], recent=0))
        ),
        what="the closed receiver to leave",
    )


def test_describe_prints_partitions_sequence_numbers_and_recent_events(hub):
    text = describe(explore(hub.connection_string, ["heartbeats"], recent=2))
    partition = partition_for_key("Producer 1", 4)
    assert f"partition {partition}: sequence numbers 0..6, last enqueued 20" in text
    assert "#6  20" in text and "key='Producer 1'" in text
    assert '{"machine_name": "Producer 1", "second": 6}' in text
    assert "heartbeats: 4 partition(s), 8 event(s) held" in text


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_no_hub_gives_a_sentence_not_a_trace():
    port = _free_port()
    with pytest.raises(
        HubUnreachable, match=f"No Event Hubs emulator is running at 127.0.0.1:{port}"
    ):
        explore(f"Endpoint=sb://127.0.0.1:{port};SharedAccessKeyName=a;SharedAccessKey=b")


def _command(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "streamlab.hub_explorer", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )


def test_the_command_prints_the_courses_running_hub(hub):
    env = {**os.environ, "STREAMLAB_HUB_CONNECTION_STRING": hub.connection_string}
    done = _command("--recent", "1", env=env)
    assert done.returncode == 0, done.stderr
    assert f"Event hubs at 127.0.0.1:{hub.port}" in done.stdout
    assert "heartbeats: 4 partition(s), 8 event(s) held" in done.stdout
    assert "status: 1 partition(s), 0 event(s) held" in done.stdout


def test_the_command_says_when_no_hub_is_running():
    env = {k: v for k, v in os.environ.items() if k != "STREAMLAB_HUB_CONNECTION_STRING"}
    port = _free_port()
    done = _command("--port", str(port), env=env)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.strip() == (
        f"No Event Hubs emulator is running at 127.0.0.1:{port}: start one with `nox -s lab` "
        "(or `python -m streamlab.hub`), then ask again."
    )


def test_the_widget_shows_each_partition_and_refreshes_on_its_button():
    from streamlab.widgets import HubExplorer

    with Hub(port=0, eventhubs={"heartbeats": 2}) as running:
        key_partition = str(partition_for_key("Producer 1", 2))
        send(running.connection_string, ["<b>one</b>", "two"], partition_key="Producer 1")
        explorer = HubExplorer(running.connection_string, ["heartbeats"], recent=5)
        view = explorer.refresh()
        assert _partition(view, "heartbeats", key_partition).last_sequence_number == 1
        shown = explorer.html.value
        assert f'data-partition="{key_partition}" data-first="0" data-last="1"' in shown
        assert 'data-sequence-number="0"' in shown and "&lt;b&gt;one&lt;/b&gt;" in shown
        assert "<b>one</b>" not in shown and "Producer 1" in shown

        send(running.connection_string, ["three"], partition_key="Producer 1")
        explorer.button.click()  # reads in the background: the kernel stays free
        wait_for(
            lambda: (
                f'data-partition="{key_partition}" data-first="0" data-last="2"'
                in explorer.html.value
            ),
            what="the refreshed view",
        )
        assert "three" in explorer.html.value
        explorer.close()


def test_the_widget_says_when_no_hub_answers():
    from streamlab.widgets import HubExplorer

    port = _free_port()
    explorer = HubExplorer(
        f"Endpoint=sb://127.0.0.1:{port};SharedAccessKeyName=a;SharedAccessKey=b"
    )
    assert explorer.refresh() is None
    assert f"No Event Hubs emulator is running at 127.0.0.1:{port}" in explorer.html.value


def test_nox_s_hub_ends_with_its_sentence_and_no_nox_noise():
    nox = ROOT / ".venv" / "bin" / "nox"
    if not nox.exists():
        pytest.skip("nox is not installed in .venv")
    port = _free_port()
    done = subprocess.run(
        [str(nox), "-s", "hub", "--", "--port", str(port)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"No Event Hubs emulator is running at 127.0.0.1:{port}: start one with `nox -s lab` "
        "(or `python -m streamlab.hub`), then ask again."
    )
    assert "Session hub failed" not in done.stdout + done.stderr


def test_the_command_and_the_widget_say_the_same_of_the_readers():
    from streamlab.hub_explorer import EventHub, HubView, Reader
    from streamlab.widgets.hub_explorer import render

    said = {
        None: "readers: this hub does not say",
        (): "readers: none open",
        (Reader("2", "<dash>", 7),): (
            "reader in consumer group '<dash>' on partition 2: sent everything before #7"
        ),
    }
    for readers, sentence in said.items():
        view = HubView("127.0.0.1:5672", (EventHub("heartbeats", (), readers),), ())
        assert f"  {sentence}" in describe(view).splitlines()
        assert html.escape(sentence) in render(view)


def test_an_sdk_without_the_members_the_readers_need_is_named_in_a_sentence():
    from streamlab.hub_explorer import SdkChanged, _readers

    class OlderClient:  # a client without the SDK's _management_request
        _amqp_transport = None

    with pytest.raises(SdkChanged) as raised:
        _readers(OlderClient(), "heartbeats")
    message = str(raised.value)
    assert "azure-eventhub" in message and "_management_request" in message
    assert "_amqp_transport" not in message.split(" has no ")[1].split(":")[0]


def test_a_hub_that_refuses_the_readers_request_gives_none_not_an_error(hub):
    from azure.eventhub import EventHubConsumerClient

    from streamlab.hub_explorer import _readers

    client = EventHubConsumerClient.from_connection_string(
        hub.connection_string, consumer_group="$Default", eventhub_name="heartbeats", retry_total=0
    )
    with client:
        assert _readers(client, "heartbeats") is not None
        assert _readers(client, "no-such-hub") is None
