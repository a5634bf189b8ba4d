"""`nox -s demo`: Initializing, Healthy, Unhealthy after a pause, Healthy again; all red together;
then a SIGKILL of the monitor and a restart on its checkpoint, after which nobody turns red.

It says what the colours mean and what it waits for while Spark starts, and every
announcement and transition is a line of its own.
"""

from __future__ import annotations

import datetime as dt
import io
import queue
import signal
import subprocess
import sys
import threading
import time

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
