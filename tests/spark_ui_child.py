"""A Spark session with its web UI and one stateful query running, for the UI's tests.

``python spark_ui_child.py CHECKPOINT``: prints the session's "Spark UI: ..." line, then one
JSON line (the query's run id, name and a finished batch's progress report), and keeps the
query running until its standard input closes.
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import functions as F

import streamlab
from streamlab import processes

NAME = "machine_counts"

spark = streamlab.spark_session("local[2]", ui=True)
ticks = spark.readStream.format("rate").option("rowsPerSecond", 20).load()
counts = (
    ticks.withWatermark("timestamp", "5 seconds")
    .groupBy(F.window("timestamp", "2 seconds"), (F.col("value") % 10).alias("machine"))
    .count()
)
query = (
    counts.writeStream.format("noop")
    .queryName(NAME)
    .outputMode("append")
    .option("checkpointLocation", sys.argv[1])
    .trigger(processingTime="500 milliseconds")
    .start()
)


def telling(progress) -> bool:
    # A batch with state and a watermark: every chart and metric has something to show.
    watermark = progress["eventTime"].get("watermark", "1970")
    return progress["stateOperators"][0]["numRowsTotal"] > 0 and not watermark.startswith("1970")


processes.wait_until(lambda: any(map(telling, query.recentProgress)), timeout=240, every=0.2)
shown = next(p for p in query.recentProgress if telling(p))
print(
    json.dumps({"run_id": str(query.runId), "name": query.name, "progress": json.loads(shown.json)})
)
sys.stdout.flush()
sys.stdin.read()
query.stop()
spark.stop()
