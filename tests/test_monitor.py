"""The reference monitor killed with SIGKILL and restarted: right after any downtime, exactly once.

Real processes: the hub emulator in its own process, SDK producers (``streamlab.fleet``), and
``python -m streamlab.monitor`` killed with SIGKILL and started again on the same checkpoint.
While it is down, two machines stop for good (one shares its event hub partition with a
machine that keeps sending, one is alone on its partition) and one machine starts. Every
machine must then show exactly the transitions it went through, stamped with when they
happened; late and duplicate heartbeats change nothing.

The monitor also watches its own query: a query that dies or stalls is restarted on the same
checkpoint, a few times in a row at most, and then the monitor exits with code 1. The restart
logic runs first on stand-in queries, then the real monitor meets real faults: its output
folder replaced by a file, as when the volume under it goes away, and a hub that stops
answering (its process suspended with SIGSTOP), as a hung server or a dead network path does.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest
from eventhub_clients import wait_for

from streamlab.alerts import STALLED, Alert
from streamlab.fleet import Fleet
from streamlab.hub import partition_for_key, start_subprocess
from streamlab.monitor import command, read_transitions, supervise, trigger_ms
from streamlab.paths import REPO_ROOT
from streamlab.restart_trials import batches, pinned_settings
from streamlab.session import LOG_FILE

TIMEOUT_S = 5
KEEP_SENDING = ["m1", "m4"]
STOP = ["m3", "m6"]  # m3 shares partition 0 with m1; m6 is alone on partition 3
START = "m5"  # starts during the downtime, on m4's partition
ENCODING = "spark.sql.streaming.stateStore.encodingFormat"


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
    assert pinned_settings(tmp_path / "checkpoint")[ENCODING] == "avro"


def test_each_writer_writes_the_same_rows_and_a_retried_batch_replaces_the_first_attempt(
    spark, tmp_path
):
    import datetime as dt

    from streamlab.transitions import WRITERS, batch_writer

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


def committed_transition(checkpoint: Path, output: Path, machine: str) -> bool:
    """True once a batch that wrote a transition of ``machine`` has committed."""
    written = [r["batch_id"] for r in read_transitions(output) if r["machine_name"] == machine]
    committed = batches(checkpoint / "commits")
    return bool(written and committed and committed[-1] >= written[0])


def test_the_monitor_starts_its_query_with_the_avro_state_encoding_for_that_query_only(
    spark, tmp_path
):
    """Avro lets the processor's state gain, drop or widen a field in a later release, and a
    checkpoint pins the encoding of its first batch: the monitor must start with it. The
    session is put back as found, for the next query's own."""
    from streamlab.deadlines import stop
    from streamlab.monitor import reference_solution, start
    from streamlab.restart_trials import session_conf

    lab = reference_solution()
    with start_subprocess(data_dir=tmp_path / "hub") as hub, Fleet(hub.connection_string) as fleet:
        fleet.add("m1")
        with session_conf(spark, {ENCODING: "unsaferow"}):
            out, cp = tmp_path / "out", tmp_path / "cp"
            query = start(spark, hub.connection_string, str(cp), str(out), lab=lab)
            try:
                assert spark.conf.get(ENCODING) == "unsaferow"
                wait_for(
                    lambda: query.exception() or committed_transition(cp, out, "m1"),
                    timeout=240,
                    what="m1's first transition, in a committed micro-batch",
                )
                assert query.exception() is None, query.exception()
            finally:
                stop(query, what="the monitor's query to stop")
    assert pinned_settings(cp)[ENCODING] == "avro"
    # Lab 05 reads the monitor's state with the state reader: it reads Avro too.
    values = spark.read.format("statestore").option("stateVarName", "partition")
    assert "m1" in [name for row in values.load(str(cp)).collect() for name in row.value.names]


# -- the monitor watches its own query --------------------------------------------------------


class StandIn:
    """A query as the monitor's supervisor sees it: active until stopped, or until it fails."""

    name = "heartbeat_monitor"

    def __init__(
        self, *, progress: dict | None = None, error: str | None = None, stalls: bool = False
    ) -> None:
        self.lastProgress = progress
        self._error = error
        self.stalls = stalls  # its listener raises a stall alert as soon as it starts
        self.isActive = error is None
        self.stopped = False
        self.unstoppable = threading.Event()  # set: stop() blocks, as on a stuck task

    def exception(self):
        return self._error

    def stop(self) -> None:
        if self.unstoppable.is_set():
            threading.Event().wait(5)  # bounded, so that the test's own process ends
        self.isActive, self.stopped = False, True


def stall_of(query: StandIn) -> Alert:
    return Alert(STALLED, query.name, 8, 31_000, 30_000, f"query {query.name}: stalled", "")


