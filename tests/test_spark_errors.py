"""Spark's error classes that a learner of this course meets, each provoked here on real Spark.

``streamlab.spark_errors.TAUGHT`` says, for each class, what it means in this course and which
lab and section show it; the grader, ``%check`` and the notebooks add that sentence to Spark's
message. Each class is provoked below by the smallest thing a learner could write, so a Spark
upgrade that renames or stops raising one fails here, and the table on the site
(``site/spark-errors.md``) is the table tested.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyspark import cloudpickle
from pyspark.sql import DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import LongType, StringType, StructField, StructType

from streamlab import spark_errors
from streamlab.course import registry
from streamlab.course.notebooks import read_cells
from streamlab.deadlines import finish
from streamlab.paths import REPO_ROOT
from streamlab.restart_trials import session_conf
from streamlab.spark_private import repartition_state

# Spark's Python workers cannot import this file: the processors below travel by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

Provocation = Callable[[SparkSession, Path], object]
PROVOKE: dict[str, Provocation] = {}


def provokes(condition: str, case: str = "") -> Callable[[Provocation], Provocation]:
    """Register a provocation of ``condition``; ``case`` tells apart two ways to meet one."""

    def register(function: Provocation) -> Provocation:
        PROVOKE[f"{condition} ({case})" if case else condition] = function
        return function

    return register


# -- small streams ---------------------------------------------------------------------------

BEATS = "machine_name STRING, event_time TIMESTAMP"


def beats(spark: SparkSession, folder: Path, rows: list[tuple[str, int]] | None = None):
    """A stream of heartbeats read from JSON files in ``folder`` (one file written now)."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = rows if rows is not None else [("m1", 1), ("m2", 2), ("m1", 3)]
    name = folder / f"part-{sum(1 for _ in folder.glob('*.json'))}.json"
    name.write_text(
        "".join(
            json.dumps({"machine_name": m, "event_time": f"2026-11-22T10:00:{s:02d}Z"}) + "\n"
            for m, s in rows
        )
    )
    return spark.readStream.schema(BEATS).json(str(folder))


def run_once(df: DataFrame, checkpoint: Path, mode: str = "update", **options) -> None:
    """One availableNow run of ``df`` into a memory table; raises what the query raised."""
    query = (
        df.writeStream.format("noop")
        .outputMode(mode)
        .option("checkpointLocation", str(checkpoint))
        .options(**options)
        .trigger(availableNow=True)
        .start()
    )
    try:
        finish(query, within=120, what="a small query to end")
    finally:
        query.stop()


def counted(spark, tmp_path, **agg) -> None:
    source = beats(spark, tmp_path / "in")
    aggregate = agg or {"beats": F.count("*")}
    run_once(
        source.groupBy("machine_name").agg(*[c.alias(n) for n, c in aggregate.items()]),
        tmp_path / "cp",
    )


# -- output modes and operators a stream refuses ---------------------------------------------


@provokes("STREAMING_OUTPUT_MODE.INVALID")
def _invalid_mode(spark, tmp_path):
    beats(spark, tmp_path / "in").writeStream.outputMode("upsert")


@provokes("STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION")
def _complete_without_aggregation(spark, tmp_path):
    run_once(beats(spark, tmp_path / "in"), tmp_path / "cp", mode="complete")


@provokes("STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION", "append")
def _append_without_watermark(spark, tmp_path):
    counts = beats(spark, tmp_path / "in").groupBy("machine_name").count()
    run_once(counts, tmp_path / "cp", mode="append")


@provokes("NON_TIME_WINDOW_NOT_SUPPORTED_IN_STREAMING")
def _row_number(spark, tmp_path):
    latest = Window.partitionBy("machine_name").orderBy(F.col("event_time").desc())
    ranked = beats(spark, tmp_path / "in").withColumn("n", F.row_number().over(latest))
    run_once(ranked, tmp_path / "cp", mode="append")


@provokes("WRITE_STREAM_NOT_ALLOWED")
def _write_stream_on_a_table(spark, tmp_path):
    return spark.createDataFrame([("m1", 1)], "machine_name STRING, n INT").writeStream


