"""``python -m streamlab.tooling.lab_launcher``: the hub and JupyterLab on the labs (what ``nox -s lab`` runs).

The notebooks find the hub's connection string with
:func:`streamlab.hub.course_connection_string`.

JupyterLab's terminal gets the course environment's ``bin`` folder first on its PATH, so
``python`` there is the course's, and before it a ``nox`` that runs the course's noxfile
from any folder (the terminal opens in ``labs/``, not beside ``noxfile.py``): the commands
the notebooks give, ``nox -s check -- 00``, work as written. The learner's shell starts
without re-reading the login profile, which would reset that PATH.
JupyterLab greets nobody with its news pop-up: the course's application settings turn it off.

Runs in the foreground until Ctrl-C or SIGTERM, then stops everything it started.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shlex
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from streamlab import processes
from streamlab.grading import warm
from streamlab.hub.api import HUB_ENV, start_beside_others
from streamlab.paths import BUILD_DIR, REPO_ROOT

#: The folder JupyterLab serves unless told otherwise.
LABS_DIR = REPO_ROOT / "labs"
#: JupyterLab's application settings for the course (``overrides.json``: new defaults).
APP_SETTINGS_DIR = BUILD_DIR / "jupyterlab-settings"
#: Defaults the course changes: no "Jupyter news?" question, no update check.
SETTINGS_OVERRIDES = {
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
}
#: The course environment's programs (``python``, ``jupyter``, ``nox``).
COURSE_BIN = Path(sys.executable).parent
#: Programs for JupyterLab's terminal only: ``nox`` on the course's noxfile.
TERMINAL_BIN = BUILD_DIR / "jupyterlab-bin"
NOXFILE = REPO_ROOT / "noxfile.py"


def jupyter_command(
    port: int, open_browser: bool, token: str | None, notebook_dir: str | Path = LABS_DIR
) -> list[str]:
    """The JupyterLab command line: ``notebook_dir`` (the labs) as its root, on loopback only."""
    command = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        f"--notebook-dir={notebook_dir}",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--LabApp.app_settings_dir={APP_SETTINGS_DIR}",
        f"--ServerApp.terminado_settings=shell_command={_shell_command()}",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        # Containers and CI machines often run as root; JupyterLab refuses that by default.
        command.append("--allow-root")
    if not open_browser:
        command.append("--no-browser")
    if token is not None:
        command.append(f"--IdentityProvider.token={token}")
    return command


def _shell_command() -> str:
    """The terminal's shell: the learner's, interactive and not a login shell (a login shell
    re-reads /etc/profile, which resets PATH). bash reads the learner's ``~/.bashrc`` and then
    puts the course's folders back in front, in case it prepends another Python (pyenv, conda).
    """
    shell = os.environ.get("SHELL") or shutil.which("bash") or shutil.which("sh") or "/bin/sh"
    if Path(shell).name == "bash":
        return shlex.join([shell, "--rcfile", str(TERMINAL_BIN / "bashrc")])
    if Path(shell).name == "zsh":  # zsh reads its rc files from ZDOTDIR: the course's first
        user = os.environ.get("ZDOTDIR") or os.path.expanduser("~")
        return shlex.join(
            [
                "/usr/bin/env",
                f"ZDOTDIR={TERMINAL_BIN / 'zsh'}",
                f"STREAMLAB_USER_ZDOTDIR={user}",
                shell,
            ]
        )
    return shlex.quote(shell)


def jupyter_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """JupyterLab's environment (its terminals' too): the terminal's and the course's ``bin``
    folders first on PATH."""
    environ = dict(os.environ if environ is None else environ)
    ours = [TERMINAL_BIN, COURSE_BIN]
    rest = [p for p in environ.get("PATH", "").split(os.pathsep) if p and Path(p) not in ours]
    environ["PATH"] = os.pathsep.join([*map(str, ours), *rest])
    return environ


# A later ``--noxfile`` (or ``-f``) on the learner's command line wins over this one.
_NOX = """#!/bin/sh
# nox on the course's noxfile from any folder (JupyterLab's terminal opens in labs/).
exec {python} -m nox --noxfile {noxfile} "$@"
"""
_BASHRC = """# JupyterLab's terminal for the course: the learner's own settings, then the course's PATH.
if [ -f "$HOME/.bashrc" ]; then . "$HOME/.bashrc"; fi
export PATH={path}:"$PATH"
"""
_ZSHENV = """# JupyterLab's terminal for the course: the learner's own .zshenv.
if [ -f "$STREAMLAB_USER_ZDOTDIR/.zshenv" ]; then . "$STREAMLAB_USER_ZDOTDIR/.zshenv"; fi
"""
_ZSHRC = """# JupyterLab's terminal for the course: the learner's own settings, then the course's PATH.
export ZDOTDIR="$STREAMLAB_USER_ZDOTDIR"
if [ -f "$ZDOTDIR/.zshrc" ]; then . "$ZDOTDIR/.zshrc"; fi
export PATH={path}:"$PATH"
"""


def write_terminal_bin(folder: Path = TERMINAL_BIN) -> Path:
    """Write the terminal's ``nox`` (the course's, on the course's noxfile) into ``folder``,
    and the rc files its bash or zsh starts with."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "nox"
    path.write_text(
        _NOX.format(python=shlex.quote(sys.executable), noxfile=shlex.quote(str(NOXFILE)))
    )
    path.chmod(0o755)
    ours = os.pathsep.join([str(TERMINAL_BIN), str(COURSE_BIN)])
    (folder / "bashrc").write_text(_BASHRC.format(path=shlex.quote(ours)))
    (folder / "zsh").mkdir(exist_ok=True)
    (folder / "zsh" / ".zshenv").write_text(_ZSHENV)
    (folder / "zsh" / ".zshrc").write_text(_ZSHRC.format(path=shlex.quote(ours)))
    return path