def run_supervised(runs: list, **options) -> tuple[int, list[StandIn]]:
    """Supervise stand-in queries: each item of ``runs`` makes one run (or raises).

    ``supervise`` runs in a thread of its own: one that has not returned after 30 s fails the
    test (and is stopped) instead of holding it.
    """
    stalls: queue.Queue = queue.Queue()
    started: list[StandIn] = []

    def start_query() -> StandIn:
        query = runs[len(started)]()
        started.append(query)
        if query.stalls:
            stalls.put(stall_of(query))
        return query

    stop = options.pop("stop", threading.Event())
    options = {"pause": 0, "every": 0.01, **options}
    code = []
    supervisor = threading.Thread(
        target=lambda: code.append(supervise(start_query, stop=stop, stalls=stalls, **options)),
        daemon=True,
    )
    supervisor.start()
    supervisor.join(30)
    if supervisor.is_alive():
        stop.set()
        supervisor.join(10)
        raise AssertionError(f"supervise did not return within 30 s; runs: {len(started)}")
    return code[0], started


def stalling(**kwargs):
    return lambda: StandIn(stalls=True, **kwargs)


def failing(error: str, **kwargs):
    return lambda: StandIn(error=error, **kwargs)


def cannot_start():
    raise FileExistsError(17, "File exists", "/data/out")


def test_a_query_that_keeps_stalling_is_restarted_then_the_monitor_gives_up(capsys):
    code, runs = run_supervised([stalling()] * 3, max_restarts=2)
    assert code == 1 and len(runs) == 3
    assert all(query.stopped for query in runs)  # stopped before each restart, and at the end
    assert capsys.readouterr().err.splitlines() == [
        "monitor: query heartbeat_monitor: stalled",
        "monitor: restart 1 of 2 in 0 s, on the same checkpoint, because its query stalled.",
        "monitor: query heartbeat_monitor: stalled",
        "monitor: restart 2 of 2 in 0 s, on the same checkpoint, because its query stalled.",
        "monitor: query heartbeat_monitor: stalled",
        "monitor: giving up after 2 restart(s) in a row without a completed micro-batch: "
        "exiting with code 1, for a supervisor to act on the sentences above.",
    ]


def test_a_restarted_query_that_completes_a_batch_starts_the_count_again(capsys):
    error = "py4j.Py4JException: Traceback (most recent call last):\nOSError: disk full\n"
    batch_7 = {"name": "heartbeat_monitor", "batchId": 7}
    code, runs = run_supervised(
        [failing(error), failing(error, progress=batch_7), cannot_start], max_restarts=1
    )
    assert code == 1 and len(runs) == 2
    log = f"Spark's log has the whole trace: {LOG_FILE}"
    restart = "monitor: restart 1 of 1 in 0 s, on the same checkpoint, because "
    assert capsys.readouterr().err.splitlines() == [
        "monitor: query heartbeat_monitor: stopped with an error before it finished a "
        f"micro-batch: OSError: disk full; {log}",
        restart + "its query stopped with an error.",
        # This run had completed batch 7: a new run of failures, whose first restart is 1.
        f"monitor: query heartbeat_monitor: stopped with an error in batch 8: OSError: disk full; "
        f"{log}",
        restart + "its query stopped with an error.",
        "monitor: its query could not start: FileExistsError: [Errno 17] File exists: '/data/out'",
        "monitor: giving up after 1 restart(s) in a row without a completed micro-batch: "
        "exiting with code 1, for a supervisor to act on the sentences above.",
    ]


def test_a_stalled_query_that_cannot_be_stopped_ends_the_monitor(capsys):
    def stuck() -> StandIn:
        query = stalling()()
        query.unstoppable.set()
        return query

    code, runs = run_supervised([stuck], stop_within=0.1)
    assert code == 1 and len(runs) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "monitor: query heartbeat_monitor: stalled"
    assert err[1].startswith("monitor: Waited 0.1 s for the stalled query to stop, and it has not")
    assert err[1].endswith(
        "It holds its checkpoint, so it cannot be started again here: exiting with code 1, "
        "for a supervisor to start the monitor again."
    )
    assert len(err) == 2


def test_a_requested_stop_stops_the_query_and_exits_0(capsys):
    stop = threading.Event()
    said = []
    code, runs = run_supervised(
        [lambda: StandIn()], stop=stop, started=lambda: (said.append("running"), stop.set())
    )
    assert (code, said, [q.stopped for q in runs]) == (0, ["running"], [True])
    assert capsys.readouterr().err == ""


def test_the_trigger_sets_the_stall_bound():
    assert [trigger_ms(t) for t in ("250 milliseconds", "1 second", "2 seconds")] == [
        250,
        1_000,
        2_000,
    ]
    assert trigger_ms("1.5 minutes") == 90_000 and trigger_ms("soon") is None


