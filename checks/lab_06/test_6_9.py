"""Checks of exercise 6.9 · The SQL tab's state metrics, as numbers.

ui_state on one SQL execution as the Spark UI's REST API served it: batch 1 of the notebook's
ui_tour query (PySpark 4.3.0, local[2]), with the progress report of the same batch
(``checks/data/06_ui_tour_batch1.json``); then on that execution renamed, stripped of its
state and given other values.
"""

from __future__ import annotations

import json
from pathlib import Path

from streamlab.kit import (
    CheckFailed,
    exercise,
    expect_equal,
)

UI_TOUR = Path(__file__).parents[1] / "data" / "06_ui_tour_batch1.json"


TOTAL_ROWS = "number of total state rows"


UPDATED_ROWS = "number of updated state rows"


STATE_MEMORY = "memory used by state"


def _tour() -> dict:
    return json.loads(UI_TOUR.read_text())


def _ui_state(nb, execution: dict, what: str) -> dict:
    state = nb.ui_state(json.loads(json.dumps(execution)))
    if not isinstance(state, dict):
        raise CheckFailed(
            f"ui_state() of {what} should return a dict.",
            expected="a dict",
            actual=type(state).__name__,
        )
    return state


def _numbers(nb, execution: dict, what: str) -> dict:
    """What the learner read, with each number's type beside it (an int must be an int)."""
    return {
        node: {key: (type(value).__name__, value) for key, value in numbers.items()}
        if isinstance(numbers, dict)
        else numbers
        for node, numbers in _ui_state(nb, execution, what).items()
    }


def _typed(state: dict[str, tuple[int, int, float]]) -> dict:
    return {
        node: {
            "rows_total": ("int", rows),
            "rows_updated": ("int", updated),
            "memory_used_bytes": ("float", memory),
        }
        for node, (rows, updated, memory) in state.items()
    }


@exercise("6.9")
def test_ui_state_reads_a_real_batch(nb):
    tour = _tour()
    report = {op["operatorName"]: op for op in tour["progress"]["stateOperators"]}
    # The rows counted in the SQL tab are the report's; its memory, a tenth of a KiB rounded.
    expected = {
        "StreamingDeduplicate": (
            report["dedupe"]["numRowsTotal"],
            report["dedupe"]["numRowsUpdated"],
            4.2 * 1024,
        ),
        "StateStoreSave": (
            report["stateStoreSave"]["numRowsTotal"],
            report["stateStoreSave"]["numRowsUpdated"],
            4.2 * 1024,
        ),
    }
    expect_equal(
        _numbers(nb, tour["execution"], "batch 1 of ui_tour"),
        _typed(expected),
        "ui_state() of batch 1 of ui_tour (the REST API's answer, as the cell above shows it) "
        "should have one entry per node with state metrics, keyed by nodeName; each "
        "(type, value): rows as int, memory in bytes as float.",
        hint="Find the nodes by their metrics, not by their names; metric_value() reads "
        "'4.2 KiB' and the 'total (min, med, max ...)' form.",
    )


@exercise("6.9")
def test_ui_state_finds_state_by_its_metrics_not_by_a_node_name(nb):
    execution = _tour()["execution"]
    renamed = {"StreamingDeduplicate": "TransformWithStateInPySpark", "StateStoreSave": "Custom"}
    for node in execution["nodes"]:
        node["nodeName"] = renamed.get(node["nodeName"], node["nodeName"])
    got = _ui_state(nb, execution, "batch 1 with its state nodes renamed")
    expect_equal(
        sorted(got),
        ["Custom", "TransformWithStateInPySpark"],
        "Every node with a 'number of total state rows' metric holds state, whatever its "
        "name (a transformWithState node, a future operator): ui_state()'s keys.",
    )


@exercise("6.9")
def test_ui_state_of_a_batch_without_state_is_empty(nb):
    execution = _tour()["execution"]
    for node in execution["nodes"]:
        node["metrics"] = [m for m in node["metrics"] if "state" not in m["name"]]
    expect_equal(
        _ui_state(nb, execution, "an execution without state metrics"),
        {},
        "An execution none of whose nodes has 'number of total state rows' (a stateless "
        "query's batch) has no state to report.",
    )


@exercise("6.9")
def test_ui_state_reads_each_metric_in_its_unit(nb):
    execution = _tour()["execution"]
    values = {
        TOTAL_ROWS: "1,234",
        UPDATED_ROWS: "total (min, med, max (stageId: taskId))\n56 (20, 36, 36 (stage 9.0: task 3))",
        STATE_MEMORY: "total (min, med, max (stageId: taskId))\n2.5 MiB (1.0 MiB, 1.5 MiB, "
        "1.5 MiB (stage 9.0: task 3))",
    }
    for node in execution["nodes"]:
        if node["nodeName"] == "StateStoreSave":
            node["metrics"] = [
                {"name": m["name"], "value": values.get(m["name"], m["value"])}
                for m in node["metrics"]
            ]
            node["metrics"].reverse()  # the REST API promises no order
    got = _numbers(nb, execution, "batch 1 with other values in StateStoreSave").get(
        "StateStoreSave"
    )
    expect_equal(
        got,
        _typed({"StateStoreSave": (1234, 56, 2.5 * 1024**2)})["StateStoreSave"],
        "StateStoreSave with 'number of total state rows' 1,234, updated rows summed over "
        "tasks (56) and 2.5 MiB of memory: (type, value) of each.",
    )