def write_settings(folder: Path = APP_SETTINGS_DIR) -> Path:
    """Write the course's JupyterLab defaults (``overrides.json``) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "overrides.json"
    path.write_text(json.dumps(SETTINGS_OVERRIDES, indent=2) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nox -s lab --", description=__doc__)
    parser.add_argument("--port", type=int, default=8888)
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser tab")
    parser.add_argument(
        "--token",
        default=None,
        help="fixed access token (default: a new one, in the link the launcher prints)",
    )
    parser.add_argument(
        "--notebook-dir",
        type=Path,
        default=LABS_DIR,
        help="folder to serve (default: the course's labs/)",
    )
    parser.add_argument(
        "--hub-port",
        type=int,
        default=5672,
        help="port of the local Event Hubs emulator (0: any free port)",
    )
    args = parser.parse_args(argv)

    write_settings()
    write_terminal_bin()
    stop = processes.stop_requested()
    hub = _start_hub(args.hub_port)
    try:
        if stop.is_set():  # Ctrl-C while the hub started
            return 0
        env = {**jupyter_environment(), HUB_ENV: hub.connection_string}
        # The first %check or `nox -s check` finds its grading child warm (streamlab.grading.warm).
        warm.start(env)
        token = args.token or secrets.token_hex(24)
        jupyter = subprocess.Popen(
            jupyter_command(args.port, not args.no_browser, token, args.notebook_dir), env=env
        )
        _announce(args.port, token, jupyter, stop)
        while not stop.wait(0.5):
            if jupyter.poll() is not None:
                return jupyter.returncode
        print("\nStopping JupyterLab...", flush=True)
        processes.terminate(jupyter, grace=20)
        return 0
    finally:
        hub.stop()
        warm.stop()


def _announce(port: int, token: str, jupyter: subprocess.Popen, stop, within: float = 120) -> None:
    """Once JupyterLab answers, one line of the course's own saying which address to open:
    Jupyter's banner, printed before it, lists several among its log lines."""
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + within
    while jupyter.poll() is None and not stop.is_set():
        try:
            urllib.request.urlopen(f"{base}/api/status", timeout=2).close()
        except urllib.error.HTTPError:  # it answers, and asks for the token: up
            pass
        except OSError:
            if time.monotonic() > deadline:
                print(f"JupyterLab has not answered on {base} after {within:g} s.", flush=True)
                return
            stop.wait(0.3)
            continue
        print(
            f"\nOpen {base}/lab?token={token} in your browser"
            " (Ctrl-C here stops JupyterLab and the emulator).\n",
            flush=True,
        )
        return


def _start_hub(port: int):
    """The emulator the notebooks use: durable under build/hub, on ``port``; where another
    emulator holds either, one of its own on a free port and a temporary folder."""
    hub = start_beside_others(BUILD_DIR / "hub", port, say=lambda text: print(text, flush=True))
    print(f"Event Hubs emulator: {hub.connection_string}", flush=True)
    return hub


if __name__ == "__main__":
    sys.exit(main())
