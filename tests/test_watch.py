"""``python -m streamlab.grading.watch``: a save regrades the lab, Ctrl-C stops it cleanly."""

from __future__ import annotations

import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest
from lab00_answers import SOLVED_0_1

from streamlab.paths import REPO_ROOT

LAB = "00-orientation"


class _Output:
    """The watcher's output lines, each with the time it arrived."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.lines: queue.Queue[tuple[float, str]] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, args=(process,), daemon=True).start()

    def _read(self, process: subprocess.Popen) -> None:
        for line in process.stdout:
            self.lines.put((time.monotonic(), line))

    def wait_for(self, text: str, timeout: float) -> float:
        """When the first line from now on containing ``text`` arrived."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                at, line = self.lines.get(timeout=0.1)
            except queue.Empty:
                continue
            self.seen.append(line)
            if text in line:
                return at
        raise AssertionError(f"no line with {text!r} within {timeout} s:\n" + "".join(self.seen))


@pytest.fixture
def watcher(tmp_path):
    labs = tmp_path / "labs"
    shutil.copytree(REPO_ROOT / "labs" / LAB, labs / LAB)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlab.grading.watch",
            "00",
            "--notebooks",
            str(labs),
            "--json",
            str(tmp_path / "grade.json"),
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        yield process, _Output(process), labs / LAB / f"{LAB}.ipynb"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _save(notebook: Path, source_0_1: str) -> None:
    content = nbformat.read(notebook, as_version=4)
    cell = next(c for c in content.cells if "exercise-0.1" in c.metadata.get("tags", []))
    cell.source = source_0_1
    # Written elsewhere and renamed into place, as JupyterLab saves.
    staged = notebook.with_suffix(".saving")
    nbformat.write(content, staged)
    staged.replace(notebook)


def test_a_save_regrades_the_lab_and_ctrl_c_stops_the_watch(watcher):
    process, output, notebook = watcher
    output.wait_for("not started", timeout=60)
    output.wait_for("Watching 00-orientation.ipynb", timeout=60)

    saved = time.monotonic()
    # A burst of saves, longer than the watcher's polling interval, is graded once, as last
    # saved: an attempt, a second one, then the answer.
    for source in (
        "def effective_settings(conf, checkpoint_dir):\n    return {}\n",
        "def effective_settings(conf, checkpoint_dir):\n    return dict(conf)\n",
        SOLVED_0_1,
    ):
        _save(notebook, source)
        time.sleep(0.1)
    started = output.wait_for("00-orientation.ipynb saved: regrading lab 00", timeout=10)
    assert started - saved < 2.0, f"the regrade started {started - saved:.1f} s after the save"
    output.wait_for(" 0.1 ", timeout=60)
    assert "passed" in output.seen[-1], output.seen[-1]
    output.wait_for("Watching 00-orientation.ipynb", timeout=60)
    time.sleep(1.0)  # time enough for a second regrade to start, were the burst seen twice

    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == 0
    output.wait_for("Stopped watching.", timeout=5)
    assert "Traceback" not in "".join(output.seen)
    assert sum("saved: regrading" in line for line in output.seen) == 1, "".join(output.seen)


def test_an_unknown_lab_is_one_sentence(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "streamlab.grading.watch", "42", "--notebooks", str(tmp_path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("there is no lab '42'; the labs are 00, "), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
