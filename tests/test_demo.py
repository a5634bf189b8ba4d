"""`nox -s demo`: Initializing, Healthy, Unhealthy after a pause, Healthy again; all red together."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time

from streamlab.paths import REPO_ROOT


def test_the_demo_shows_every_transition_and_stops_cleanly(tmp_path):
    demo = subprocess.Popen(
        [sys.executable, "-m", "streamlab.demo", "--producers", "2", "--pause-after", "8",
         "--pause-for", "9", "--work-dir", str(tmp_path / "demo")],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(l) for l in demo.stdout], daemon=True).start()
    seen: list[str] = []
    wanted = [
        ("Producer 2", "(new) -> Initializing"), ("Producer 2", "Initializing -> Healthy"),
        ("Producer 2", "Healthy -> Unhealthy"), ("Producer 2", "Unhealthy -> Healthy"),
        ("Producer 1", "Healthy -> Unhealthy"),  # when every producer pauses
    ]
    deadline = time.monotonic() + 240
    try:
        while wanted and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                assert demo.poll() is None, "the demo ended early:\n" + "".join(seen)
                continue
            seen.append(line)
            if " ".join(line.split()[1:]) == " ".join(wanted[0]):
                wanted.pop(0)
        assert not wanted, f"never saw {wanted[0]}; output:\n" + "".join(seen)
    finally:
        demo.send_signal(signal.SIGINT)
        code = demo.wait(120)
    assert code == 0