@provokes("STREAMING_REAL_TIME_MODE.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST")
def _real_time_into_memory(spark, tmp_path):
    (
        beats(spark, tmp_path / "in")
        .writeStream.format("memory")
        .queryName("real_time")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(realTime="5 seconds")
        .start()
        .stop()
    )


# -- what a checkpoint pins ------------------------------------------------------------------


@provokes("STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE")
def _another_value(spark, tmp_path):
    counted(spark, tmp_path)
    counted(spark, tmp_path, beats=F.count("*"), last=F.max("event_time"))


@provokes("STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE")
def _another_key(spark, tmp_path):
    counted(spark, tmp_path)
    source = beats(spark, tmp_path / "in")
    run_once(
        source.groupBy(F.length("machine_name").alias("machine_name")).count(), tmp_path / "cp"
    )


@provokes("STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA")
def _another_operator(spark, tmp_path):
    counted(spark, tmp_path)
    run_once(
        beats(spark, tmp_path / "in").dropDuplicates(["machine_name"]), tmp_path / "cp", "append"
    )


@provokes("STATE_REPARTITION_INVALID_CHECKPOINT.SHUFFLE_PARTITIONS_ALREADY_MATCH")
def _repartition_to_the_same_count(spark, tmp_path):
    counted(spark, tmp_path)
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
    repartition_state(spark, tmp_path / "cp", partitions)


@provokes("STATE_REPARTITION_INVALID_PARAMETER.IS_NOT_GREATER_THAN_ZERO")
def _repartition_to_nothing(spark, tmp_path):
    counted(spark, tmp_path)
    repartition_state(spark, tmp_path / "cp", 0)


# -- the state reader ------------------------------------------------------------------------


@provokes("STDS_COMMITTED_BATCH_UNAVAILABLE")
def _a_batch_that_never_ran(spark, tmp_path):
    counted(spark, tmp_path)
    spark.read.format("statestore").option("batchId", 7).load(str(tmp_path / "cp")).collect()


@provokes("STDS_INVALID_OPTION_VALUE.IS_NEGATIVE")
def _a_negative_batch(spark, tmp_path):
    counted(spark, tmp_path)
    spark.read.format("statestore").option("batchId", -1).load(str(tmp_path / "cp")).collect()


@provokes("STDS_FAILED_TO_READ_STATE_SCHEMA")
def _a_stateless_checkpoint(spark, tmp_path):
    run_once(beats(spark, tmp_path / "in"), tmp_path / "cp", mode="append")
    spark.read.format("statestore").load(str(tmp_path / "cp")).collect()


# -- transformWithState ----------------------------------------------------------------------

OUT = "machine_name STRING, n LONG"


class _Processor(StatefulProcessor):
    """A processor that counts its rows, after doing ``misstep`` (a name below) at its step."""

    def __init__(self, misstep: str = ""):
        self.misstep = misstep

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        ttl = 60_000 if self.misstep == "ttl" else None
        self.count = handle.getValueState("count", StructType([StructField("n", LongType())]), ttl)
        self.seen = handle.getListState("seen", StructType([StructField("s", StringType())]))

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        n = (self.count.get() or (0,))[0] + sum(1 for _ in rows)
        if self.misstep == "timer":
            self.handle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + 1000)
        if self.misstep == "state in handle":
            self.handle.getValueState("late", StructType([StructField("n", LongType())]))
        if self.misstep == "empty list":
            self.seen.put([])
        if self.misstep == "none":
            self.count.update(None)  # type: ignore[arg-type]
        if self.misstep == "raise":
            raise ValueError("a heartbeat without a machine")
        self.count.update((n,))
        yield Row(machine_name=key[0], n=n)


def processed(spark, tmp_path, misstep: str, time_mode: str = "None") -> None:
    source = beats(spark, tmp_path / "in")
    run_once(
        source.groupBy("machine_name").transformWithState(
            _Processor(misstep), OUT, "Update", time_mode
        ),
        tmp_path / "cp",
    )


