"""``nox -s demo``: the whole heartbeat monitor in a terminal.

Starts the Event Hubs emulator, a fleet of producers, and the reference monitor
(``python -m streamlab.monitor``), then prints what the colours mean, what it is waiting for
while Spark starts, and every transition as it lands (when the machine changed and, when the
monitor's rows say so, when the monitor noticed), with a live status line under them. On a
schedule, one producer pauses (it turns Unhealthy after the timeout and Healthy when it
resumes), then every producer pauses at once: all of them still turn Unhealthy, which lab 03's
event-time design cannot do. Last, the monitor is killed with SIGKILL while the producers keep
sending, and started again on the same checkpoint after ``--down-for`` seconds: it picks up
where it stopped, and no machine that kept sending turns red. Ctrl-C stops everything.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from streamlab.paths import BUILD_DIR, REPO_ROOT

_COLOURS = {"Initializing": "34", "Healthy": "32", "Unhealthy": "31"}
#: What each colour of the status line means, in the order a machine meets them.
LEGEND = [
    ("unknown", "grey", "no transition yet"),
    ("Initializing", "blue", "first heartbeat seen"),
    ("Healthy", "green", "heartbeats arriving"),
    ("Unhealthy", "red", "no heartbeat for the timeout (5 s)"),
]
#: What the demo waits for while Spark starts, told by the files the monitor's query writes.
STARTUP = [
    ("checkpoint/metadata", "the query started; reading the hub"),
    ("checkpoint/offsets/0", "first micro-batch planned"),
    ("checkpoint/commits/0", "first micro-batch done"),
]


@dataclass
class Step:
    at: float  # seconds after the first transition
    action: str  # "pause", "resume" or "crash" (the monitor is killed and started again)
    machines: list[str]


def schedule(
    names: list[str], pause_after: float, pause_for: float, crash: bool = True
) -> list[Step]:
    """One machine pauses and resumes, then all of them do; then the monitor crashes."""
    one, everyone = names[1:2] or names[:1], names
    second = pause_after + pause_for + pause_after
    steps = [
        Step(pause_after, "pause", one),
        Step(pause_after + pause_for, "resume", one),
        Step(second, "pause", everyone),
        Step(second + pause_for, "resume", everyone),
    ]
    if crash:
        steps.append(Step(second + pause_for + pause_after, "crash", []))
    return steps


def _paint(status: str, text: str, colour: bool) -> str:
    return f"\033[{_COLOURS.get(status, '90')}m{text}\033[0m" if colour else text


def _clock(moment) -> str:
    return moment.strftime("%H:%M:%S.%f")[:-3]


def legend(colour: bool) -> str:
    """One line: what each colour of the status line means."""
    return "Legend: " + "   ".join(
        _paint(status, f"\u25cf {status if status != 'unknown' else 'no status'}", colour)
        + f" ({name}): {meaning}"
        for status, name, meaning in LEGEND
    )


def _line(row: dict, colour: bool) -> str:
    """A transition: when the machine changed, and when the monitor noticed if the row says."""
    before = row["previous_status"] or "(new)"
    line = (
        f"{_clock(row['last_status_change_time'])}  {row['machine_name']:<12} {before:>12} -> "
        f"{_paint(row['status'], row['status'], colour)}"
    )
    noticed = row.get("noticed_time")
    if noticed is not None:
        lag = (noticed - row["last_status_change_time"]).total_seconds()
        line += f"{' ' * (12 - len(row['status']))}  (noticed {_clock(noticed)}, {lag:+.1f} s)"
    return line


class _Terminal:
    """Lines that scroll, and on a terminal one status line kept under them.

    Every line first clears the status line, so nothing runs into it.
    """

    def __init__(self, out: TextIO, colour: bool):
        self.out, self.colour, self._status_shown = out, colour, False

    def say(self, text: str) -> None:
        self.out.write(("\r\033[K" if self._status_shown else "") + text + "\n")
        self.out.flush()
        self._status_shown = False

    def status(self, text: str) -> None:
        if self.colour:  # a status line only where it can be rewritten in place
            self.out.write("\r\033[K" + text)
            self.out.flush()
            self._status_shown = True


def _newest_batch(checkpoint: Path, log: str) -> int:
    """The newest batch id in the checkpoint's ``offsets`` (planned) or ``commits`` (done) log."""
    folder = checkpoint / log
    ids = [int(p.name) for p in folder.iterdir() if p.name.isdigit()] if folder.is_dir() else []
    return max(ids, default=-1)


