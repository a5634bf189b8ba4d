"""The reference monitor: exactly-once transitions across a kill -9 while producers keep sending."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import defaultdict

import pytest
from eventhub_clients import wait_for

from streamlab.fleet import Fleet
from streamlab.monitor import read_transitions
from streamlab.paths import REPO_ROOT

MACHINES = ["m1", "m2", "m3"]


def _monitor(hub, tmp_path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "streamlab.monitor", "--connection-string", hub.connection_string,
         "--checkpoint", str(tmp_path / "checkpoint"), "--output", str(tmp_path / "out"),
         "--timeout-seconds", "5", "--trigger", "500 milliseconds"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**__import__("os").environ, "STREAMLAB_SPARK_MASTER": "local[2]"})


def _statuses(rows, machine):
    return [r["status"] for r in rows if r["machine_name"] == machine]


def _chains_are_whole(rows) -> None:
    """Each machine's transitions link up: none lost, none repeated."""
    by_machine = defaultdict(list)
    for row in rows:
        by_machine[row["machine_name"]].append(row)
    for machine, chain in by_machine.items():
        previous = None
        for row in chain:
            assert row["previous_status"] == previous, (machine, [(r["previous_status"], r["status"]) for r in chain])
            assert row["status"] != previous, (machine, chain)
            previous = row["status"]


@pytest.fixture
def fleet(hub):
    with Fleet(hub.connection_string) as running:
        yield running


def test_kill_minus_nine_loses_and_repeats_nothing(hub, fleet, tmp_path):
    for name in MACHINES:
        fleet.add(name)
    first = _monitor(hub, tmp_path)
    try:
        wait_for(lambda: all("Healthy" in _statuses(read_transitions(tmp_path / "out"), m)
                             for m in MACHINES), timeout=180, what="every machine Healthy")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    before = read_transitions(tmp_path / "out")

    second = _monitor(hub, tmp_path)
    try:
        fleet.pause("m2")
        wait_for(lambda: _statuses(read_transitions(tmp_path / "out"), "m2")[-1:] == ["Unhealthy"],
                 timeout=180, what="m2 Unhealthy after its pause")
        fleet.resume("m2")
        wait_for(lambda: _statuses(read_transitions(tmp_path / "out"), "m2")[-1:] == ["Healthy"],
                 timeout=120, what="m2 Healthy again")
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(60) == 0, second.stdout.read()
    after = read_transitions(tmp_path / "out")
    # What the first run wrote is still there, once; its last batch may have been replayed.
    settled = [r for r in before if r["batch_id"] < max(b["batch_id"] for b in before)]
    assert after[:len(settled)] == settled
    _chains_are_whole(after)
    assert all(_statuses(after, m)[:2] == ["Initializing", "Healthy"] for m in MACHINES)
