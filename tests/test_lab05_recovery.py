"""Lab 05's catch-up processor end to end, with the real hub and a kill -9.

The query (lab 05's solution: ``CatchUpProcessor`` keyed by event hub partition, the
reference monitor's replace-on-retry sink) runs in a process of its own. The test kills it
with SIGKILL while four machines keep sending, stops one of them for good during the
downtime, and restarts the query on the same checkpoint with a small ``maxEventsPerTrigger``,
so that the backlog arrives over many micro-batches, one partition faster than the other.
The machines that kept sending must never be reported Unhealthy; the one that stopped must be,
once, stamped with the moment it went silent; and no transition is lost or repeated.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from eventhub_clients import wait_for

from streamlab.fleet import Fleet
from streamlab.hub import partition_for_key
from streamlab.monitor import read_transitions
from streamlab.paths import REPO_ROOT

LAB05 = REPO_ROOT / "solutions" / "05-restart-recovery" / "05-restart-recovery.ipynb"
KEEP_SENDING = ["m1", "m2", "m4"]  # m1 and m2 share partition 0 with m3; m4 is on partition 1
STOPS = "m3"
MACHINES = sorted(KEEP_SENDING + [STOPS])
LIMIT = 8  # maxEventsPerTrigger after the restart

RUNNER = r"""
import json, signal, sys, threading
from pathlib import Path
from streamlab.grading.loader import load_notebook
from streamlab.monitor import batch_writer
from streamlab.session import spark_session

notebook, connection_string, checkpoint, output, progress, limit = sys.argv[1:7]
loaded = load_notebook(notebook, module_name="lab05_solution")
assert not loaded.problems, loaded.problems[0].sentence()
lab = loaded.module
spark = spark_session(app_name="lab05-catch-up")
reader = (spark.readStream.format("eventhubs").option("connectionString", connection_string)
          .option("eventHubName", "heartbeats").option("startingPosition", "earliest"))
if int(limit):
    reader = reader.option("maxEventsPerTrigger", limit)
Path(output).mkdir(parents=True, exist_ok=True)
query = (lab.catch_up_changes(lab.parse_heartbeats(reader.load()), lab.CatchUpProcessor(timeout_ms=5000))
         .writeStream.foreachBatch(batch_writer(Path(output)))
         .option("checkpointLocation", checkpoint)
         .trigger(processingTime="500 milliseconds").start())
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
logged = set()
with open(progress, "a") as log:
    while not stop.is_set() and query.isActive:
        for p in query.recentProgress:
            if p["batchId"] not in logged:
                logged.add(p["batchId"])
                log.write(json.dumps({"run": limit, "batch": p["batchId"], "rows": p["numInputRows"]}) + "\n")
                log.flush()
        stop.wait(0.2)
if query.isActive:
    query.stop()
    sys.exit(0)
print(query.exception(), file=sys.stderr)
sys.exit(1)
"""


def _start(hub, tmp_path: Path, limit: int) -> subprocess.Popen:
    log = open(tmp_path / f"runner-{limit}.log", "w")
    return subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(LAB05), hub.connection_string,
         str(tmp_path / "checkpoint"), str(tmp_path / "out"), str(tmp_path / "progress.jsonl"),
         str(limit)],
        cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
        env={**os.environ, "STREAMLAB_SPARK_MASTER": "local[2]"})


def _progress(tmp_path: Path, limit: int) -> list[dict]:
    path = tmp_path / "progress.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return sorted((r for r in rows if r["run"] == str(limit)), key=lambda r: r["batch"])


def _statuses(rows, machine):
    return [r["status"] for r in rows if r["machine_name"] == machine]


def _chains_are_whole(rows) -> None:
    by_machine = defaultdict(list)
    for row in rows:
        by_machine[row["machine_name"]].append(row)
    for machine, chain in by_machine.items():
        previous = None
        for row in chain:
            assert row["previous_status"] == previous, (machine, [(r["previous_status"], r["status"]) for r in chain])
            previous = row["status"]


def _alive(process: subprocess.Popen, tmp_path: Path, limit: int):
    def check():
        if process.poll() is not None:
            raise AssertionError((tmp_path / f"runner-{limit}.log").read_text()[-3000:])
    return check


def _caught_up(tmp_path: Path) -> bool:
    """A batch held back by the limit, and a later one that was not: the backlog is read."""
    rows = [r["rows"] for r in _progress(tmp_path, LIMIT)]
    full = [i for i, n in enumerate(rows) if n >= LIMIT]
    return bool(full) and any(0 < n < LIMIT for n in rows[full[0] + 1:])


@pytest.fixture
def fleet(hub):
    with Fleet(hub.connection_string) as running:
        yield running


def test_machines_that_kept_sending_stay_healthy_through_a_catch_up(hub, fleet, tmp_path):
    assert partition_for_key("m1", 4) == partition_for_key("m3", 4) != partition_for_key("m4", 4)
    for name in MACHINES:
        fleet.add(name)
    out = tmp_path / "out"

    first = _start(hub, tmp_path, 0)
    try:
        alive = _alive(first, tmp_path, 0)
        wait_for(lambda: alive() or all("Healthy" in _statuses(read_transitions(out), m)
                                        for m in MACHINES),
                 timeout=240, what="every machine Healthy")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    before = read_transitions(out)

    # Down for a while: three machines keep sending, m3 stops for good half way.
    sent = {m: fleet.machine(m).sent for m in MACHINES}
    wait_for(lambda: fleet.machine(STOPS).sent >= sent[STOPS] + 8, timeout=60, what="m3 sending")
    fleet.pause(STOPS)
    stopped_at = fleet.machine(STOPS).last_sent_at
    wait_for(lambda: all(fleet.machine(m).sent >= sent[m] + 20 for m in KEEP_SENDING),
             timeout=60, what="twenty heartbeats per machine during the downtime")

    second = _start(hub, tmp_path, LIMIT)
    try:
        alive = _alive(second, tmp_path, LIMIT)
        wait_for(lambda: alive() or _caught_up(tmp_path), timeout=300, what="the catch-up")
        wait_for(lambda: alive() or UNHEALTHY_OF_M3(read_transitions(out)),
                 timeout=60, what="m3 Unhealthy")
    finally:
        second.send_signal(signal.SIGTERM)
        code = second.wait(60)
    assert code == 0, (tmp_path / f"runner-{LIMIT}.log").read_text()[-3000:]

    after = read_transitions(out)
    settled = [r for r in before if r["batch_id"] < max(b["batch_id"] for b in before)]
    assert after[:len(settled)] == settled
    _chains_are_whole(after)
    restarted = [r for r in after if r["batch_id"] > max(b["batch_id"] for b in before)]
    for machine in KEEP_SENDING:
        assert "Unhealthy" not in _statuses(after, machine), (
            machine, [(r["batch_id"], r["previous_status"], r["status"]) for r in after])
    assert _statuses(restarted, STOPS) == ["Unhealthy"], restarted
    went_silent = UNHEALTHY_OF_M3(after)[0]["last_status_change_time"].timestamp()
    assert abs(went_silent - (stopped_at + 5)) < 2, (went_silent, stopped_at)
    full_batches = [p for p in _progress(tmp_path, LIMIT) if p["rows"] >= LIMIT]
    assert len(full_batches) >= 3, _progress(tmp_path, LIMIT)


def UNHEALTHY_OF_M3(rows) -> list[dict]:
    return [r for r in rows if r["machine_name"] == STOPS and r["status"] == "Unhealthy"]
