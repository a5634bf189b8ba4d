""" "Did you save?": notices a notebook whose running kernel holds newer code than its file.

The grader reads the saved file; JupyterLab autosaves only every two minutes. Every cell a
kernel runs is kept in IPython's history database (``$IPYTHONDIR``, by default
``~/.ipython/profile_default/history.sqlite``) with the start time of the kernel's session.
Only a notebook that a running Jupyter server on this machine has open with a kernel is
looked at, and only kernels that are still running. An exercise's cell is taken as unsaved
when the last version the learner ran (the last input that defines the same function or
class) differs from the saved cell, and either the saved cell is still the stub while the
run one is not, or the run came from a kernel started after the file was last saved.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import urllib.parse
import urllib.request
from datetime import datetime, timedelta
from pathlib import Path

from streamlab.course.notebooks import NOT_DONE, exercise_id, read_cells
from streamlab.course.registry import Lab
from streamlab.paths import REPO_ROOT

_DEFINITION = re.compile(r"^(?:async\s+)?(?:def|class)\s+(\w+)", re.MULTILINE)
#: Kernels older than this are not the learner's current work.
_RECENT = timedelta(days=1)


def history_file() -> Path:
    root = Path(os.environ.get("IPYTHONDIR") or Path.home() / ".ipython")
    return root / "profile_default" / "history.sqlite"


def _runs(path: Path) -> list[tuple[datetime, str]]:
    """(session start, source) of every input of recent kernels, oldest first."""
    if not path.is_file():
        return []
    since = (datetime.now() - _RECENT).isoformat(" ")
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as db:
            rows = db.execute(
                "SELECT s.start, h.source_raw FROM history h JOIN sessions s "
                "ON h.session = s.session WHERE s.start >= ? AND s.end IS NULL "
                "ORDER BY h.session, h.line",
                (since,),
            ).fetchall()
    except sqlite3.Error:
        return []
    runs = []
    for start, source in rows:
        try:
            runs.append((datetime.fromisoformat(str(start)), source or ""))
        except ValueError:
            continue
    return runs


def _running_servers() -> list[dict]:
    """What each running Jupyter server wrote about itself (``jpserver-PID.json``).

    Read directly: importing ``jupyter_server`` for its ``list_running_servers`` takes longer
    than a whole ungraded lab.
    """
    try:
        from jupyter_core.paths import jupyter_runtime_dir
    except ImportError:
        return []
    servers = []
    for info in Path(jupyter_runtime_dir()).glob("jpserver-*.json"):
        try:
            server = json.loads(info.read_text())
            os.kill(int(server["pid"]), 0)  # still running?
        except (OSError, ValueError, KeyError, TypeError):
            continue
        servers.append(server)
    return servers


def open_notebooks() -> set[Path]:
    """Notebooks that a Jupyter server on this machine has open with a kernel."""
    found = set()
    for server in _running_servers():
        host = urllib.parse.urlsplit(server.get("url", "")).hostname
        if host not in ("127.0.0.1", "localhost", "::1"):
            continue
        url = server["url"].rstrip("/") + "/api/sessions"
        request = urllib.request.Request(
            url, headers={"Authorization": f"token {server.get('token', '')}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=2) as answer:
                sessions = json.load(answer)
        except (OSError, ValueError):
            continue
        root = Path(server.get("root_dir") or server.get("notebook_dir") or ".")
        for session in sessions:
            if session.get("kernel") and session.get("path"):
                found.add((root / session["path"]).resolve())
    return found


def warnings(labs: list[Lab], graded: dict, notebooks: str) -> list[dict]:
    """One entry per exercise whose saved cell is older than what the kernel last ran."""
    opened = open_notebooks()
    runs = _runs(history_file()) if opened else []
    if not runs:
        return []
    found = []
    statuses = {
        (lab["id"], e["id"]): e["status"]
        for lab in graded["labs"]
        for e in lab["exercises"]
        if not e.get("earlier")  # kept from an earlier run: not what this run read
    }
    for lab in labs:
        folder = Path(notebooks)
        path = lab.notebook(folder if folder.is_absolute() else REPO_ROOT / folder)
        if path.resolve() not in opened:
            continue
        try:
            cells = read_cells(path)
            saved_at = datetime.fromtimestamp(path.stat().st_mtime)
        except (OSError, ValueError):  # an unreadable notebook is reported by the grade itself
            continue
        for cell in cells:
            exercise = exercise_id(cell) if cell.get("cell_type") == "code" else None
            status = statuses.get((lab.id, exercise or ""))
            source = cell["source"]
            names = _DEFINITION.findall(source) if status and status != "passed" else []
            if not names:
                continue
            header = re.compile(rf"^(?:async\s+)?(?:def|class)\s+{names[0]}\b", re.MULTILINE)
            ran = [(start, source) for start, source in runs if header.search(source)]
            if not ran:
                continue
            started, last = ran[-1]
            if last.strip() == source.strip():
                continue
            stub = NOT_DONE.format(id=exercise)
            if (stub in source and stub not in last) or started > saved_at:
                found.append(
                    {
                        "lab": lab.id,
                        "exercise": exercise,
                        "notebook": str(path),
                        "message": (
                            f"Exercise {exercise}: the code you last ran in its cell is "
                            f"not the code saved in {path.name}. Did you save? "
                            "(File > Save, or Ctrl-S; then grade again.)"
                        ),
                    }
                )
    return found
