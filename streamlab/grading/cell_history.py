"""Remembers, by cell id, the source of every cell an IPython kernel runs.

JupyterLab sends each cell's id with the request to run it (nbformat 4.5 stores the same
id in the notebook file), so ``%check`` can grade a cell as the learner last ran it, saved
or not. It only records: ``import streamlab`` installs it in a kernel, so it imports nothing
beyond the standard library (``%check`` itself, :mod:`streamlab.grading.magic`, is registered
lazily).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class CellRun:
    """One cell as it was last run."""

    source: str
    at: datetime


#: Cell id -> its last run, for the kernel this module lives in.
LAST_RUNS: dict[str, CellRun] = {}

_installed: set[int] = set()


def _cell_id(info) -> str | None:
    cell_id = getattr(info, "cell_id", None)
    if cell_id:
        return cell_id
    # Older IPython: the id is in the metadata of the request being run.
    try:
        from IPython import get_ipython

        parent = get_ipython().kernel.get_parent()
        return (parent.get("metadata") or {}).get("cellId")
    except Exception:  # not in a kernel, or a kernel without get_parent
        return None


def _record(info) -> None:
    cell_id = _cell_id(info)
    if cell_id:
        LAST_RUNS[cell_id] = CellRun(info.raw_cell, datetime.now())


def install(shell) -> None:
    """Record every cell ``shell`` runs from now on; once per shell."""
    if id(shell) in _installed:
        return
    _installed.add(id(shell))
    shell.events.register("pre_run_cell", _record)
