"""A micro-batch's time, split into the parts of its progress report.

Spark's ``StreamingQueryProgress.durationMs`` times each step of a micro-batch, and each
stateful operator reports its state store's times; the benchmarks that explain a latency
(``bench/batch_breakdown.py``, ``bench/batch_floor.py``) read them through these functions.
"""

from __future__ import annotations

#: The parts of a micro-batch's ``durationMs``, in the order Spark runs them.
BATCH_PARTS = (
    "latestOffset",
    "getBatch",
    "queryPlanning",
    "walCommit",
    "addBatch",
    "commitOffsets",
)


def batch_parts(progress: dict) -> dict[str, float]:
    """A progress report's ``triggerExecution`` split into its parts, in milliseconds.

    The parts are :data:`BATCH_PARTS` (0 when a report lacks one), any other timed step the
    report names, and ``other``: what ``triggerExecution`` holds beyond them all (never below 0).
    """
    durations = dict(progress.get("durationMs") or {})
    total = float(durations.pop("triggerExecution", 0))
    parts = {name: float(durations.pop(name, 0)) for name in BATCH_PARTS}
    parts.update({name: float(value) for name, value in sorted(durations.items())})
    parts["other"] = max(0.0, total - sum(parts.values()))
    return parts


def state_times(progress: dict) -> dict[str, float]:
    """A progress report's state store times (``commitTimeMs``, ``allUpdatesTimeMs``,
    ``allRemovalsTimeMs``), summed over its stateful operators, in milliseconds.

    Each is a sum over the operator's tasks, which may run at once: a part of ``addBatch``'s
    work, not of its wall time.
    """
    names = ("commitTimeMs", "allUpdatesTimeMs", "allRemovalsTimeMs")
    operators = progress.get("stateOperators") or []
    return {name: float(sum(op.get(name, 0) or 0 for op in operators)) for name in names}
