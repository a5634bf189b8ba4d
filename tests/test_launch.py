"""`nox -s lab`: the hub and JupyterLab on the labs; a kernel there reaches the hub, its terminal
runs the course's commands, and a new learner gets no news pop-up."""

from __future__ import annotations

import json
import shutil
import signal
import sys
import urllib.request
from pathlib import Path

import pytest
from azure.eventhub import EventHubConsumerClient
from jupyter_support import TOKEN, running_jupyterlab


def _call(url: str, method: str = "GET", body: dict | None = None):
    request = urllib.request.Request(
        url,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"null")


def test_jupyterlab_serves_the_labs_with_a_hub_and_stops_cleanly(tmp_path):
    with running_jupyterlab(tmp_path) as lab:
        listing = _call(f"{lab.base}/api/contents/00-orientation")
        assert "00-orientation.ipynb" in {item["name"] for item in listing["content"]}
        assert _call(f"{lab.base}/api/kernels", "POST", {"name": "python3"})["name"] == "python3"
        html = urllib.request.urlopen(f"{lab.base}/lab?token={TOKEN}", timeout=10).read().decode()
        assert "JupyterLab" in html

        announced = lab.line_starting("Event Hubs emulator: ").split(": ", 1)[1].strip()
        client = EventHubConsumerClient.from_connection_string(
            announced, consumer_group="$Default", eventhub_name="heartbeats"
        )
        with client:
            assert client.get_partition_ids() == ["0", "1", "2", "3"]

        lab.process.send_signal(signal.SIGINT)
        assert lab.process.wait(timeout=60) == 0


def test_two_launchers_run_side_by_side_each_with_a_hub_of_its_own(tmp_path):
    # As a test beside a learner's `nox -s lab`: the second must not be refused the hub folder.
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {"TMPDIR": str(temp)}
    with (
        running_jupyterlab(tmp_path / "one", env=env) as one,
        running_jupyterlab(tmp_path / "two", env=env) as two,
    ):
        hubs = [
            lab.line_starting("Event Hubs emulator: ").split(": ", 1)[1].strip()
            for lab in (one, two)
        ]
        assert hubs[0] != hubs[1]
        for announced in hubs:
            client = EventHubConsumerClient.from_connection_string(
                announced, consumer_group="$Default", eventhub_name="heartbeats"
            )
            with client:
                assert client.get_partition_ids() == ["0", "1", "2", "3"]
        apart = [
            lab
            for lab in (one, two)
            if any("keeps its events in a temporary folder" in line for line in lab.output)
        ]
        assert two in apart, "".join(two.output)
        for lab in (one, two):
            lab.process.send_signal(signal.SIGINT)
            assert lab.process.wait(timeout=60) == 0
    assert list(temp.iterdir()) == []  # the hub folders of their own are gone


def _terminal_output(base: str, cwd: str, command: str, until: str, timeout: float = 60) -> str:
    """Type ``command`` into a new JupyterLab terminal opened in ``cwd`` (as File > New >
    Terminal opens it in the file browser's folder); its output up to ``until``, no colours.
    (``until`` must not be in ``command`` itself: the shell echoes what is typed.)"""
    import re
    import time

    import websocket

    name = _call(f"{base}/api/terminals", "POST", {"cwd": cwd})["name"]
    socket = websocket.create_connection(
        f"{base.replace('http', 'ws', 1)}/terminals/websocket/{name}?token={TOKEN}", timeout=5
    )
    output = ""
    try:
        socket.send(json.dumps(["stdin", command + "\r"]))
        deadline = time.monotonic() + timeout
        while until not in output:
            assert time.monotonic() < deadline, f"the terminal never printed {until}:\n{output}"
            try:
                kind, *payload = json.loads(socket.recv())
            except websocket.WebSocketTimeoutException:
                continue
            if kind == "stdout":
                output += payload[0]
    finally:
        socket.close()
        _call(f"{base}/api/terminals/{name}", "DELETE")
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", output)


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_the_notebooks_commands_run_in_jupyterlabs_terminal(tmp_path, shell):
    program = shutil.which(shell)
    if program is None:
        pytest.skip(f"no {shell} on this machine")
    # A fresh machine: nothing of the course on the PATH the launcher is started with (nox
    # runs it with the course's bin folder first; a learner's shell knows neither that nor
    # .venv), and a learner whose shell settings put another Python first (pyenv, conda).
    home = tmp_path / "home"
    other = home / "other-python" / "bin"
    other.mkdir(parents=True)
    for name in ("python", "nox"):
        (other / name).write_text("#!/bin/sh\necho not the course's\n")
        (other / name).chmod(0o755)
    for rc in (".bashrc", ".zshrc"):
        (home / rc).write_text(f'export PATH="{other}:$PATH"\n')
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "SHELL": program}
    with running_jupyterlab(tmp_path, env=env) as lab:
        # The terminal opens in labs/ (or a lab's folder), not beside noxfile.py.
        output = _terminal_output(
            lab.base,
            "00-orientation",
            "pwd; nox --version; nox -l; python -c "
            "'import sys; print(sys.prefix)'; echo DONE-$((40 + 2))",
            "DONE-42",
        )
    assert "command not found" not in output and "Failed to load" not in output, output
    assert "not the course's" not in output, output
    assert "labs/00-orientation" in output, output
    assert "2026.10.20" in output, output
    assert "check -> Grade your labs" in output, output
    assert str(Path(sys.prefix)) in output, output  # `python` there is the course's


def test_a_new_learner_is_not_asked_about_jupyter_news(tmp_path):
    with running_jupyterlab(tmp_path) as lab:
        # The learner's own settings start empty: only the course's defaults apply.
        for own in (tmp_path / "jupyter-settings").rglob("*.jupyterlab-settings"):
            own.unlink()
        settings = _call(f"{lab.base}/lab/api/settings/@jupyterlab/apputils-extension:notification")
    defaults = settings["schema"]["properties"]
    assert defaults["fetchNews"]["default"] == "false", defaults["fetchNews"]
    assert defaults["checkForUpdates"]["default"] is False, defaults["checkForUpdates"]


def test_the_launcher_says_which_address_to_open_once_jupyterlab_answers(tmp_path):
    # Jupyter's own banner lists several addresses among its log lines; the course prints one
    # line of its own, after the emulator's, once the address it names answers.
    with running_jupyterlab(tmp_path) as lab:
        line = lab.line_starting("Open ", timeout=60)
        url = f"{lab.base}/lab?token={TOKEN}"
        assert url in line, line
        emulator = lab.line_starting("Event Hubs emulator: ")
        assert lab.output.index(emulator) < lab.output.index(line)
        opened = [text for text in lab.output if text.startswith("Open ")]
        assert opened == [line], opened
        assert "JupyterLab" in urllib.request.urlopen(url, timeout=10).read().decode()
