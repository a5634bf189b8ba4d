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
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from streamlab import processes
from streamlab.monitor import command, read_transitions
from streamlab.paths import BUILD_DIR, REPO_ROOT, lock_file

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


def _parser() -> argparse.ArgumentParser:
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
    return parser


def start_monitor(connection_string: str, work: Path) -> processes.Child:
    """The monitor as a child process, on ``local[2]`` unless a master is set."""
    master = os.environ.get("STREAMLAB_SPARK_MASTER", "local[2]")
    return processes.Child(
        command(connection_string, work / "checkpoint", work / "transitions"),
        cwd=REPO_ROOT,
        env={**os.environ, "STREAMLAB_SPARK_MASTER": master},
    )


class Demo:
    """One run of the demo: its hub, fleet, monitor, screen and schedule.

    ``with Demo(...) as demo`` starts the hub, the producers and the monitor; each
    :meth:`tick` (every 0.25 s) narrates what happened since the last one and runs the steps
    that are due. ``clock`` and ``launch`` (which starts the monitor) are for tests.
    """

    def __init__(
        self,
        work: Path,
        screen: _Terminal,
        *,
        producers: int = 4,
        pause_after: float = 15.0,
        pause_for: float = 10.0,
        down_for: float = 8.0,
        duration: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        launch: Callable[[str, Path], processes.Child] = start_monitor,
    ) -> None:
        self.work, self.screen, self.producers = work, screen, producers
        self.pause_after, self.pause_for, self.down_for = pause_after, pause_for, down_for
        self.duration, self._clock, self._launch = duration, clock, launch
        self.hub: Any = None
        self.fleet: Any = None
        self.monitor: processes.Child | None = None
        self.steps: list[Step] = []
        self.status: dict[str, str] = {}
        self.startup = list(STARTUP)
        self.began = clock()
        self.first_seen: float | None = None  # when the first transition was shown
        self.shown = 0  # transitions shown so far
        self.rows: list[dict] = []
        self.restart_at: float | None = None  # when a killed monitor starts again
        self.back_after: int | None = None  # the newest batch planned before the crash
        self.since_crash = 0  # transitions shown before the crash

    # -- start and stop ---------------------------------------------------------------------

    def __enter__(self) -> Demo:
        from streamlab.fleet import Fleet
        from streamlab.hub import start_subprocess

        self.screen.say("Starting the Event Hubs emulator...")
        try:
            self.hub = start_subprocess(data_dir=self.work / "hub")
            self.fleet = Fleet(self.hub.connection_string)
            self.begin([self.fleet.add().name for _ in range(self.producers)])
        except BaseException:
            self.__exit__()
            raise
        return self

    def begin(self, names: list[str]) -> None:
        """Say what runs and what the colours mean, start the monitor and the schedule."""
        colour = self.screen.colour
        self.screen.say(f"{len(names)} producers sending one heartbeat a second.")
        self.screen.say(legend(colour))
        self.screen.say(
            "Starting Spark and the monitor's query (the first transitions take 15-30 s)..."
        )
        self.monitor = self._launch(self.hub.connection_string, self.work)
        self.began = self._clock()
        self.steps = schedule(names, self.pause_after, self.pause_for, crash=self.down_for > 0)
        self.status = dict.fromkeys(names, "unknown")

    def __exit__(self, *exc: object) -> None:
        self.screen.say("Stopping...")
        if self.fleet is not None:
            self.fleet.stop()
        if self.monitor is not None:
            processes.terminate(self.monitor, grace=60)
        if self.hub is not None:
            self.hub.stop()

    # -- one step ---------------------------------------------------------------------------

    def finished(self) -> bool:
        """Whether ``--duration`` has passed."""
        return bool(self.duration) and self._elapsed() > self.duration

    def tick(self) -> int | None:
        """One step of the demo; an exit status when it must end (the monitor failed)."""
        if self._monitor_failed():
            return 1
        self._restart_monitor_if_due()
        self._report_catch_up()
        self._report_startup()
        self._show_new_transitions()
        self._run_due_steps()
        self._draw_status_line()
        return None

    def _elapsed(self) -> float:
        return self._clock() - self.began

    def _monitor_failed(self) -> bool:
        if self.monitor is None or self.monitor.poll() is None:
            return False
        self.screen.say("The monitor stopped:\n" + self.monitor.output()[-2000:])
        return True

    def _restart_monitor_if_due(self) -> None:
        if self.restart_at is None or self._clock() < self.restart_at:
            return
        self.restart_at, self.monitor = None, self._launch(self.hub.connection_string, self.work)
        self.screen.say(
            f"--- monitor started again on the same checkpoint after "
            f"{self.down_for:g} s down; it reads what the producers sent meanwhile"
        )

    def _report_catch_up(self) -> None:
        """Once the first batch planned after the restart is done: who turned red meanwhile."""
        if self.back_after is None or self._newest("commits") <= self.back_after:
            return
        self.back_after = None
        red = sorted(
            {
                r["machine_name"]
                for r in read_transitions(self.work / "transitions")[self.since_crash :]
                if r["status"] == "Unhealthy"
            }
        )
        self.screen.say(
            "--- monitor caught up: its first new batch after the crash is done; "
            + (
                f"turned red since the crash: {', '.join(red)}"
                if red
                else "no machine turned red, none stopped sending"
            )
        )

    def _report_startup(self) -> None:
        while self.startup and (self.work / self.startup[0][0]).exists():
            self.screen.say(f"[{self._elapsed():3.0f} s] {self.startup.pop(0)[1]}")

    def _show_new_transitions(self) -> None:
        self.rows = read_transitions(self.work / "transitions")
        for row in self.rows[self.shown :]:
            self.status[row["machine_name"]] = row["status"]
            self.screen.say(_line(row, self.screen.colour))
        self.shown = len(self.rows)
        if self.rows and self.first_seen is None:
            self.first_seen = self._clock()

    def _run_due_steps(self) -> None:
        while (
            self.first_seen is not None
            and self.steps
            and self._clock() - self.first_seen >= self.steps[0].at
        ):
            step = self.steps.pop(0)
            if step.action == "crash":
                self._crash()
                continue
            for name in step.machines:
                getattr(self.fleet, step.action)(name)
            self.screen.say(f"--- {step.action} {', '.join(step.machines)}")

    def _crash(self) -> None:
        """Kill the monitor with SIGKILL; it starts again after ``down_for`` seconds."""
        # A batch planned before the crash is replayed as it was: the first batch planned
        # after the restart is the one that reads the downtime.
        self.back_after, self.since_crash = self._newest("offsets"), self.shown
        if self.monitor is not None:
            self.monitor.kill()
            self.monitor.wait()
        self.monitor, self.restart_at = None, self._clock() + self.down_for
        self.screen.say("--- crash: the monitor is killed with SIGKILL; the producers keep sending")

    def _draw_status_line(self) -> None:
        board = "  ".join(_paint(s, f"\u25cf {n}", True) for n, s in self.status.items())
        waiting = "" if self.rows else f"  | {_waiting_for(self.startup)} ({self._elapsed():.0f} s)"
        self.screen.status(f"{board}  | sent {self.fleet.events_sent}{waiting}")

    def _newest(self, log: str) -> int:
        return _newest_batch(self.work / "checkpoint", log)


