"""Where the course's files live."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

#: The course checkout: the folder holding ``course.toml``, ``labs/`` and ``solutions/``.
REPO_ROOT = Path(os.environ.get("STREAMLAB_ROOT", Path(__file__).resolve().parent.parent))

#: Scratch space for checkpoints, sink output and generated input. Never committed.
BUILD_DIR = REPO_ROOT / "build"


def work_dir(name: str, *, fresh: bool = True) -> Path:
    """Return ``build/work/<name>``, emptied first unless ``fresh`` is false.

    Notebooks keep their checkpoints and sink output here so that running a lab twice
    starts from a clean slate and nothing lands beside the notebooks.
    """
    path = BUILD_DIR / "work" / name
    if fresh and path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True, exist_ok=True)
    return path