def _waiting_for(startup: list[tuple[str, str]]) -> str:
    """What the status line says the demo is waiting for while there is no transition yet."""
    if len(startup) == len(STARTUP):
        return "starting Spark (the JVM, then the query)"
    if startup:
        return f"waiting for: {startup[0][1]}"
    return "waiting for the first transitions"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="nox -s demo --",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument(
        "--pause-after",
        type=float,
        default=15.0,
        help="seconds of steady running before the first pause",
    )
    parser.add_argument("--pause-for", type=float, default=10.0)
    parser.add_argument(
        "--duration",
        type=float,
        default=None,
        help="stop after this many seconds (default: run until Ctrl-C)",
    )
    parser.add_argument(
        "--down-for",
        type=float,
        default=8.0,
        help="seconds the monitor stays down after it is killed (0: no crash)",
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=BUILD_DIR / "demo",
        help="hub log, checkpoint and transitions (emptied first)",
    )
    args = parser.parse_args(argv)

    from streamlab.fleet import Fleet
    from streamlab.hub import start_subprocess
    from streamlab.monitor import read_transitions

    work = args.work_dir
    if work.exists():
        shutil.rmtree(work)
    colour = sys.stdout.isatty()
    screen = _Terminal(sys.stdout, colour)
    screen.say("Starting the Event Hubs emulator...")
    hub = start_subprocess(data_dir=work / "hub")
    fleet = Fleet(hub.connection_string)
    names = [fleet.add().name for _ in range(args.producers)]
    screen.say(f"{len(names)} producers sending one heartbeat a second.")
    screen.say(legend(colour))
    screen.say("Starting Spark and the monitor's query (the first transitions take 15-30 s)...")

    def start_monitor() -> subprocess.Popen:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlab.monitor",
                "--connection-string",
                hub.connection_string,
                "--checkpoint",
                str(work / "checkpoint"),
                "--output",
                str(work / "transitions"),
            ],
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={
                **os.environ,
                "STREAMLAB_SPARK_MASTER": os.environ.get("STREAMLAB_SPARK_MASTER", "local[2]"),
            },
        )

    monitor: subprocess.Popen | None = start_monitor()
    restart_at: float | None = None  # when a killed monitor starts again
    back_after: int | None = None  # the newest batch planned before the crash
    since_crash = 0  # transitions shown before the crash

    stopping = False

    def _stop(signum, frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    began = time.monotonic()
    steps = schedule(names, args.pause_after, args.pause_for, crash=args.down_for > 0)
    startup = list(STARTUP)
    first_seen: float | None = None
    shown = 0
    status = dict.fromkeys(names, "unknown")
    try:
        while not stopping:
            elapsed = time.monotonic() - began
            if args.duration and elapsed > args.duration:
                break
            if monitor is not None and monitor.poll() is not None:
                screen.say("The monitor stopped:\n" + monitor.stderr.read()[-2000:])
                return 1
            if restart_at is not None and time.monotonic() >= restart_at:
                restart_at, monitor = None, start_monitor()
                screen.say(
                    f"--- monitor started again on the same checkpoint after "
                    f"{args.down_for:g} s down; it reads what the producers sent meanwhile"
                )
            if (
                back_after is not None
                and _newest_batch(work / "checkpoint", "commits") > back_after
            ):
                back_after = None
                red = sorted(
                    {
                        r["machine_name"]
                        for r in read_transitions(work / "transitions")[since_crash:]
                        if r["status"] == "Unhealthy"
                    }
                )
                screen.say(
                    "--- monitor caught up: its first new batch after the crash is done; "
                    + (
                        f"turned red since the crash: {', '.join(red)}"
                        if red
                        else "no machine turned red, none stopped sending"
                    )
                )
            while startup and (work / startup[0][0]).exists():
                screen.say(f"[{elapsed:3.0f} s] {startup.pop(0)[1]}")
            rows = read_transitions(work / "transitions")
            for row in rows[shown:]:
                status[row["machine_name"]] = row["status"]
                screen.say(_line(row, colour))
            shown = len(rows)
            if rows and first_seen is None:
                first_seen = time.monotonic()
            while first_seen is not None and steps and time.monotonic() - first_seen >= steps[0].at:
                step = steps.pop(0)
                if step.action == "crash":
                    # A batch planned before the crash is replayed as it was: the first batch
                    # planned after the restart is the one that reads the downtime.
                    back_after, since_crash = _newest_batch(work / "checkpoint", "offsets"), shown
                    monitor.kill()
                    monitor.wait()
                    monitor, restart_at = None, time.monotonic() + args.down_for
                    screen.say(
                        "--- crash: the monitor is killed with SIGKILL; the producers keep sending"
                    )
                    continue
                for name in step.machines:
                    getattr(fleet, step.action)(name)
                screen.say(f"--- {step.action} {', '.join(step.machines)}")
            board = "  ".join(_paint(s, f"\u25cf {n}", True) for n, s in status.items())
            waiting = "" if rows else f"  | {_waiting_for(startup)} ({elapsed:.0f} s)"
            screen.status(f"{board}  | sent {fleet.events_sent}{waiting}")
            time.sleep(0.25)
    finally:
        screen.say("Stopping...")
        fleet.stop()
        if monitor is not None:
            monitor.terminate()
            try:
                monitor.wait(60)
            except subprocess.TimeoutExpired:
                monitor.kill()
        hub.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