def work_folder(wanted: Path, screen: _Terminal) -> tuple[Path, int | None]:
    """The demo's folder, emptied, and the lock that keeps it; a temporary one (no lock)
    where another demo is using ``wanted``, which must not be emptied under it."""
    wanted.parent.mkdir(parents=True, exist_ok=True)
    lock = lock_file(wanted.with_name(wanted.name + ".lock"))
    if lock is None:
        screen.say(
            f"Another demo is using {wanted}; this one works in a temporary folder, "
            "deleted when it stops."
        )
        return Path(tempfile.mkdtemp(prefix="streamlab-demo-")), None
    if wanted.exists():
        shutil.rmtree(wanted)
    return wanted, lock


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    screen = _Terminal(sys.stdout, sys.stdout.isatty())
    stop = processes.stop_requested()
    work, lock = work_folder(args.work_dir, screen)
    demo = Demo(
        work,
        screen,
        producers=args.producers,
        pause_after=args.pause_after,
        pause_for=args.pause_for,
        down_for=args.down_for,
        duration=args.duration,
    )
    try:
        with demo:
            while not stop.is_set() and not demo.finished():
                code = demo.tick()
                if code is not None:
                    return code
                stop.wait(0.25)
    finally:
        if lock is None:
            shutil.rmtree(work, ignore_errors=True)
        else:
            os.close(lock)
    return 0


if __name__ == "__main__":
    sys.exit(main())
