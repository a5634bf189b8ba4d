"""Checks for lab 00 · Orientation."""

import json
from pathlib import Path

from streamlab.grading import exercise

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"
PARTITIONS = "spark.sql.shuffle.partitions"
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"


def _config(nb, partitions):
    conf = nb.build_session_config(partitions)
    assert isinstance(conf, dict), (
        f"build_session_config() should return a dict of settings, and it returned "
        f"{type(conf).__name__}."
    )
    return conf


@exercise("0.1")
def test_config_has_the_three_settings(nb):
    conf = _config(nb, 2)
    missing = [key for key in (PROVIDER, PARTITIONS, CHANGELOG) if key not in conf]
    assert not missing, f"The configuration has no {', '.join(missing)}."


@exercise("0.1")
def test_config_values_are_strings(nb):
    conf = _config(nb, 2)
    wrong = {k: v for k, v in conf.items() if not isinstance(v, str)}
    assert not wrong, (
        f"Every value should be a string, as Spark's configuration stores them; these are not: "
        f"{wrong}."
    )


@exercise("0.1")
def test_config_selects_rocksdb_with_changelog(nb):
    conf = _config(nb, 2)
    assert conf.get(PROVIDER) == ROCKSDB, (
        f"{PROVIDER} should name the RocksDB provider class, {ROCKSDB}; it is {conf.get(PROVIDER)!r}."
    )
    assert str(conf.get(CHANGELOG)).lower() == "true", f'{CHANGELOG} should be "true".'


@exercise("0.1")
def test_config_uses_the_requested_partitions(nb):
    for partitions in (2, 7):
        conf = _config(nb, partitions)
        assert conf.get(PARTITIONS) == str(partitions), (
            f'build_session_config({partitions}) should set {PARTITIONS} to "{partitions}"; '
            f"it set {conf.get(PARTITIONS)!r}."
        )


def _heartbeats(folder: Path, name: str, rows: list[tuple[str, str]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"machine_name": m, "machine_time": t}) for m, t in rows]
    (folder / f"{name}.json").write_text("\n".join(lines) + "\n")


FIRST = [
    ("m1", "2026-11-22T10:00:00Z"),
    ("m2", "2026-11-22T10:00:00Z"),
    ("m1", "2026-11-22T10:00:01Z"),
    ("m2", "2026-11-22T10:00:01Z"),
    ("m3", "2026-11-22T10:00:02Z"),
]
SECOND = [("m1", "2026-11-22T10:00:05Z"), ("m3", "2026-11-22T10:00:05Z")]


def _run(nb, spark, incoming, output, checkpoint_dir):
    progress = nb.run_once(spark, str(incoming), str(output), checkpoint_dir)
    assert isinstance(progress, dict), (
        f"run_once() should return query.lastProgress (a dict); it returned "
        f"{type(progress).__name__}. Did you forget the return, or return before the query ended?"
    )
    assert not spark.streams.active, (
        "The query is still running after run_once() returned: use trigger(availableNow=True) "
        "and wait with query.awaitTermination()."
    )
    return progress


def _output_rows(spark, output):
    assert Path(output, "_spark_metadata").is_dir(), (
        'No parquet output in output_dir: write with .writeStream.format("parquet") and '
        '.option("path", output_dir).'
    )
    return sorted(
        (r.machine_name, r.machine_time.strftime("%H:%M:%S"))
        for r in spark.read.parquet(str(output)).collect()
    )


def _expected(rows):
    return sorted((m, t[11:19]) for m, t in rows)


@exercise("0.2", timeout=120)
def test_run_once_reads_every_heartbeat(nb, spark, tmp_path, checkpoint_dir):
    incoming, output = tmp_path / "incoming", tmp_path / "output"
    _heartbeats(incoming, "a", FIRST)
    progress = _run(nb, spark, incoming, output, checkpoint_dir)
    rows = _output_rows(spark, output)
    assert rows == _expected(FIRST), (
        f"The output should hold the {len(FIRST)} heartbeats of the input with machine_name and "
        f"machine_time parsed; it holds {rows}."
    )
    assert progress.get("numInputRows") == len(FIRST), (
        f"lastProgress says {progress.get('numInputRows')} input rows; the folder has {len(FIRST)}."
    )


@exercise("0.2", timeout=120)
def test_run_once_resumes_from_its_checkpoint(nb, spark, tmp_path, checkpoint_dir):
    incoming, output = tmp_path / "incoming", tmp_path / "output"
    _heartbeats(incoming, "a", FIRST)
    _run(nb, spark, incoming, output, checkpoint_dir)
    assert Path(checkpoint_dir, "commits").is_dir(), (
        'No commits/ folder in checkpoint_dir: set .option("checkpointLocation", checkpoint_dir).'
    )
    _heartbeats(incoming, "b", SECOND)
    progress = _run(nb, spark, incoming, output, checkpoint_dir)
    assert progress.get("numInputRows") == len(SECOND), (
        f"A second run on the same checkpoint should read only the new file ({len(SECOND)} rows); "
        f"it read {progress.get('numInputRows')}."
    )
    assert _output_rows(spark, output) == _expected(FIRST + SECOND), (
        "After two runs the output should hold every heartbeat exactly once."
    )


PROGRESS = {
    "id": "q",
    "batchId": 3,
    "numInputRows": 120,
    "durationMs": {"addBatch": 50, "triggerExecution": 275},
}


@exercise("0.3")
def test_summary_reads_the_three_numbers(nb):
    summary = nb.summarise_progress(PROGRESS)
    assert isinstance(summary, str), (
        f"summarise_progress() should return a str; it returned {type(summary).__name__}."
    )
    assert summary == "batch 3: 120 rows in 275 ms", (
        f"Expected 'batch 3: 120 rows in 275 ms', got {summary!r}."
    )


@exercise("0.3")
def test_summary_of_another_report(nb):
    other = {**PROGRESS, "batchId": 0, "numInputRows": 0, "durationMs": {"triggerExecution": 9}}
    summary = nb.summarise_progress(other)
    assert summary == "batch 0: 0 rows in 9 ms", (
        f"Expected 'batch 0: 0 rows in 9 ms', got {summary!r}: are the numbers read from the "
        "report, not written in?"
    )
