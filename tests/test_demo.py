"""`nox -s demo`: Initializing, Healthy, Unhealthy after a pause, Healthy again; all red together;
then a SIGKILL of the monitor and a restart on its checkpoint, after which nobody turns red.

It says what the colours mean and what it waits for while Spark starts, and every
announcement and transition is a line of its own.
"""

from __future__ import annotations

import datetime as dt
import io
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

from streamlab import demo
from streamlab.paths import REPO_ROOT

CHANGED = dt.datetime(2026, 11, 24, 6, 0, 0, 123000)


def test_a_transition_shows_when_the_monitor_noticed_it_when_the_row_says():
    row = {
        "machine_name": "Producer 1",
        "previous_status": "Healthy",
        "status": "Unhealthy",
        "last_status_change_time": CHANGED,
    }
    assert demo._line(row, colour=False).split() == [
        "06:00:00.123",
        "Producer",
        "1",
        "Healthy",
        "->",
        "Unhealthy",
    ]
    noticed = {**row, "noticed_time": CHANGED + dt.timedelta(seconds=0.8)}
    line = demo._line(noticed, colour=False)
    assert line.startswith(demo._line(row, colour=False)), line
    assert line.endswith("(noticed 06:00:00.923, +0.8 s)"), line


def test_the_legend_names_every_colour_of_the_status_line():
    text = demo.legend(colour=False)
    for _status, colour, _ in demo.LEGEND:
        assert colour in text
    assert all(status in text for status in ("Initializing", "Healthy", "Unhealthy"))


def test_an_announcement_never_runs_into_the_status_line():
    out = io.StringIO()
    screen = demo._Terminal(out, colour=True)
    screen.status("● Producer 1  | sent 220")
    screen.say("--- pause Producer 2")
    screen.status("● Producer 1  | sent 221")
    # What a terminal shows: the status line is cleared before the announcement is written.
    assert out.getvalue() == (
        "\r\033[K● Producer 1  | sent 220"
        "\r\033[K--- pause Producer 2\n"
        "\r\033[K● Producer 1  | sent 221"
    )


def test_the_demo_shows_every_transition_and_stops_cleanly(tmp_path):
    demo_process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlab.demo",
            "--producers",
            "2",
            "--pause-after",
            "8",
            "--pause-for",
            "9",
            "--down-for",
            "6",
            "--work-dir",
            str(tmp_path / "demo"),
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(
        target=lambda: [lines.put(line) for line in demo_process.stdout], daemon=True
    ).start()
    seen: list[str] = []
    wanted = [
        ("Producer 2", "(new) -> Initializing"),
        ("Producer 2", "Initializing -> Healthy"),
        ("Producer 2", "Healthy -> Unhealthy"),
        ("Producer 2", "Unhealthy -> Healthy"),
        ("Producer 1", "Healthy -> Unhealthy"),  # when every producer pauses
        ("---", "crash:"),  # the monitor is killed with SIGKILL while everyone sends
        ("---", "monitor caught up:"),  # its first batch planned after the restart is done
    ]
    deadline = time.monotonic() + 420
    try:
        while wanted and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                assert demo_process.poll() is None, "the demo ended early:\n" + "".join(seen)
                continue
            seen.append(line)
            # time, machine, transition; then perhaps when the monitor noticed it
            if " ".join(line.split()[1:6]) == " ".join(wanted[0]) or " ".join(
                line.split()
            ).startswith(" ".join(wanted[0])):
                wanted.pop(0)
        assert not wanted, f"never saw {wanted[0]}; output:\n" + "".join(seen)
    finally:
        demo_process.send_signal(signal.SIGINT)
        code = demo_process.wait(120)
    assert code == 0
    first = next(i for i, line in enumerate(seen) if "-> Initializing" in line)
    before = "".join(seen[:first])
    assert "Legend: " in before and "(green)" in before, before
    # While Spark starts, it says what it is waiting for, not only a counter.
    assert "the query started" in before, before
    assert any(line.startswith("--- pause Producer 2") for line in seen), "".join(seen)
    # Back from the crash: nobody stopped sending, so nobody turned red.
    crash = next(i for i, line in enumerate(seen) if line.startswith("--- crash:"))
    after = seen[crash:]
    assert not any("-> Unhealthy" in line for line in after), "".join(after)
    assert any("no machine turned red" in line for line in after), "".join(after)


class FakeMonitor:
    """A monitor process that runs until killed, or has ended with ``code`` and ``output``."""

    def __init__(self, code: int | None = None, output: str = "") -> None:
        self.code, self._output, self.killed = code, output, False

    def poll(self) -> int | None:
        return self.code

    def kill(self) -> None:
        self.killed, self.code = True, -9

    def wait(self, timeout: float | None = None) -> int | None:
        return self.code

    def send_signal(self, sig: int) -> None:
        self.code = -sig

    def output(self) -> str:
        return self._output