@provokes("STATEFUL_PROCESSOR_INCORRECT_TIME_MODE_TO_ASSIGN_TTL")
def _ttl_without_time(spark, tmp_path):
    processed(spark, tmp_path, "ttl")


@provokes("STATEFUL_PROCESSOR_CANNOT_PERFORM_OPERATION_WITH_INVALID_TIME_MODE")
def _timer_without_time(spark, tmp_path):
    processed(spark, tmp_path, "timer")


@provokes("STATEFUL_PROCESSOR_CANNOT_PERFORM_OPERATION_WITH_INVALID_HANDLE_STATE")
def _state_declared_late(spark, tmp_path):
    processed(spark, tmp_path, "state in handle")


@provokes("ILLEGAL_STATE_STORE_VALUE.EMPTY_LIST_VALUE")
def _an_empty_list(spark, tmp_path):
    processed(spark, tmp_path, "empty list")


@provokes("PYTHON_EXCEPTION")
def _a_processor_that_raises(spark, tmp_path):
    processed(spark, tmp_path, "raise")


class _Kept(StatefulProcessor):
    """One value state, "v", of the schema given, set to ``value`` at every batch."""

    def __init__(self, schema: str, value: tuple):
        self.schema, self.value = schema, value

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.v = handle.getValueState("v", self.schema)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        self.v.update(self.value)
        yield Row(machine_name=key[0], n=sum(1 for _ in rows))


def kept(spark, tmp_path, schema: str, value: tuple, rows=None) -> None:
    source = beats(spark, tmp_path / "in", rows)
    run_once(
        source.groupBy("machine_name").transformWithState(
            _Kept(schema, value), OUT, "Update", "None"
        ),
        tmp_path / "cp",
    )


@provokes("STATE_STORE_INVALID_VALUE_SCHEMA_EVOLUTION")
def _a_narrowed_field(spark, tmp_path):
    with session_conf(spark, {"spark.sql.streaming.stateStore.encodingFormat": "avro"}):
        kept(spark, tmp_path, "a BIGINT, b STRING", (1, "x"))
        kept(spark, tmp_path, "a INT, b STRING", (2, "y"), [("m1", 4)])


# -- named sources ----------------------------------------------------------------------------

EVOLVE = "spark.sql.streaming.queryEvolution.enableSourceEvolution"


@provokes("STREAMING_QUERY_EVOLUTION_ERROR.UNNAMED_STREAMING_SOURCES_WITH_ENFORCEMENT")
def _an_unnamed_source(spark, tmp_path):
    with session_conf(spark, {EVOLVE: "true"}):
        counted(spark, tmp_path)


@provokes("STREAMING_QUERY_EVOLUTION_ERROR.CANNOT_ENABLE_ON_EXISTING_CHECKPOINT")
def _names_too_late(spark, tmp_path):
    counted(spark, tmp_path)
    with session_conf(spark, {EVOLVE: "true"}):
        named = spark.readStream.schema(BEATS).name("beats").json(str(tmp_path / "in"))
        run_once(named.groupBy("machine_name").count(), tmp_path / "cp")


# -- files under a query ----------------------------------------------------------------------


@provokes("FAILED_READ_FILE.FILE_NOT_EXIST")
def _a_table_overwritten_under_a_query(spark, tmp_path):
    spark.createDataFrame([("m1", "Lyon")], "machine_name STRING, site STRING").write.parquet(
        str(tmp_path / "sites")
    )
    sites = spark.read.parquet(str(tmp_path / "sites"))
    spark.createDataFrame([("m1", "Oslo")], "machine_name STRING, site STRING").write.mode(
        "overwrite"
    ).parquet(str(tmp_path / "sites"))
    run_once(beats(spark, tmp_path / "in").join(sites, "machine_name"), tmp_path / "cp", "append")


@provokes("UNRESOLVED_COLUMN.WITH_SUGGESTION")
def _a_misspelt_column(spark, tmp_path):
    return beats(spark, tmp_path / "in").select("machine").schema


