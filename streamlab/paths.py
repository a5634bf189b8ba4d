"""Where the course's files live."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

#: The course checkout: the folder holding ``course.toml``, ``labs/`` and ``solutions/``.
REPO_ROOT = Path(os.environ.get("STREAMLAB_ROOT", Path(__file__).resolve().parent.parent))

#: Scratch space for checkpoints, sink output and generated input. Never committed.
#: ``STREAMLAB_BUILD_DIR`` moves it, so that two runs of the course (the test session runs the
#: solution notebooks beside the package's tests) never share a scratch folder.
BUILD_DIR = Path(os.environ.get("STREAMLAB_BUILD_DIR", REPO_ROOT / "build"))


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


def lock_file(path: Path) -> int | None:
    """Take an exclusive lock on the file ``path`` (created if missing); None when another
    process holds it.

    The lock lasts until the returned descriptor is closed or the process ends: the
    operating system drops it even on kill -9, so a crashed owner never leaves it behind.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:
            import msvcrt

            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]
    except OSError:
        os.close(fd)
        return None
    return fd


def in_use(path: Path) -> bool:
    """Whether another process holds the lock on the file ``path`` (see :func:`lock_file`)."""
    if not path.exists():
        return False
    fd = lock_file(path)
    if fd is None:
        return True
    os.close(fd)
    return False


def write_atomically(path: Path, write: Callable[[TextIO], None]) -> None:
    """Replace ``path`` with what ``write`` writes to a text file: a reader sees the old file
    or the new one, never half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            write(out)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