class FakeFleet:
    events_sent = 0

    def __init__(self) -> None:
        self.done: list[tuple[str, str]] = []

    def pause(self, name: str) -> None:
        self.done.append(("pause", name))

    def resume(self, name: str) -> None:
        self.done.append(("resume", name))


def _transitions(work, batch: int, rows: list[tuple[str, str, str | None]]) -> None:
    """Transition rows as the monitor writes them: one parquet folder per batch."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = work / "transitions" / f"batch_id={batch}"
    folder.mkdir(parents=True)
    table = pa.table(
        {
            "machine_name": [r[0] for r in rows],
            "status": [r[1] for r in rows],
            "previous_status": pa.array([r[2] for r in rows], pa.string()),
            "last_status_change_time": [CHANGED + dt.timedelta(seconds=batch)] * len(rows),
        }
    )
    pq.write_table(table, folder / "part-00000.parquet")


def _batch(work, log: str, batch: int) -> None:
    (work / "checkpoint" / log).mkdir(parents=True, exist_ok=True)
    (work / "checkpoint" / log / str(batch)).write_text("{}")


class _Hub:
    connection_string = "Endpoint=sb://127.0.0.1:5672"


@pytest.fixture
def crashing(tmp_path):
    """A demo whose only step is the crash, on a fake clock, with fake monitors."""
    now = [0.0]
    started: list[FakeMonitor] = []

    def launch(connection_string, work):
        started.append(FakeMonitor())
        return started[-1]

    out = io.StringIO()
    run = demo.Demo(
        tmp_path, demo._Terminal(out, colour=False), down_for=8, clock=lambda: now[0], launch=launch
    )
    run.hub, run.fleet = _Hub(), FakeFleet()
    run.begin(["Producer 1", "Producer 2"])
    run.steps = [demo.Step(0, "crash", [])]
    return run, now, started, out


def test_the_crash_kills_the_monitor_and_starts_it_again_after_the_downtime(crashing, tmp_path):
    run, now, started, out = crashing
    _transitions(tmp_path, 0, [("Producer 1", "Initializing", None)])
    _batch(tmp_path, "offsets", 0)
    _batch(tmp_path, "offsets", 1)  # planned before the crash: replayed as it was
    assert run.tick() is None
    assert started[0].killed and run.monitor is None
    assert out.getvalue().splitlines()[-1] == (
        "--- crash: the monitor is killed with SIGKILL; the producers keep sending"
    )
    now[0] = 7.9
    assert run.tick() is None and len(started) == 1  # still down
    now[0] = 8.0
    assert run.tick() is None and len(started) == 2 and run.monitor is started[1]
    assert out.getvalue().splitlines()[-1] == (
        "--- monitor started again on the same checkpoint after 8 s down; it reads what the "
        "producers sent meanwhile"
    )
    _batch(tmp_path, "commits", 1)  # the replayed batch: not yet the one after the crash
    run.tick()
    assert "caught up" not in out.getvalue()
    _batch(tmp_path, "commits", 2)
    run.tick()
    assert out.getvalue().splitlines()[-1] == (
        "--- monitor caught up: its first new batch after the crash is done; "
        "no machine turned red, none stopped sending"
    )
    run.tick()
    assert out.getvalue().count("caught up") == 1


def test_after_the_crash_the_catch_up_names_who_turned_red(crashing, tmp_path):
    run, now, started, out = crashing
    _transitions(tmp_path, 0, [("Producer 1", "Initializing", None)])
    run.tick()
    now[0] = 8.0
    run.tick()
    _transitions(tmp_path, 1, [("Producer 2", "Unhealthy", "Healthy")])
    _batch(tmp_path, "commits", 0)
    run.tick()
    catch_up, shown = out.getvalue().splitlines()[-2:]
    assert catch_up.endswith("turned red since the crash: Producer 2")
    assert shown.split()[1:] == ["Producer", "2", "Healthy", "->", "Unhealthy"]


def test_a_monitor_that_dies_ends_the_demo_with_what_it_printed(crashing):
    run, now, started, out = crashing
    run.monitor = FakeMonitor(code=1, output="monitor failed: the query ended\n")
    assert run.tick() == 1
    assert out.getvalue().endswith("The monitor stopped:\nmonitor failed: the query ended\n\n")


def test_a_second_demo_works_in_a_folder_of_its_own(tmp_path):
    screen = demo._Terminal(io.StringIO(), colour=False)
    wanted = tmp_path / "demo"
    wanted.mkdir()
    (wanted / "from an earlier run").write_text("")
    first, lock = demo.work_folder(wanted, screen)
    assert first == wanted and lock is not None and not wanted.exists()  # emptied
    wanted.mkdir()
    (wanted / "the first demo's").write_text("")
    second, none = demo.work_folder(wanted, screen)
    try:
        assert second != wanted and none is None
        assert (wanted / "the first demo's").exists()  # never emptied under the first
        assert "Another demo is using" in screen.out.getvalue()
    finally:
        os.close(lock)
        second.rmdir()
