"""Browser-test support: the course's JupyterLab (``streamlab.tooling.lab_launcher``) started for a test and
stopped after, Run All that waits for the kernel, and the website built and served locally."""

from __future__ import annotations

import functools
import http.server
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from streamlab.paths import REPO_ROOT

TOKEN = "course-test-token"


def notebook_folder(tmp_path: Path, name: str, cells: list[str]) -> Path:
    """A folder ``notebooks`` in ``tmp_path`` holding one notebook of these code cells."""
    import nbformat

    folder = tmp_path / "notebooks"
    folder.mkdir()
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(notebook, folder / name)
    return folder


def course_pythonpath() -> str:
    """PYTHONPATH for a kernel that imports the course's package from this repository."""
    return os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class RunningLab:
    base: str
    process: subprocess.Popen
    lines: queue.Queue[str]
    output: list[str] = field(default_factory=list)

    def line_starting(self, prefix: str, timeout: float = 60) -> str:
        """The first output line starting with ``prefix`` (bounded wait)."""
        for line in self.output:
            if line.startswith(prefix):
                return line
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                continue
            self.output.append(line)
            if line.startswith(prefix):
                return line
        raise AssertionError(f"the launcher never printed {prefix!r}:\n" + "".join(self.output))


def lab_settings(tmp_path: Path, settings: dict[str, dict]) -> None:
    """Write JupyterLab settings for :func:`running_jupyterlab` in ``tmp_path``, by plugin
    (``"notebook-extension/tracker"``: its values)."""
    root = tmp_path / "jupyter-settings" / "@jupyterlab"
    for plugin, values in settings.items():
        path = root / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


@contextmanager
def running_jupyterlab(
    tmp_path: Path, *args: str, env: dict | None = None, hub: bool = True
) -> Iterator[RunningLab]:
    """``python -m streamlab.tooling.lab_launcher --no-browser`` on a free port, with private settings.

    ``hub=False`` starts JupyterLab alone (``args`` go to ``jupyter lab``), for a test that
    needs no Event Hubs emulator.
    """
    # A private settings folder: no news pop-up over screenshots, no workspace left behind.
    lab_settings(
        tmp_path,
        {"apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False}},
    )
    environment = {
        **os.environ,
        **(env or {}),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "jupyter-settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "jupyter-workspaces"),
    }
    port = free_port()
    if hub:
        command = [
            sys.executable,
            "-m",
            "streamlab.tooling.lab_launcher",
            "--no-browser",
            f"--port={port}",
            f"--token={TOKEN}",
            "--hub-port=0",
            *args,
        ]
    else:
        from streamlab.tooling.lab_launcher import jupyter_command

        folders = [a.partition("=")[2] for a in args if a.startswith("--notebook-dir=")]
        command = [
            *jupyter_command(port, False, TOKEN, *folders[-1:]),
            *(a for a in args if not a.startswith("--notebook-dir=")),
        ]
    process = subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(
        target=lambda: [lines.put(line) for line in process.stdout], daemon=True
    ).start()
    lab = RunningLab(f"http://127.0.0.1:{port}", process, lines)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{lab.base}/api/status?token={TOKEN}", timeout=5).read()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("JupyterLab did not start:\n" + _drain(lab)) from None
                time.sleep(0.2)
        yield lab
    finally:
        if process.poll() is None:
            # SIGTERM, not SIGKILL: the launcher then stops JupyterLab (which shuts its
            # kernels and their Spark down) and the hub. SIGKILL would orphan them all.
            process.terminate()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _drain(lab: RunningLab) -> str:
    while not lab.lines.empty():
        lab.output.append(lab.lines.get())
    return "".join(lab.output)


def run_all_cells(page, scope: str = "") -> None:
    """Run > Run All, once the kernel has really started executing the first cell.

    The page can show an idle kernel before its connection is up, and Run All then clears
    the cells without running them: try again until the first cell shows ``[*]`` or ``[1]``.
    ``scope`` narrows the first cell to one notebook panel when several are open.
    """
    import re

    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect

    page.get_by_text("| Idle").wait_for(timeout=60_000)
    prompt = page.locator(f"{scope} .jp-CodeCell .jp-InputPrompt".strip()).first
    deadline = time.monotonic() + 60
    while True:
        page.locator(".lm-MenuBar-item", has_text="Run").first.click()
        page.locator(".lm-Menu-item[data-command='runmenu:run-all']").click()
        try:
            expect(prompt).to_have_text(re.compile(r"\[[*\d]+\]"), timeout=5_000)
            return
        except (AssertionError, PlaywrightTimeout):
            if time.monotonic() > deadline:
                raise


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def build_site(target: Path) -> Path:
    """The course website built strictly into ``target``, as ``nox -s site`` builds it."""
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(target)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return target


@contextmanager
def serving(folder: Path) -> Iterator[str]:
    """Serve ``folder`` on 127.0.0.1; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
