"""The real grader as a learner runs it: ``python -m streamlab.grading``, in a process of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from streamlab.paths import REPO_ROOT


def run_grader(
    notebooks: Path | str,
    *labs: str,
    json_path: Path,
    extra: Sequence[str] = (),
    timeout: float = 600,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """Grade ``labs`` (all of them when none is named) in ``notebooks``, the grade to ``json_path``."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "streamlab.grading",
            *labs,
            "--notebooks",
            str(notebooks),
            "--json",
            str(json_path),
            *extra,
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def warm_grader(command: str, env: Mapping[str, str]) -> str:
    """Run ``streamlab.grading.warm.<command>`` in a process with ``env``; what it printed."""
    return subprocess.run(
        [sys.executable, "-c", f"from streamlab.grading import warm; print(warm.{command})"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=60,
        env={**os.environ, **env},
        check=True,
    ).stdout.strip()
