"""What lab 10's checks share: lab 05's solution, heartbeat files and fleets, and a
stopped query restarted on a copy of its checkpoint.

Predictions and diagnoses are graded against what Spark does here and now, never against
a copy of the answer. No check sleeps or reads the wall clock.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import Row
from pyspark.sql.streaming.tws_tester import TwsTester
from pyspark.sql.types import StructType

from streamlab.kit import (
    REPO_ROOT,
    START,
    CheckFailed,
    deliver_file,
    expect_equal,
    handler_must_yield,
    registry,
    spark_facts,
)
from streamlab.solutions import load_solution
from streamlab.tws_batches import spark_batch

#: Lab 05's default retire_after_ms: an Unhealthy machine silent that long leaves the state.
DAY_MS = 24 * 3_600_000


LAB05 = load_solution("05")


#: The notebook LAB05 comes from: the facts measured with it depend on it.
LAB05_NOTEBOOK = registry.lab("05").notebook(REPO_ROOT / "solutions")


def _row(machine: str, second: float, partition: str = "0") -> Row:
    """One row of lab 05's HEARTBEAT_SCHEMA, ``second`` seconds after START."""
    return Row(
        partition=partition,
        machine_name=machine,
        event_time=datetime.fromtimestamp(START.timestamp() + second, tz=UTC),
        sequence_number=None,
        last_enqueued_sequence_number=None,
    )


def _spark_batch(tester: TwsTester, now: int, rows_by_key: dict) -> list:
    """One micro-batch at processing time ``now`` in Spark's order: every key's rows, then the
    timers that are due; a handler that returns None gets a sentence, not a TypeError."""
    with handler_must_yield("handleInputRows or handleExpiredTimer", "a Row"):
        return spark_batch(tester, now, rows_by_key)


class _Recorder:
    """A stand-in handle that writes down what a processor's ``init`` declares and deletes."""

    def __init__(self):
        self.declared: dict[str, tuple] = {}
        self.deleted: list[str] = []

    def getValueState(self, name, schema, ttlDurationMs=None):
        self.declared[name] = ("value", _ddl(schema), ttlDurationMs)

    def getListState(self, name, schema, ttlDurationMs=None):
        self.declared[name] = ("list", _ddl(schema), ttlDurationMs)

    def getMapState(self, name, key_schema, value_schema, ttlDurationMs=None):
        self.declared[name] = ("map", (_ddl(key_schema), _ddl(value_schema)), ttlDurationMs)

    def deleteIfExists(self, name):
        self.deleted.append(name)

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def _ddl(schema) -> str:
    """A schema as ``name type, ...`` in lower case, however it was given."""
    if isinstance(schema, StructType):
        return ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in schema.fields)
    parts = [p.strip().split() for p in str(schema).split(",")]
    aliases = {"long": "bigint", "int": "int", "integer": "int", "string": "string"}
    return ", ".join(f"{n} {aliases.get(t.lower(), t.lower())}" for n, t in parts)


def _declared(processor) -> _Recorder:
    recorder = _Recorder()
    processor.init(recorder)
    return recorder


class _Writes:
    """Which state variables a processor writes, on a TwsTester (by variable name)."""

    WRITES = ("update", "put", "appendValue", "appendList", "updateValue")

    def __init__(self, tester: TwsTester):
        self.written: set[str] = set()
        for group in (
            tester.handle.value_states,
            tester.handle.list_states,
            tester.handle.map_states,
        ):
            for name, state in group.items():
                for method in self.WRITES:
                    if hasattr(state, method):
                        setattr(state, method, self._noting(name, getattr(state, method)))

    def _noting(self, name, method):
        def noted(*args, **kwargs):
            self.written.add(name)
            return method(*args, **kwargs)

        return noted


def _no_empty_lists(tester: TwsTester, who: str) -> TwsTester:
    """Make an empty ``put`` or ``appendList`` fail, as it fails on Spark (TwsTester takes it)."""
    for name, state in tester.handle.list_states.items():
        for method in ("put", "appendList"):
            original = getattr(state, method)

            def guarded(values, _original=original, _method=method, _name=name):
                if not list(values):
                    raise CheckFailed(
                        f"{who} called {_method}([]) on the list state {_name!r}. Spark refuses "
                        f"to store an empty list (ILLEGAL_STATE_STORE_VALUE.EMPTY_LIST_VALUE), "
                        f"although TwsTester takes it.",
                        hint="Write the list only when it has something in it.",
                    )
                return _original(values)

            setattr(state, method, guarded)
    return tester


def _facts(rows) -> list[tuple]:
    return sorted(
        (
            r.machine_name,
            r.previous_status or "",
            r.status,
            round(r.last_status_change_time.timestamp() * 1000),
            round(r.noticed_time.timestamp() * 1000),
        )
        for r in rows
    )


def _fleet(names, second: int, partition: str = "0") -> list[Row]:
    return [_row(n, second, partition) for n in names]


HUB_PARTITIONS = ("0", "1")


_mtime = [0]


def _write(folder: Path, seconds, machines: dict) -> None:
    """One JSON file of lab 05 heartbeat rows, dated after every file written before."""
    _mtime[0] += 1
    rows = [
        {
            "partition": partition,
            "machine_name": machine,
            "event_time": datetime.fromtimestamp(START.timestamp() + s, tz=UTC).isoformat(),
        }
        for s in seconds
        for machine, partition in machines.items()
    ]
    deliver_file(folder, f"{_mtime[0]:04d}", rows, order=_mtime[0])


def _source(spark, folder: Path):
    return spark.readStream.schema(LAB05.HEARTBEAT_SCHEMA).json(str(folder))


def _monitor(heartbeats, processor=None):
    return LAB05.catch_up_changes(heartbeats, processor or LAB05.CatchUpProcessor(60_000))


def _emitted(row, processor: str, schema: str, fields: list[str], hint: str = "") -> Row:
    """``row``, once it is a Row with ``fields`` in order (those of the notebook's ``schema``)."""
    if not isinstance(row, Row):
        raise CheckFailed(f"{processor} should yield Row objects; it yielded {row!r}.")
    expect_equal(
        list(row.asDict()),
        fields,
        f"{processor}'s rows should have the fields of {schema}, in order.",
        hint=hint,
    )
    return row


def _predictions(nb, name: str, keys) -> dict:
    predicted = getattr(nb, name, None)
    if not isinstance(predicted, dict):
        raise CheckFailed(f"{name} should be a dict; it is {type(predicted).__name__}.")
    expect_equal(
        sorted(predicted),
        sorted(keys),
        f"{name} should have exactly these keys.",
    )
    return predicted


def _wrong_predictions(nb, name: str, keys, facts: str, measure, check: str) -> tuple[dict, dict]:
    """The predictions of ``nb.<name>`` that differ from what Spark did (``measure()``, kept as
    ``facts`` for the check file ``check``), and what Spark did at those keys."""
    predicted = _predictions(nb, name, keys)
    measured = spark_facts(facts, measure, check=check, inputs=[LAB05_NOTEBOOK])
    wrong = [key for key in keys if predicted[key] != measured[key]]
    return {key: predicted[key] for key in wrong}, {key: measured[key] for key in wrong}
