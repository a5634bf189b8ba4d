"""Why the course's session talks to Spark's Python workers over Unix domain sockets.

A Python ``transformWithState`` task starts a state server on a loopback TCP port and waits for
its Python worker to connect. The server accepts one connection only: whatever reaches it first
is served. Any other process on the machine that connects to that port first (a client that
tries a port it believes free, a late Python worker, a reconnecting AMQP client) leaves the
real worker waiting for ever, and the query with it: PySpark 4.3 then logs an
``AssertionError`` from ``TransformWithStateInPySparkStateServer.serveRequests``, or nothing
at all when the stray only connects and closes. It hung lab 10's notebook in CI for 2,000 s.
With ``spark.python.unix.domain.socket.enabled`` (the course's default on Linux and macOS) the
state servers listen on socket files that no TCP client can reach.

Each test runs ``tests/state_server_stray.py`` in a Spark of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamlab.session import DEFAULT_CONF

HERE = Path(__file__).parent
UDS = "spark.python.unix.domain.socket.enabled"


def run_with_a_stray(tmp_path: Path, mode: str, within: float) -> tuple[dict, str]:
    build = tmp_path / f"build-{mode}"
    env = {**os.environ, "STREAMLAB_BUILD_DIR": str(build), "STRAY_WITHIN": str(within)}
    process = subprocess.run(
        [sys.executable, str(HERE / "state_server_stray.py"), str(tmp_path / mode), mode],
        capture_output=True,
        text=True,
        timeout=within + 240,
        env=env,
    )
    lines = [line for line in process.stdout.splitlines() if line.startswith("{")]
    assert lines, f"the child said nothing: {process.stdout[-2000:]}\n{process.stderr[-2000:]}"
    log = build / "logs" / "spark.log"
    return json.loads(lines[-1]), log.read_text(errors="replace") if log.exists() else ""


@pytest.mark.skipif(os.name != "posix", reason="Unix domain sockets are a POSIX setting")
def test_the_course_s_session_uses_unix_domain_sockets_for_python_workers():
    assert DEFAULT_CONF.get(UDS) == "true"


@pytest.mark.skipif(os.name != "posix", reason="Unix domain sockets are a POSIX setting")
def test_a_stray_connection_hangs_a_tcp_state_server_and_cannot_reach_the_course_s(tmp_path):
    on_tcp, tcp_log = run_with_a_stray(tmp_path, "tcp", within=60)
    if not on_tcp["stray_reached"]:
        pytest.skip(f"the stray never reached a state server on this run: {on_tcp}")
    # Spark's behaviour: the server that the stray reached never serves its worker.
    assert not on_tcp["ended"], on_tcp
    assert "TransformWithStateInPySparkStateServer" in tcp_log, tcp_log[-3000:]

    on_uds, _ = run_with_a_stray(tmp_path, "uds", within=180)
    assert on_uds["stray_reached"] == [], on_uds
    assert on_uds["ended"], on_uds
