"""``python -m streamlab.launch``: the hub and JupyterLab on the labs (what ``nox -s lab`` runs).

The notebooks find the hub's connection string with
:func:`streamlab.hub.course_connection_string`.

Runs in the foreground until Ctrl-C or SIGTERM, then stops everything it started.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

from streamlab.hub.api import HUB_ENV
from streamlab.paths import BUILD_DIR, REPO_ROOT

#: The folder JupyterLab serves unless told otherwise.
LABS_DIR = REPO_ROOT / "labs"


def jupyter_command(port: int, open_browser: bool, token: str | None,
                    notebook_dir: str | Path = LABS_DIR) -> list[str]:
    """The JupyterLab command line: ``notebook_dir`` (the labs) as its root, on loopback only."""
    command = [sys.executable, "-m", "jupyter", "lab",
               f"--notebook-dir={notebook_dir}", "--ServerApp.ip=127.0.0.1",
               f"--ServerApp.port={port}", "--ServerApp.port_retries=0"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        # Containers and CI machines often run as root; JupyterLab refuses that by default.
        command.append("--allow-root")
    if not open_browser:
        command.append("--no-browser")
    if token is not None:
        command.append(f"--IdentityProvider.token={token}")
    return command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nox -s lab --", description=__doc__)
    parser.add_argument("--port", type=int, default=8888)
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser tab")
    parser.add_argument("--token", default=None,
                        help="fixed access token (default: JupyterLab makes one and prints a link)")
    parser.add_argument("--notebook-dir", type=Path, default=LABS_DIR,
                        help="folder to serve (default: the course's labs/)")
    parser.add_argument("--hub-port", type=int, default=5672,
                        help="port of the local Event Hubs emulator (0: any free port)")
    args = parser.parse_args(argv)

    hub = _start_hub(args.hub_port)
    env = {**os.environ, HUB_ENV: hub.connection_string}
    jupyter = subprocess.Popen(jupyter_command(args.port, not args.no_browser, args.token,
                                               args.notebook_dir), env=env)

    def _stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    try:
        return jupyter.wait()
    except KeyboardInterrupt:
        print("\nStopping JupyterLab...", flush=True)
        jupyter.terminate()
        try:
            jupyter.wait(timeout=20)
        except subprocess.TimeoutExpired:
            jupyter.kill()
        return 0
    finally:
        hub.stop()


def _start_hub(port: int):
    """The emulator the notebooks use, durable under build/hub; any port if ``port`` is taken."""
    from streamlab.hub import start_subprocess

    try:
        hub = start_subprocess(data_dir=BUILD_DIR / "hub", port=port)
    except RuntimeError:
        print(f"Port {port} is taken; the Event Hubs emulator takes another one.", flush=True)
        hub = start_subprocess(data_dir=BUILD_DIR / "hub", port=0)
    print(f"Event Hubs emulator: {hub.connection_string}", flush=True)
    return hub


if __name__ == "__main__":
    sys.exit(main())
