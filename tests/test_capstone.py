"""The capstone end to end, once, with every real part.

The local hub, a producer fleet sending one heartbeat a second, lab 08's solution query (its
``monitor_settings`` and ``monitor_writer``, loaded from the notebook the way the grader loads
it, with lab 04's processor) writing to the ``status`` event hub, and a ``StatusBoard``
following that hub with ``EventHubConsumerClient``. A paused machine must turn Unhealthy on the
board about 5 s after its last heartbeat and Healthy again once it resumes, while the others
stay Healthy.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from eventhub_clients import wait_for

from streamlab.fleet import Fleet
from streamlab.grading.loader import load_notebook
from streamlab.monitor import reference_solution
from streamlab.paths import REPO_ROOT
from streamlab.widgets import StatusBoard

LAB08 = REPO_ROOT / "solutions" / "08-capstone" / "08-capstone.ipynb"
MACHINES = ["m1", "m2", "m3"]
PAUSED = "m2"


@pytest.fixture(scope="module")
def lab08():
    loaded = load_notebook(LAB08, module_name="lab08_solution")
    assert not loaded.problems, loaded.problems[0].sentence()
    return loaded.module


def _chain(board: StatusBoard, machine: str) -> list[str]:
    return [t.status for t in reversed(board.transitions) if t.machine_name == machine]


def test_a_paused_machine_turns_red_on_the_board_and_recovers(spark, hub, tmp_path, lab08):
    fleet = Fleet(hub.connection_string)
    board = StatusBoard(fleet=fleet)
    query = None
    try:
        for name in MACHINES:
            fleet.add(name)
        settings = lab08.monitor_settings(hub.connection_string, len(MACHINES), str(tmp_path))
        processor = reference_solution().LeanHeartbeatProcessor(timeout_ms=5_000, retire_after_ms=600_000)
        started_at = datetime.now(timezone.utc)
        query = lab08.monitor_writer(spark, settings, processor).start()
        board.follow_eventhub(hub.connection_string, "status", starting_position=started_at)

        def statuses_are(expected: dict):
            def check():
                if not query.isActive:
                    raise AssertionError(f"the monitor stopped: {query.exception()}")
                return all(board.statuses.get(m) == s for m, s in expected.items())
            return check

        wait_for(statuses_are(dict.fromkeys(MACHINES, "Healthy")), timeout=120, what="every machine Healthy")
        fleet.pause(PAUSED)
        wait_for(statuses_are({PAUSED: "Unhealthy"}), timeout=30, what=f"{PAUSED} Unhealthy on the board")
        last_heartbeat = fleet.machine(PAUSED).last_sent_at
        fleet.resume(PAUSED)
        wait_for(statuses_are({PAUSED: "Healthy"}), timeout=30, what=f"{PAUSED} Healthy again")
    finally:
        if query is not None:
            query.stop()
        board.stop()
        fleet.stop()

    assert _chain(board, PAUSED) == ["Initializing", "Healthy", "Unhealthy", "Healthy"]
    for machine in set(MACHINES) - {PAUSED}:
        assert _chain(board, machine) == ["Initializing", "Healthy"], (machine, _chain(board, machine))
    went_red = next(t for t in board.transitions if t.machine_name == PAUSED and t.status == "Unhealthy")
    silent_for = went_red.changed_at - last_heartbeat
    assert 4.9 <= silent_for <= 12.0, silent_for
