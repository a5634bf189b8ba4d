"""``python -m streamlab.launch``: start JupyterLab on the labs (what ``nox -s lab`` runs).

Runs in the foreground until Ctrl-C or SIGTERM, then stops everything it started.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys

from streamlab.paths import REPO_ROOT


def jupyter_command(port: int, open_browser: bool, token: str | None) -> list[str]:
    """The JupyterLab command line: the labs folder as its root, on loopback only."""
    command = [sys.executable, "-m", "jupyter", "lab",
               f"--notebook-dir={REPO_ROOT / 'labs'}", "--ServerApp.ip=127.0.0.1",
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
    args = parser.parse_args(argv)

    jupyter = subprocess.Popen(jupyter_command(args.port, not args.no_browser, args.token))

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


if __name__ == "__main__":
    sys.exit(main())
