"""Lab 05's catch-up processor end to end: a backlog read over many micro-batches.

The reference monitor runs lab 05's solution (``CatchUpProcessor``, keyed by event hub
partition). As in ``test_monitor``, it is killed with SIGKILL while machines keep sending, two
of them stop and one starts during the downtime; here it comes back with a small
``maxEventsPerTrigger``, so that the backlog arrives over many micro-batches, each partition
cut short many times. The answers must be the same as with the backlog in one batch.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
from test_monitor import check_transitions, run_through_downtime

from streamlab.course import registry
from streamlab.fleet import Fleet
from streamlab.hub import start_subprocess
from streamlab.paths import REPO_ROOT
from streamlab.tooling.authoring import is_proof

LIMIT = 6  # maxEventsPerTrigger after the restart


def batch_sizes(checkpoint: Path) -> dict[int, int]:
    """Events per batch, from the offsets the checkpoint logged (per-partition sequence numbers)."""
    ends = {}
    for path in (checkpoint / "offsets").iterdir():
        if path.name.isdigit():
            ends[int(path.name)] = json.loads(path.read_text().splitlines()[2])
    sizes, previous = {}, None
    for batch in sorted(ends):
        if previous is not None:
            sizes[batch] = sum(end - previous.get(p, end) for p, end in ends[batch].items())
        previous = ends[batch]
    return sizes


def test_a_backlog_read_in_many_batches_gives_the_same_answers(tmp_path):
    with start_subprocess(data_dir=tmp_path / "hub") as hub, Fleet(hub.connection_string) as fleet:
        before, after, stopped, killed_at = run_through_downtime(
            hub.connection_string, fleet, tmp_path, 12, "--max-events-per-trigger", str(LIMIT)
        )
    check_transitions(before, after, stopped, killed_at)
    restarted = {
        b: n
        for b, n in batch_sizes(tmp_path / "checkpoint").items()
        if b > max(r["batch_id"] for r in before)
    }
    full = [b for b, n in restarted.items() if n >= LIMIT]
    assert len(full) >= 5, f"the backlog should have taken many limited batches: {restarted}"


def test_the_restart_text_quotes_what_the_replay_prints():
    """Lab 05's text about lab 04's processor after a downtime quotes the replay's own output.

    The replay is a proof cell: nbval compares its recorded output with a fresh run, so this
    test and nbval together hold the text to what Spark's order (rows, then timers) produces.
    """
    cells = nbformat.read(registry.lab("05").notebook(REPO_ROOT / "solutions"), as_version=4).cells
    [index] = [i for i, c in enumerate(cells) if "What the replay shows:" in c.source]
    replay = cells[index - 1]
    assert is_proof(replay) and replay.outputs, (
        "the replay above the text must be a recorded proof cell"
    )
    printed = {
        line.strip()
        for output in replay.outputs
        for line in output.get("text", "").splitlines()
        if line.strip()
    }
    quoted = re.search(r"What the replay shows:\s*```\n(.*?)```", cells[index].source, re.S)
    lines = [line.strip() for line in quoted.group(1).splitlines() if line.strip()]
    assert len(lines) >= 3
    assert [line for line in lines if line not in printed] == []
