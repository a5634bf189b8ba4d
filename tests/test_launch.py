"""`nox -s lab`: JupyterLab serves the labs and runs a kernel that can start Spark."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from streamlab.paths import REPO_ROOT

TOKEN = "course-test-token"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str, method: str = "GET", body: dict | None = None):
    request = urllib.request.Request(
        url, method=method, data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"null")


@pytest.fixture
def jupyter():
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlab.launch", "--no-browser", f"--port={port}",
         f"--token={TOKEN}"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            _get(f"{base}/api/status")
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail("JupyterLab did not start:\n" + process.stdout.read())
            time.sleep(0.2)
    yield base, process
    if process.poll() is None:
        process.kill()
        process.wait()


def test_jupyterlab_serves_the_labs_and_stops_cleanly(jupyter):
    base, process = jupyter
    listing = _get(f"{base}/api/contents/00-orientation")
    assert "00-orientation.ipynb" in {item["name"] for item in listing["content"]}
    kernel = _get(f"{base}/api/kernels", "POST", {"name": "python3"})
    assert kernel["name"] == "python3"
    html = urllib.request.urlopen(f"{base}/lab?token={TOKEN}", timeout=10).read().decode()
    assert "JupyterLab" in html
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == 0
