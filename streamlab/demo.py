"""``nox -s demo``: the whole heartbeat monitor in a terminal.

Starts the Event Hubs emulator, a fleet of producers, and the reference monitor
(``python -m streamlab.monitor``), then prints every transition as it lands, with a live
status line. On a schedule, one producer pauses (it turns Unhealthy after the timeout and
Healthy when it resumes), then every producer pauses at once: with processing-time timers
all of them still turn Unhealthy, which lab 03's event-time design cannot do. Ctrl-C stops
everything.
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

from streamlab.paths import BUILD_DIR, REPO_ROOT

_COLOURS = {"Initializing": "34", "Healthy": "32", "Unhealthy": "31"}


@dataclass
class Step:
    at: float  # seconds after the first transition
    action: str  # "pause" or "resume"
    machines: list[str]


def schedule(names: list[str], pause_after: float, pause_for: float) -> list[Step]:
    """One machine pauses and resumes, then all of them do."""
    one, everyone = names[1:2] or names[:1], names
    second = pause_after + pause_for + pause_after
    return [Step(pause_after, "pause", one), Step(pause_after + pause_for, "resume", one),
            Step(second, "pause", everyone), Step(second + pause_for, "resume", everyone)]


def _paint(status: str, text: str, colour: bool) -> str:
    return f"\033[{_COLOURS.get(status, '90')}m{text}\033[0m" if colour else text


def _line(row: dict, colour: bool) -> str:
    when = row["last_status_change_time"].strftime("%H:%M:%S.%f")[:-3]
    before = row["previous_status"] or "(new)"
    return f"{when}  {row['machine_name']:<12} {before:>12} -> {_paint(row['status'], row['status'], colour)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nox -s demo --", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--pause-after", type=float, default=15.0,
                        help="seconds of steady running before the first pause")
    parser.add_argument("--pause-for", type=float, default=10.0)
    parser.add_argument("--duration", type=float, default=None,
                        help="stop after this many seconds (default: run until Ctrl-C)")
    parser.add_argument("--work-dir", type=Path, default=BUILD_DIR / "demo",
                        help="hub log, checkpoint and transitions (emptied first)")
    args = parser.parse_args(argv)

    from streamlab.fleet import Fleet
    from streamlab.hub import start_subprocess
    from streamlab.monitor import read_transitions

    work = args.work_dir
    if work.exists():
        shutil.rmtree(work)
    colour = sys.stdout.isatty()
    print("Starting the Event Hubs emulator...", flush=True)
    hub = start_subprocess(data_dir=work / "hub")
    fleet = Fleet(hub.connection_string)
    names = [fleet.add().name for _ in range(args.producers)]
    print(f"{len(names)} producers sending one heartbeat a second. Starting Spark "
          "(the first transitions take 15-30 s)...", flush=True)
    monitor = subprocess.Popen(
        [sys.executable, "-m", "streamlab.monitor", "--connection-string", hub.connection_string,
         "--checkpoint", str(work / "checkpoint"), "--output", str(work / "transitions")],
        cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "STREAMLAB_SPARK_MASTER": os.environ.get("STREAMLAB_SPARK_MASTER", "local[2]")})

    stopping = False

    def _stop(signum, frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    began = time.monotonic()
    steps = schedule(names, args.pause_after, args.pause_for)
    first_seen: float | None = None
    shown = 0
    status = dict.fromkeys(names, "unknown")
    try:
        while not stopping:
            if args.duration and time.monotonic() - began > args.duration:
                break
            if monitor.poll() is not None:
                print("\nThe monitor stopped:\n" + monitor.stderr.read()[-2000:], file=sys.stderr)
                return 1
            rows = read_transitions(work / "transitions")
            for row in rows[shown:]:
                status[row["machine_name"]] = row["status"]
                print(("\r\033[K" if colour else "") + _line(row, colour), flush=True)
            shown = len(rows)
            if rows and first_seen is None:
                first_seen = time.monotonic()
            while first_seen is not None and steps and time.monotonic() - first_seen >= steps[0].at:
                step = steps.pop(0)
                for name in step.machines:
                    getattr(fleet, step.action)(name)
                print(f"--- {step.action} {', '.join(step.machines)}", flush=True)
            if colour:
                board = "  ".join(_paint(s, f"● {n}", True) for n, s in status.items())
                print(f"\r\033[K{board}  | sent {fleet.events_sent}", end="", flush=True)
            time.sleep(0.25)
    finally:
        print("\nStopping...", flush=True)
        fleet.stop()
        monitor.terminate()
        try:
            monitor.wait(60)
        except subprocess.TimeoutExpired:
            monitor.kill()
        hub.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
