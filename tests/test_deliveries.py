"""Deliveries: one file per micro-batch, in order, and what each batch emitted."""

from __future__ import annotations

from pyspark.sql import functions as F

from streamlab.deliveries import (
    deliver,
    feed,
    read_deliveries,
    recorder,
    run_deliveries,
    write_deliveries,
)

SCHEMA = "machine_name STRING, event_time TIMESTAMP"


def beat(machine: str, second: int) -> dict:
    return {"machine_name": machine, "event_time": f"2026-11-22T10:00:{second:02d}Z"}


def test_each_delivery_is_one_micro_batch_in_order(spark, tmp_path):
    write_deliveries(
        tmp_path / "in", [[beat("b", 2), beat("a", 1)], [beat("c", 3)], [beat("d", 4)]]
    )
    batches = run_deliveries(read_deliveries(spark, tmp_path / "in", SCHEMA), tmp_path / "ck")
    assert [(b.batch_id, b.input_rows) for b in batches] == [(0, 2), (1, 1), (2, 1)]
    assert [sorted(r["machine_name"] for r in b.rows) for b in batches] == [
        ["a", "b"],
        ["c"],
        ["d"],
    ]
    # Timestamps as the text Spark writes in the session's time zone (UTC), not local datetimes.
    assert batches[1].rows == [{"machine_name": "c", "event_time": "2026-11-22 10:00:03"}]


def test_a_stateful_run_records_watermark_state_and_the_closing_batch(spark, tmp_path):
    write_deliveries(tmp_path / "in", [[beat("a", 1), beat("a", 2)], [beat("a", 30)]])
    counts = (
        read_deliveries(spark, tmp_path / "in", SCHEMA)
        .withWatermark("event_time", "5 seconds")
        .groupBy(F.window("event_time", "10 seconds"))
        .count()
    )
    batches = run_deliveries(counts, tmp_path / "ck")
    # The second delivery moves the watermark to 10:00:25: Spark adds a batch without data
    # that closes the first window.
    assert [b.batch_id for b in batches] == [0, 1, 2]
    assert [b.watermark for b in batches] == [
        "1970-01-01T00:00:00.000Z",
        "2026-11-22T09:59:57.000Z",
        "2026-11-22T10:00:25.000Z",
    ]
    assert [b.state_rows for b in batches] == [[1], [2], [1]]
    assert batches[0].operators == ["stateStoreSave"]
    assert batches[2].rows == [
        {"window": {"start": "2026-11-22 10:00:00", "end": "2026-11-22 10:00:10"}, "count": 2}
    ]


def test_feed_returns_once_the_running_query_has_read_the_delivery(spark, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    emitted, record = recorder()
    query = (
        spark.readStream.schema(SCHEMA)
        .json(str(folder))
        .writeStream.foreachBatch(record)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )
    try:
        for second in range(3):
            feed(query, folder, [beat(f"m{second}", second)])
            assert [r["machine_name"] for r in emitted[second]] == [f"m{second}"]
    finally:
        query.stop()


def test_deliveries_land_after_the_files_already_there(tmp_path):
    first = deliver(tmp_path, [beat("a", 1)])
    second = deliver(tmp_path, [])
    assert (first.name, second.name) == ("delivery-0000.json", "delivery-0001.json")
    assert first.stat().st_mtime < second.stat().st_mtime
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())


def test_what_a_servers_foreachbatch_left_on_disk_reads_as_the_recorded_batches(tmp_path):
    # Over Spark Connect the recorder's function runs in the server's Python process, which
    # leaves each batch's rows in the dict's folder: the notebook's dict reads them from there.
    import pickle

    from streamlab.deliveries import Recorded

    emitted = Recorded(tmp_path)
    assert not emitted and 0 not in emitted
    (tmp_path / "0.pickle").write_bytes(pickle.dumps([{"machine_name": "m1"}]))
    (tmp_path / "1.pickle").write_bytes(pickle.dumps([]))
    assert sorted(emitted) == [0, 1] and emitted[0] == [{"machine_name": "m1"}]
    assert emitted.get(1) == [] and emitted.get(2, "none") == "none" and len(emitted) == 2
