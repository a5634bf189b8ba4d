"""The reference monitor killed with SIGKILL and restarted: right after any downtime, exactly once.

Real processes: the hub emulator in its own process, SDK producers (``streamlab.fleet``), and
``python -m streamlab.monitor`` killed with SIGKILL and started again on the same checkpoint.
While it is down, two machines stop for good (one shares its event hub partition with a
machine that keeps sending, one is alone on its partition) and one machine starts. Every
machine must then show exactly the transitions it went through, stamped with when they
happened; late and duplicate heartbeats change nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import pytest
from eventhub_clients import wait_for

from streamlab.fleet import Fleet
from streamlab.hub import partition_for_key, start_subprocess
from streamlab.monitor import command, read_transitions
from streamlab.paths import REPO_ROOT

TIMEOUT_S = 5
KEEP_SENDING = ["m1", "m4"]
STOP = ["m3", "m6"]  # m3 shares partition 0 with m1; m6 is alone on partition 3
START = "m5"  # starts during the downtime, on m4's partition


def start_monitor(connection_string: str, work: Path, run: str, *extra: str) -> subprocess.Popen:
    """``python -m streamlab.monitor`` on ``work``'s checkpoint, its output in a log file."""
    log = open(work / f"monitor-{run}.log", "w")
    return subprocess.Popen(
        command(
            connection_string,
            work / "checkpoint",
            work / "out",
            "--timeout-seconds",
            str(TIMEOUT_S),
            "--trigger",
            "500 milliseconds",
            *extra,
        ),
        cwd=REPO_ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "STREAMLAB_SPARK_MASTER": "local[2]"},
    )


def statuses(rows, machine) -> list[str]:
    return [r["status"] for r in rows if r["machine_name"] == machine]


def chains_are_whole(rows) -> None:
    """Each machine's transitions link up: none lost, none repeated."""
    by_machine = defaultdict(list)
    for row in rows:
        by_machine[row["machine_name"]].append(row)
    for machine, chain in by_machine.items():
        previous = None
        for row in chain:
            assert row["previous_status"] == previous, (
                machine,
                [(r["previous_status"], r["status"]) for r in chain],
            )
            assert row["status"] != previous, (machine, chain)
            previous = row["status"]


def alive(process: subprocess.Popen, log: Path):
    def check() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"the monitor exited: {log.read_text()[-3000:]}")
        return False

    return check


def run_through_downtime(
    connection_string: str, fleet: Fleet, work: Path, down_s: float, *restart_args: str
) -> tuple[list[dict], list[dict], dict, float]:
    """Kill the monitor, stop and start machines, restart it ``down_s`` later; the transitions
    before the kill and at the end, each stopped machine's last send, and the kill time."""
    assert partition_for_key("m1", 4) == partition_for_key("m3", 4) != partition_for_key("m6", 4)
    assert partition_for_key("m4", 4) == partition_for_key("m5", 4)
    assert len({partition_for_key(m, 4) for m in KEEP_SENDING + STOP}) == 3
    for name in KEEP_SENDING + STOP:
        fleet.add(name)
    out = work / "out"
    first = start_monitor(connection_string, work, "1")
    try:
        check = alive(first, work / "monitor-1.log")
        wait_for(
            lambda: (
                check()
                or all("Healthy" in statuses(read_transitions(out), m) for m in KEEP_SENDING + STOP)
            ),
            timeout=240,
            what="every machine Healthy",
        )
        fleet.send_late("m1")
        fleet.send_duplicate("m4")
        time.sleep(1.5)  # the monitor reads them before the kill
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    killed_at = time.time()
    before = read_transitions(out)

    for name in STOP:
        fleet.pause(name)
    fleet.add(START)
    fleet.send_duplicate("m1")
    time.sleep(down_s)
    stopped = {name: fleet.machine(name).last_sent_at for name in STOP}

    second = start_monitor(connection_string, work, "2", *restart_args)
    try:
        check = alive(second, work / "monitor-2.log")
        wait_for(
            lambda: (
                check()
                or (
                    all(statuses(read_transitions(out), m)[-1:] == ["Unhealthy"] for m in STOP)
                    and statuses(read_transitions(out), START)[-1:] == ["Healthy"]
                )
            ),
            timeout=300,
            what="the stopped machines Unhealthy and the new one Healthy",
        )
        time.sleep(TIMEOUT_S + 3)  # time enough for a false Unhealthy to show
    finally:
        second.send_signal(signal.SIGTERM)
        code = second.wait(60)
    assert code == 0, (work / "monitor-2.log").read_text()[-3000:]
    return before, read_transitions(out), stopped, killed_at


