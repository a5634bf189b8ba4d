"""Lab 04's heartbeat query over Spark Connect, against the hub, with SDK producers.

``streamlab.connect.ConnectServer`` starts the server from the installed PySpark with the
course's configuration; a client process with ``STREAMLAB_SPARK_REMOTE`` set (no JVM of its
own) gets its session from ``streamlab.spark_session()`` and runs what the labs run over
Connect: the ``eventhubs`` Python data source, lab 04's transformWithState processor, a
``StreamingQueryListener`` (lab 06), and the state data source reads (lab 05). Its progress
reports and its listener's events read as a classic session's do, and what needs a classic
session says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from streamlab.connect import ConnectServer
from streamlab.fleet import Fleet
from streamlab.paths import REPO_ROOT
from streamlab.session import ROCKSDB_PROVIDER

MACHINES = ["m1", "m2"]

CLIENT = """
import json, os, sys, time
from pyspark.sql.streaming import StreamingQueryListener
import streamlab
from streamlab.grading.loader import load_notebook
from streamlab.deadlines import _describe_progress
from streamlab.monitor import LAB04, parse_heartbeats
from streamlab.progress import as_dict
from streamlab.spark_ui import SparkUI
from streamlab.widgets.time_view import time_batches

connection_string, checkpoint, machines = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
spark = streamlab.spark_session()
lab = load_notebook(LAB04, module_name="lab04_over_connect").module
progress = []

class Progress(StreamingQueryListener):
    def onQueryStarted(self, event): pass
    def onQueryProgress(self, event):
        progress.append((event.progress.batchId, event.progress["numInputRows"]))
    def onQueryIdle(self, event): pass
    def onQueryTerminated(self, event): pass

listener = Progress()
spark.streams.addListener(listener)
events = (spark.readStream.format("eventhubs").option("connectionString", connection_string)
          .option("eventHubName", "heartbeats").option("startingPosition", "earliest").load())
query = (lab.status_changes(parse_heartbeats(events, lab.HEARTBEAT_SCHEMA),
                            lab.LeanHeartbeatProcessor())
         .writeStream.format("memory").queryName("transitions")
         .option("checkpointLocation", checkpoint)
         .trigger(processingTime="500 milliseconds").start())
deadline = time.monotonic() + 240
while time.monotonic() < deadline and query.exception() is None:
    rows = [r.asDict() for r in spark.sql("SELECT * FROM transitions").collect()]
    if all([r["status"] for r in rows if r["machine_name"] == m][:2] == ["Initializing", "Healthy"]
           for m in machines):
        break
    time.sleep(0.5)
query.stop()
reports = query.recentProgress
try:
    from streamlab.spark_private import repartition_state
    repartition_state(spark, checkpoint, 4)
    classic_only = None
except Exception as error:
    classic_only = f"{type(error).__name__}: {error}"
state = spark.read.format("statestore").option("stateVarName", "machine").load(checkpoint)
print(json.dumps({
    "session": type(spark).__module__,
    "local_jvm": __import__("pyspark").SparkContext._active_spark_context is not None,
    "provider": spark.conf.get("spark.sql.streaming.stateStore.providerClass"),
    "error": str(query.exception()) if query.exception() else None,
    "transitions": [[r["machine_name"], r["status"]] for r in rows],
    "progress": progress,
    "summaries": [f"batch {p['batchId']}: {p['numInputRows']} rows" for p in reports],
    "rows_from_sources": [(p.batchId, sum(s["numInputRows"] for s in p["sources"])) for p in reports],
    "as_dict": [as_dict(p).get("numInputRows") for p in reports],
    "described": _describe_progress(query.lastProgress),
    "time_view": [b.input_rows for b in time_batches(reports, spark=spark, checkpoint=checkpoint)],
    "classic_only": classic_only,
    "ui_app": SparkUI.of(spark).app_id,
    "server_app": spark.conf.get("spark.app.id"),
    "operators": [r.operatorName for r in
                  spark.read.format("state-metadata").load(checkpoint).collect()],
    "state": {r.key.machine_name: r.value.status for r in state.collect()},
}), flush=True)
# Over Connect a listener's events arrive on a thread that keeps the process alive, and
# removing the listener waits for the server to end that stream: leave without either.
os._exit(0)
"""


def test_lab04_heartbeat_query_runs_over_spark_connect(hub, tmp_path):
    with (
        ConnectServer(log_dir=tmp_path / "connect") as server,
        Fleet(hub.connection_string) as fleet,
    ):
        assert server.url.startswith("sc://127.0.0.1:")
        for name in MACHINES:
            fleet.add(name)
        client = subprocess.run(
            [
                sys.executable,
                "-c",
                CLIENT,
                hub.connection_string,
                str(tmp_path / "checkpoint"),
                ",".join(MACHINES),
            ],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=400,
            env={**os.environ, "STREAMLAB_SPARK_REMOTE": server.url},
        )
    assert client.returncode == 0, client.stderr[-3000:]
    seen = json.loads(client.stdout.strip().splitlines()[-1])
    assert seen["session"] == "pyspark.sql.connect.session"
    assert seen["provider"] == ROCKSDB_PROVIDER
    assert seen["error"] is None
    for machine in MACHINES:
        statuses = [status for name, status in seen["transitions"] if name == machine]
        assert statuses[:2] == ["Initializing", "Healthy"], seen["transitions"]
    # Lab 06's listener heard the batches; lab 05's readers see the operator and its state.
    assert seen["progress"] and seen["progress"][0][0] == 0
    # Every report counts its rows, as on a classic session: "batch 0: 4 rows", not "None rows".
    rows = dict(seen["rows_from_sources"])
    assert sum(rows.values()) > 0
    assert seen["summaries"] == [f"batch {b}: {n} rows" for b, n in rows.items()]
    assert seen["as_dict"] == list(rows.values())
    heard = {batch: n for batch, n in seen["progress"] if batch in rows}
    assert heard and heard == {batch: rows[batch] for batch in heard}
    assert "None input row" not in seen["described"], seen["described"]
    assert seen["time_view"] == list(rows.values())  # the TimeView widget's rows in
    # Offline repartitioning needs the driver's JVM: a sentence says so, not the release.
    assert seen["classic_only"].startswith(
        "NeedsClassicSession: Offline repartitioning needs a classic Spark session"
    ), seen["classic_only"]
    assert seen["operators"] == ["transformWithStateInPySparkExec"]
    assert seen["state"] == {machine: "Healthy" for machine in MACHINES}
    # Spark's web UI, for lab 06's tour, is the server's: the client finds it.
    assert seen["ui_app"] == seen["server_app"]
    # The client started no JVM of its own: the server did the work.
    assert seen["local_jvm"] is False
