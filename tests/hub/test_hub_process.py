"""The emulator as a process: CLI, SIGTERM, and durability across kill -9 and torn writes."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from azure.eventhub import EventData
from eventhub_clients import DEADLINE, Receiver, port_of, producer, receive, wait_for

from streamlab.hub import start_subprocess
from streamlab.hub.__main__ import parse_args

CONN_STR = re.compile(
    r"Endpoint=sb://127\.0\.0\.1:(\d+);SharedAccessKeyName=[^;]+;"
    r"SharedAccessKey=[^;]+;UseDevelopmentEmulator=true"
)


def _last_sequence_numbers(conn_str: str, partitions: int = 4) -> dict[str, int]:
    """Partition properties fetched concurrently (each call opens its own connection)."""
    results: dict[str, int] = {}

    def fetch(partition: str) -> None:
        with producer(conn_str) as client:
            props = client.get_partition_properties(partition)
            results[partition] = props["last_enqueued_sequence_number"]

    threads = [threading.Thread(target=fetch, args=(str(p),)) for p in range(partitions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE)
    return results


def test_kill_9_loses_no_acknowledged_event_and_sequence_numbers_continue(tmp_path):
    data = tmp_path / "data"
    hub = start_subprocess(data_dir=data)
    acked: list[str] = []
    stop = threading.Event()

    def keep_sending() -> None:
        try:
            with producer(hub.connection_string, retry_total=0) as client:
                n = 0
                while not stop.is_set():
                    batch = client.create_batch(partition_key=f"machine-{n % 7}")
                    bodies = [f"e{n + i}" for i in range(10)]
                    for body in bodies:
                        batch.add(EventData(body))
                    client.send_batch(batch)
                    acked.extend(bodies)  # only after the emulator acknowledged it
                    n += 10
        except Exception:
            pass

    sender = threading.Thread(target=keep_sending, daemon=True)
    try:
        sender.start()
        wait_for(lambda: len(acked) >= 500, what="500 acknowledged events")
        hub.kill()  # SIGKILL while the producer is still sending
        assert hub.wait(DEADLINE) == -9
    finally:
        stop.set()
        sender.join(DEADLINE)
        hub.kill()
    restarted = start_subprocess(data_dir=data)
    try:
        last = _last_sequence_numbers(restarted.connection_string)
        with Receiver(restarted.connection_string, starting_position="-1") as receiver:
            events = receiver.wait_count(sum(n + 1 for n in last.values()))
            partitions = list(receiver.partitions)
        with producer(restarted.connection_string) as client:
            for partition in last:
                client.send_event(EventData("after restart"), partition_id=partition)
        continued = _last_sequence_numbers(restarted.connection_string)
    finally:
        restarted.stop()
    bodies = [e.body_as_str() for e in events]
    assert len(bodies) == len(set(bodies))  # nothing duplicated
    assert set(acked) <= set(bodies)  # nothing acknowledged was lost
    for partition in last:
        seqs = [
            e.sequence_number for e, p in zip(events, partitions, strict=True) if p == partition
        ]
        assert seqs == list(range(last[partition] + 1))  # no gap, no repeat
        assert continued[partition] == last[partition] + 1  # numbering continues


def test_torn_tail_is_cut_on_restart(tmp_path):
    data = tmp_path / "data"
    with start_subprocess(data_dir=data) as hub:
        with producer(hub.connection_string) as client:
            batch = client.create_batch(partition_id="0")
            for i in range(5):
                batch.add(EventData(f"kept {i}"))
            client.send_batch(batch)
        hub.kill()
        hub.wait(DEADLINE)
    segment = sorted((data / "heartbeats" / "0").glob("*.log"))[-1]
    with segment.open("ab") as f:  # half of a record, as a crash mid-write would leave
        f.write(b"\x00\x00\x01\x00\xde\xad\xbe\xef" + b"partial")
    with start_subprocess(data_dir=data) as hub:
        with producer(hub.connection_string) as client:
            client.send_event(EventData("next"), partition_id="0")
        events = receive(hub.connection_string, 6, partition_id="0", starting_position="-1")
    assert [e.body_as_str() for e in events] == [f"kept {i}" for i in range(5)] + ["next"]
    assert [e.sequence_number for e in events] == list(range(6))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_signal_stops_cleanly(tmp_path, sig):
    hub = start_subprocess(data_dir=tmp_path)
    port = port_of(hub.connection_string)
    try:
        with producer(hub.connection_string) as client:
            client.send_event(EventData("before stop"), partition_id="0")
            hub.popen.send_signal(sig)
            assert hub.wait(DEADLINE) == 0
    finally:
        hub.kill()
    assert "stopped" in hub.output()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_command_line_options(tmp_path):
    hub = start_subprocess(
        data_dir=tmp_path / "a",
        eventhubs={"orders": 3, "audit": 1},
        extra_args=["--retention-hours", "1", "--retention-mb", "8", "--segment-mb", "1"],
    )
    try:
        assert CONN_STR.fullmatch(hub.connection_string)
        with producer(hub.connection_string, "orders") as client:
            assert client.get_eventhub_properties()["partition_ids"] == ["0", "1", "2"]
        # A second emulator on the same data directory refuses to start.
        second = subprocess.run(
            [
                sys.executable,
                "-m",
                "streamlab.hub",
                "--port",
                "0",
                "--data-dir",
                str(tmp_path / "a"),
            ],
            capture_output=True,
            text=True,
            timeout=DEADLINE,
            env=_env(),
        )
        assert second.returncode == 1 and "another emulator" in second.stderr
    finally:
        hub.stop()
    bad = subprocess.run(
        [sys.executable, "-m", "streamlab.hub", "--eventhub", "nocount"],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        env=_env(),
    )
    assert bad.returncode == 2 and "NAME:PARTITIONS" in bad.stderr


def test_a_hub_beyond_loopback_says_so_and_uses_the_key_given(tmp_path):
    hub = start_subprocess(
        data_dir=tmp_path / "a",
        host="0.0.0.0",
        extra_args=["--key-name", "Course", "--key", "s3cret"],
    )
    try:
        assert "SharedAccessKeyName=Course;SharedAccessKey=s3cret;" in hub.connection_string
        with producer(hub.connection_string) as client:
            assert client.get_eventhub_properties()["partition_ids"] == ["0", "1", "2", "3"]
        warnings = [line for line in hub.output().splitlines() if "beyond this machine" in line]
        assert len(warnings) == 1 and "--key" not in warnings[0]
    finally:
        hub.stop()
    with start_subprocess(data_dir=tmp_path / "b", host="0.0.0.0") as open_hub:
        assert "pass --key" in open_hub.output()
    with start_subprocess(data_dir=tmp_path / "c") as local:
        assert "beyond this machine" not in local.output()
    bad = subprocess.run(
        [sys.executable, "-m", "streamlab.hub", "--key", "a;b"],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        env=_env(),
    )
    assert bad.returncode == 1 and "contain no ';'" in bad.stderr


def test_defaults_bind_loopback_with_the_course_hubs():
    args = parse_args([])
    assert args.host == "127.0.0.1" and args.port == 5672 and args.eventhub is None
    from streamlab.hub import DEFAULT_EVENTHUBS

    assert DEFAULT_EVENTHUBS == {"heartbeats": 4, "status": 1, "alerts": 1}


def _env() -> dict:
    import os

    root = str(Path(__file__).resolve().parents[2])
    return dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p),
    )