def check_transitions(before, after, stopped: dict, killed_at: float) -> None:
    """Exactly the sequences each machine went through, at the times they happened."""
    # What the first run wrote is still there, once; its last batch may have been replayed.
    settled = [r for r in before if r["batch_id"] < max(b["batch_id"] for b in before)]
    assert after[: len(settled)] == settled
    chains_are_whole(after)
    story = {
        m: [
            (r["batch_id"], r["previous_status"], r["status"], r["last_status_change_time"])
            for r in after
            if r["machine_name"] == m
        ]
        for m in KEEP_SENDING + STOP + [START]
    }
    for machine in KEEP_SENDING + [START]:
        assert statuses(after, machine) == ["Initializing", "Healthy"], (machine, story)
    for machine in STOP:
        assert statuses(after, machine) == ["Initializing", "Healthy", "Unhealthy"], (
            machine,
            story,
        )
        unhealthy = [r for r in after if r["machine_name"] == machine][-1]
        # Stamped with the moment it went silent: its last heartbeat (as the hub stamped it,
        # within milliseconds of the producer's send) + the timeout.
        went_silent = unhealthy["last_status_change_time"].timestamp()
        assert abs(went_silent - (stopped[machine] + TIMEOUT_S)) < 0.5, (
            machine,
            went_silent,
            stopped,
        )
    started = [r for r in after if r["machine_name"] == START][0]
    assert started["last_status_change_time"].timestamp() > killed_at, (started, killed_at)
    for row in after:
        assert row["noticed_time"] >= row["last_status_change_time"], row


@pytest.mark.parametrize("down_s", [3, 15], ids=["3 s down", "15 s down"])
def test_a_restart_after_downtime_reports_exactly_what_happened(tmp_path, down_s):
    with start_subprocess(data_dir=tmp_path / "hub") as hub, Fleet(hub.connection_string) as fleet:
        before, after, stopped, killed_at = run_through_downtime(
            hub.connection_string, fleet, tmp_path, down_s
        )
    check_transitions(before, after, stopped, killed_at)


def test_each_writer_writes_the_same_rows_and_a_retried_batch_replaces_the_first_attempt(
    spark, tmp_path
):
    import datetime as dt

    from streamlab.monitor import WRITERS, batch_writer

    changed = dt.datetime(2026, 11, 24, 6, 0, 0, 123456)
    rows = [
        (
            f"m{i}",
            "Healthy",
            "Initializing",
            changed + dt.timedelta(seconds=i),
            changed + dt.timedelta(seconds=i, milliseconds=800),
        )
        for i in range(3)
    ]
    df = spark.createDataFrame(
        rows,
        "machine_name string, status string, previous_status string,"
        " last_status_change_time timestamp, noticed_time timestamp",
    )
    written = {}
    for writer in WRITERS:
        out = tmp_path / writer
        out.mkdir()
        write = batch_writer(out, writer)
        write(df, 0)
        write(df.limit(0), 1)  # a batch without transitions
        write(df, 2)
        write(df.where("machine_name = 'm1'"), 2)  # the retry of batch 2 replaces it
        written[writer] = read_transitions(out)
        assert sorted(p.name for p in out.iterdir()) == ["batch_id=0", "batch_id=1", "batch_id=2"]
        # Spark reads the folder too, with the timestamps it wrote.
        assert sorted(
            spark.read.parquet(str(out)).where("batch_id = 0").drop("batch_id").collect()
        ) == sorted(df.collect())
    assert written["arrow"] == written["spark"]
    assert [(r["batch_id"], r["machine_name"]) for r in written["arrow"]] == [
        (0, "m0"),
        (0, "m1"),
        (0, "m2"),
        (2, "m1"),
    ]
    assert (
        written["arrow"][0]["last_status_change_time"].timestamp()
        == changed.replace(tzinfo=dt.UTC).timestamp()
    )
    with pytest.raises(ValueError, match="writer must be one of spark, arrow, not 'csv'"):
        batch_writer(tmp_path, "csv")