# -- what a sentence says, made to happen ----------------------------------------------------

SITED = "machine_name STRING, site STRING, event_time TIMESTAMP"


def sited(spark: SparkSession, folder: Path, rows: list[tuple[str, str]]):
    """A stream of heartbeats with their machine's site, read from ``folder`` (one file now)."""
    folder.mkdir(parents=True, exist_ok=True)
    name = folder / f"part-{sum(1 for _ in folder.glob('*.json'))}.json"
    name.write_text(
        "".join(
            json.dumps({"machine_name": m, "site": s, "event_time": "2026-11-22T10:00:00Z"}) + "\n"
            for m, s in rows
        )
    )
    return spark.readStream.schema(SITED).json(str(folder))


def table_after(df: DataFrame, checkpoint: Path, name: str, mode: str = "complete") -> list:
    """One availableNow run of ``df`` into the memory table ``name``; its rows, sorted."""
    query = (
        df.writeStream.format("memory")
        .queryName(name)
        .outputMode(mode)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        finish(query, within=120, what=f"the query writing {name} to end")
    finally:
        query.stop()
    return sorted(tuple(row) for row in df.sparkSession.table(name).collect())


def meaning(condition: str) -> str:
    found = spark_errors.taught(condition)
    assert found is not None, f"the course no longer explains {condition}"
    return found.meaning


def test_a_regrouping_by_another_column_of_the_same_type_runs_on_the_old_state(spark, tmp_path):
    first = sited(spark, tmp_path / "in", [("m1", "Lyon"), ("m1", "Lyon"), ("m2", "Oslo")])
    by_machine = table_after(first.groupBy("machine_name").count(), tmp_path / "cp", "by_machine")
    assert by_machine == [("m1", 2), ("m2", 1)]
    more = sited(spark, tmp_path / "in", [("m3", "Lyon")])
    by_site = table_after(more.groupBy("site").count(), tmp_path / "cp", "by_site")
    # No error: the old machines' counts come back as sites, beside the one new row's site.
    assert by_site == [("Lyon", 1), ("m1", 2), ("m2", 1)]
    said = meaning("STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE")
    assert "not caught" in said and 'groupBy("site")' in said and "old state" in said


def test_a_renamed_aggregate_column_restarts_and_counts_on_from_the_old_values(spark, tmp_path):
    first = sited(spark, tmp_path / "in", [("m1", "Lyon"), ("m1", "Lyon"), ("m2", "Oslo")])
    beats_ = first.groupBy("machine_name").agg(F.count("*").alias("beats"))
    assert table_after(beats_, tmp_path / "cp", "beats") == [("m1", 2), ("m2", 1)]
    more = sited(spark, tmp_path / "in", [("m1", "Lyon")])
    renamed = more.groupBy("machine_name").agg(F.count("*").alias("heartbeats"))
    assert table_after(renamed, tmp_path / "cp", "heartbeats") == [("m1", 3), ("m2", 1)]
    said = meaning("STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE")
    assert "names are not part of the check" in said and "counts on from the old values" in said


def test_an_aggregation_refuses_the_avro_state_encoding(spark, tmp_path):
    # What `site/run-it-for-real.md` quotes, and why an aggregation's state never evolves.
    quoted = "State store encoding format as avro is not supported for operator=aggregation"
    with session_conf(spark, {"spark.sql.streaming.stateStore.encodingFormat": "avro"}):
        with pytest.raises(Exception, match=quoted):
            counted(spark, tmp_path)
    page = (REPO_ROOT / "site" / "run-it-for-real.md").read_text()
    assert quoted in " ".join(page.split())
    assert "avro" not in meaning("STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE").lower()


def test_case_does_not_count_in_a_column_name(spark, tmp_path):
    assert spark.conf.get("spark.sql.caseSensitive") == "false"
    source = beats(spark, tmp_path / "in")
    assert len(source.select("MACHINE_NAME", "Event_Time").schema) == 2
    said = meaning("UNRESOLVED_COLUMN")
    assert "Case does not count" in said and "are exact" not in said


def test_a_file_that_is_not_parquet_is_not_explained_as_a_file_that_is_gone(spark, tmp_path):
    (tmp_path / "table").mkdir()
    (tmp_path / "table" / "part-0.parquet").write_bytes(b"not parquet " * 20)
    with pytest.raises(Exception) as caught:
        spark.read.schema("machine_name STRING").parquet(str(tmp_path / "table")).collect()
    found = spark_errors.conditions(caught.value)
    assert "FAILED_READ_FILE.NO_HINT" in found, found
    assert spark_errors.taught_for(caught.value) is None
    for other in ("CANNOT_READ_FILE_FOOTER", "PARQUET_COLUMN_DATA_TYPE_MISMATCH", "NO_HINT"):
        assert spark_errors.taught(f"FAILED_READ_FILE.{other}") is None


def _append_with_a_watermark(spark, tmp_path):
    windows = (
        beats(spark, tmp_path / "in")
        .withWatermark("event_time", "10 seconds")
        .groupBy(F.window("event_time", "10 seconds"))
        .count()
    )
    run_once(windows, tmp_path / "cp", mode="append")


def _on_a_clock(misstep: str) -> Provocation:
    def run(spark, tmp_path):
        # A processing-time clock runs a batch at every trigger, data or not: an availableNow
        # run ends only without those.
        with session_conf(spark, {"spark.sql.streaming.noDataMicroBatches.enabled": "false"}):
            processed(spark, tmp_path, misstep, "ProcessingTime")

    return run


#: What a sentence gives as the way that works, run on Spark: none of these may raise.
REMEDY: dict[str, Provocation] = {
    "STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION": _append_with_a_watermark,
    "STATEFUL_PROCESSOR_INCORRECT_TIME_MODE_TO_ASSIGN_TTL": _on_a_clock("ttl"),
    "STATEFUL_PROCESSOR_CANNOT_PERFORM_OPERATION_WITH_INVALID_TIME_MODE": _on_a_clock("timer"),
}


@pytest.mark.parametrize("condition", REMEDY)
def test_the_way_a_sentence_gives_runs(condition, spark, tmp_path):
    assert spark_errors.taught(condition) is not None
    REMEDY[condition](spark, tmp_path)


class _Emptied(StatefulProcessor):
    """Fills its list state, empties it with ``clear()``, and says how many items are left."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.seen = handle.getListState("seen", StructType([StructField("s", StringType())]))

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        self.seen.put([(row.machine_name,) for row in rows])
        self.seen.clear()
        yield Row(machine_name=key[0], n=sum(1 for _ in self.seen.get()))


def test_a_list_state_is_emptied_with_clear(spark, tmp_path):
    source = beats(spark, tmp_path / "in")
    emptied = source.groupBy("machine_name").transformWithState(_Emptied(), OUT, "Update", "None")
    assert table_after(emptied, tmp_path / "cp", "emptied", "update") == [("m1", 0), ("m2", 0)]
    assert "`clear()`" in meaning("ILLEGAL_STATE_STORE_VALUE.EMPTY_LIST_VALUE")


def test_a_value_state_set_to_none_fails_in_python_before_spark_sees_it(spark, tmp_path):
    with pytest.raises(Exception) as caught:
        processed(spark, tmp_path, "none")
    assert "TypeError" in str(caught.value)
    assert not any(
        c.startswith("ILLEGAL_STATE_STORE_VALUE") for c in spark_errors.conditions(caught.value)
    )
    assert "None" not in meaning("ILLEGAL_STATE_STORE_VALUE.EMPTY_LIST_VALUE")


# -- the tests ---------------------------------------------------------------------------------


def _condition(case: str) -> str:
    return case.split(" (")[0]


@pytest.mark.parametrize("case", PROVOKE)
def test_spark_raises_the_class_and_the_course_explains_it(case, spark, tmp_path):
    with pytest.raises(Exception) as caught:
        PROVOKE[case](spark, tmp_path)
    condition = _condition(case)
    assert condition in spark_errors.conditions(caught.value), (
        f"Spark no longer raises {condition} for this: {str(caught.value)[:400]}"
    )
    found = spark_errors.taught_for(caught.value)
    assert found is not None and found == spark_errors.taught(condition)
    assert spark_errors.explain(caught.value) == found.sentence()


def test_every_class_in_the_table_is_provoked_and_there_are_twenty():
    provoked = {spark_errors.taught(_condition(case)) for case in PROVOKE}
    assert None not in provoked
    assert provoked == set(spark_errors.TAUGHT)
    assert len(spark_errors.TAUGHT) >= 20


def _sections(lab: registry.Lab) -> set[str]:
    cells = read_cells(lab.notebook(REPO_ROOT / "solutions"))
    return {
        line[3:].strip()
        for cell in cells
        if cell.get("cell_type") == "markdown"
        for line in cell["source"].splitlines()
        if line.startswith("## ")
    }


@pytest.mark.parametrize("entry", spark_errors.TAUGHT, ids=lambda t: t.condition)
def test_the_section_named_is_in_its_lab(entry):
    lab = registry.lab(entry.lab)
    assert entry.section in _sections(lab), f"lab {entry.lab} has no section {entry.section!r}"


def test_the_site_page_is_the_table():
    page = (REPO_ROOT / "site" / "spark-errors.md").read_text()
    assert spark_errors.markdown_table() in page


def test_the_innermost_class_says_why():
    wrapped = RuntimeError(
        "[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: [PYTHON_EXCEPTION] "
        "An exception was thrown from the Python worker. [STATEFUL_PROCESSOR_INCORRECT_TIME_MODE_"
        "TO_ASSIGN_TTL] Cannot use TTL for state=count in timeMode=NoTime"
    )
    assert spark_errors.taught_for(wrapped).condition == (
        "STATEFUL_PROCESSOR_INCORRECT_TIME_MODE_TO_ASSIGN_TTL"
    )
    assert spark_errors.taught_for(RuntimeError("[STREAM_FAILED] nothing taught inside")) is None
    assert spark_errors.explain(ValueError("plain words")) is None


def test_a_check_that_meets_a_taught_class_says_what_it_means(spark):
    from streamlab.grading.verdict import verdict_for

    try:
        _ = spark.createDataFrame([("m1",)], "machine_name STRING").writeStream
    except Exception as error:
        message = verdict_for(error, "0.2").message
    assert message.startswith("Your code raised ")
    assert "WRITE_STREAM_NOT_ALLOWED" in message  # Spark's text is kept
    assert message.endswith(spark_errors.taught("WRITE_STREAM_NOT_ALLOWED").sentence())


def test_a_check_that_reports_a_failed_query_says_what_its_class_means():
    from streamlab.grading.verdict import query_cause

    failed = RuntimeError(
        "[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: "
        "[STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE] Provided key schema does not match existing "
        "state key schema."
    )
    sentence = spark_errors.taught("STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE").sentence()
    # The deepest cause's class first, then Spark's whole message.
    assert query_cause(failed).startswith("STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE: [STREAM_FAILED]")
    assert query_cause(failed).endswith(f"({sentence})")
    assert query_cause(ValueError("plain words")) == "ValueError: plain words"


def test_a_notebook_cell_that_meets_one_says_what_it_means_under_the_traceback(spark, capsys):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shell.run_line_magic("load_ext", "streamlab")
        shell.user_ns["spark"] = spark
        result = shell.run_cell(
            'spark.createDataFrame([("m1",)], "machine_name STRING").writeStream'
        )
        shown = capsys.readouterr().out
        plain = shell.run_cell("raise ValueError('no Spark here')")
        plain_shown = capsys.readouterr().out
    finally:
        InteractiveShell.clear_instance()
    assert result.error_in_exec is not None  # the cell still failed
    traceback_at = shown.index("WRITE_STREAM_NOT_ALLOWED")
    assert shown.index(spark_errors.taught("WRITE_STREAM_NOT_ALLOWED").sentence()) > traceback_at
    assert plain.error_in_exec is not None and "In this course" not in plain_shown