def test_a_monitor_whose_query_keeps_dying_restarts_it_then_exits_1(tmp_path):
    """A real fault: the output folder becomes a file (the volume under it went away, a deploy
    put a file there), so each batch's write fails, and so does a restart's ``mkdir``. Put
    right once, the restart on the same checkpoint carries on where the query stopped."""
    out, moved = tmp_path / "out", tmp_path / "out-aside"

    def break_output() -> None:
        out.rename(moved)
        out.write_text("not a folder")

    def mend_output() -> None:
        out.unlink()
        moved.rename(out)

    log = tmp_path / "monitor-1.log"
    with start_subprocess(data_dir=tmp_path / "hub") as hub, Fleet(hub.connection_string) as fleet:
        fleet.add("m1")
        fleet.add("m2")
        # A bound no slow first batch on a busy machine reaches: only the fault restarts it.
        monitor = start_monitor(hub.connection_string, tmp_path, "1", "--stall-seconds", "300")
        try:
            check = alive(monitor, log)
            wait_for(
                lambda: check() or len(statuses(read_transitions(out), "m2")) >= 2,
                timeout=240,
                what="m2 Healthy",
            )
            break_output()
            # Mended in the pause before the first restart (2 s), which then runs on.
            wait_for(
                lambda: check() or "restart 1 of 3" in log.read_text(),
                timeout=120,
                what="the monitor's first restart",
            )
            mend_output()
            written = len(list(out.glob("batch_id=*")))
            wait_for(
                lambda: check() or len(list(out.glob("batch_id=*"))) > written + 2,
                timeout=120,
                what="batches of the restarted query",
            )
            break_output()  # for good
            code = monitor.wait(180)
        finally:
            if monitor.poll() is None:
                monitor.send_signal(signal.SIGKILL)
                monitor.wait(30)
    text = log.read_text()
    assert code == 1, text[-3000:]
    said = [line for line in text.splitlines() if line.startswith("monitor: ")]
    assert said[0].startswith("monitor: query heartbeat_monitor: stopped with an error in batch ")
    assert said[1] == (
        "monitor: restart 1 of 3 in 2 s, on the same checkpoint, because its query stopped "
        "with an error."
    )
    # The restart ran on: the next failure begins a new count.
    assert said[2].startswith("monitor: query heartbeat_monitor: stopped with an error in batch ")
    assert said[3] == said[1]
    starts = said[4::2]
    assert len(starts) == 3 and all(
        line.startswith("monitor: its query could not start: FileExistsError: [Errno 17] File")
        for line in starts
    ), said
    assert said[5::2] == [
        "monitor: restart 2 of 3 in 2 s, on the same checkpoint, because its query could not "
        "start.",
        "monitor: restart 3 of 3 in 2 s, on the same checkpoint, because its query could not "
        "start.",
        "monitor: giving up after 3 restart(s) in a row without a completed micro-batch: "
        "exiting with code 1, for a supervisor to act on the sentences above.",
    ]
    chains_are_whole(read_transitions(moved))  # none lost, none repeated across the restart


def test_a_monitor_whose_hub_does_not_answer_notices_the_stall_and_exits_1(tmp_path):
    """The hub's process suspended before the monitor starts: connections open and nothing
    answers, so the first micro-batch waits and no report comes. The monitor stops the query,
    restarts it, and gives up. (A hub that hangs once the monitor runs only stops the data:
    the source keeps what it received, and its batches go on, empty.)"""
    log = tmp_path / "monitor-1.log"
    with start_subprocess(data_dir=tmp_path / "hub") as hub:
        os.kill(hub.pid, signal.SIGSTOP)
        try:
            monitor = start_monitor(
                hub.connection_string, tmp_path, "1", "--stall-seconds", "20", "--max-restarts", "1"
            )
            try:
                code = monitor.wait(300)
            finally:
                if monitor.poll() is None:
                    monitor.send_signal(signal.SIGKILL)
                    monitor.wait(30)
        finally:
            os.kill(hub.pid, signal.SIGCONT)
    text = log.read_text()
    assert code == 1, text[-3000:]
    said = [line for line in text.splitlines() if line.startswith("monitor: ")]
    stall = (
        "monitor: query heartbeat_monitor: no progress for {} s, more than the 20 s allowed: it "
        "has not finished a micro-batch since it started (last sign of progress at "
    )
    head, tail = stall.split("{}")
    assert len(said) == 4, said
    for line in said[0], said[2]:
        assert line.startswith(head) and tail in line, line
        assert line.endswith(f"Spark's log may say where it waits: {LOG_FILE}"), line
    assert said[1] == (
        "monitor: restart 1 of 1 in 2 s, on the same checkpoint, because its query stalled."
    )
    assert said[3] == (
        "monitor: giving up after 1 restart(s) in a row without a completed micro-batch: "
        "exiting with code 1, for a supervisor to act on the sentences above."
    )


def test_a_retirement_not_longer_than_the_timeout_is_refused_in_a_sentence(tmp_path):
    out = subprocess.run(
        [
            *command(
                "Endpoint=sb://127.0.0.1:1/",
                tmp_path / "checkpoint",
                tmp_path / "output",
                "--timeout-seconds",
                "7200",
                "--retire-after-hours",
                "1",
            )
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    assert "a machine must be Unhealthy before it is forgotten" in out.stderr
    assert "Traceback" not in out.stderr
