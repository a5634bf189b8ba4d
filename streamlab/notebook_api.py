"""The names the course's notebooks use from ``streamlab``: its public API, frozen.

A learner's saved notebook imports these names; renaming or removing one breaks it. Every
name a notebook in ``labs/`` or ``solutions/`` uses is listed here with a short example, and
``tests/test_notebook_api.py`` fails when a notebook uses a name that is not listed, when a
listed name no longer exists, or when a listed function or class has no docstring. Everything
else in the package is the course's own machinery and may change freely.
"""

from __future__ import annotations

#: Each public name, as notebooks reach it, with one line that shows it in use.
NOTEBOOK_API: dict[str, str] = {
    # The session and the course's folders
    "streamlab.spark_session": "spark = streamlab.spark_session()",
    "streamlab.work_dir": 'work = streamlab.work_dir("lab04")   # emptied for each run',
    "streamlab.REPO_ROOT": 'notebook = streamlab.REPO_ROOT / "labs"',
    "streamlab.session.HDFS_PROVIDER": "spark.conf.set(PROVIDER, HDFS_PROVIDER)",
    "streamlab.session.ROCKSDB_PROVIDER": "spark.conf.set(PROVIDER, ROCKSDB_PROVIDER)",
    # Waits with a bound
    "streamlab.deadlines.finish": 'finish(query, within=180, what="the query to read its input")',
    "streamlab.deadlines.drain": 'drain(query, within=180, what="the files written so far")',
    "streamlab.deadlines.wait_for": 'wait_for(done.is_set, within=60, what="batch 1", query=q)',
    "streamlab.deadlines.stop": 'stop(query, within=60, what="the held query to stop")',
    # The hub and the producers
    "streamlab.hub.Hub": "hub = Hub(data_dir=work / 'hub', port=0); hub.start()",
    "streamlab.hub.course_connection_string": "connection_string = course_connection_string()",
    "streamlab.hub.partition_for_key": 'partition_for_key("Producer 1", 4)',
    "streamlab.hub_explorer.explore": "explore(connection_string)",
    "streamlab.eventhubs.SCHEMA": "spark.createDataFrame([], SCHEMA)   # one row of the source",
    "streamlab.fleet.Fleet": 'fleet = Fleet(connection_string); fleet.add("Producer 1")',
    "streamlab.fleet.MALFORMED": "for body in MALFORMED: ...",
    "streamlab.sensors.SensorProducer": 'SensorProducer(connection_string, "sensors", plan, speed=20).start()',
    "streamlab.sensors.sensor_plan": 'plan = sensor_plan(["sensor-1", "sensor-2"], 120, outages=[outage])',
    "streamlab.sensors.Outage": 'outage = Outage("sensor-2", start_s=30, end_s=90)',
    # Widgets
    "streamlab.widgets.ProducerPanel": "ProducerPanel(fleet)",
    "streamlab.widgets.StatusBoard": 'board = StatusBoard(fleet=fleet); board.follow_table(spark, "lab04_live")',
    "streamlab.widgets.BacklogMeter": "meter = BacklogMeter(); meter.follow(query)",
    "streamlab.widgets.HubExplorer": "HubExplorer(connection_string)",
    "streamlab.widgets.AlertFeed": 'feed = AlertFeed(); feed.follow_eventhub(connection_string, "alerts")',
    "streamlab.widgets.TimeView": "TimeView.of(query, spark=spark, checkpoint=checkpoint)",
    # Looking inside a query
    "streamlab.progress.backlog": "backlog(query.lastProgress)   # events behind, per partition",
    "streamlab.alerts.AlertListener": "spark.streams.addListener(AlertListener(Thresholds(...)))",
    "streamlab.alerts.Thresholds": "Thresholds(trigger_ms=500, stall_after_ms=5_000)",
    "streamlab.alerts.Alert": "Alert.from_json(event.body_as_str())",
    "streamlab.alerts.STATE_GROWING": "[a for a in alerts if a.rule == STATE_GROWING]",
    "streamlab.alerts.STALLED": "[a for a in alerts if a.rule == STALLED]",
    "streamlab.spark_ui.SparkUI": 'SparkUI.of(spark).state_metrics(query)["StateStoreSave"]',
    "streamlab.spark_ui.metric_value": 'metric_value(metrics["number of total state rows"])',
    "streamlab.benchmarks.show": 'benchmarks.show("state_providers")',
    # The reference monitor and earlier labs' code
    "streamlab.monitor.reference_solution": "LAB05 = reference_solution()",
    "streamlab.monitor.lab04_solution": "LAB04 = lab04_solution()",
    "streamlab.monitor.parse_heartbeats": "parse_heartbeats(events, HEARTBEAT_SCHEMA)",
    "streamlab.monitor.batch_writer": "df.writeStream.foreachBatch(batch_writer(output))",
    "streamlab.monitor.read_transitions": "read_transitions(output)",
    "streamlab.solutions.load_solution": 'LAB05 = load_solution("05")',
    "streamlab.solutions.learner_or_reference": 'LAB04, said = learner_or_reference("04", "4.3", uses="LeanHeartbeatProcessor")',
    # Micro-batches, deliveries and restarts
    "streamlab.tws_batches.spark_batch": "spark_batch(tester, now_ms, {key: rows})",
    "streamlab.tws_batches.pending_timers": "pending_timers(tester, key)",
    "streamlab.tws_batches.register_timer": "register_timer(tester, key, expiry_ms)",
    "streamlab.tws_batches.spark_initial_state": "spark_initial_state(tester, now_ms, rows)",
    "streamlab.deliveries.deliver": "deliver(folder, rows)",
    "streamlab.deliveries.write_deliveries": "write_deliveries(folder, DELIVERIES)",
    "streamlab.deliveries.read_deliveries": "read_deliveries(spark, folder, schema)",
    "streamlab.deliveries.run_deliveries": "batches = run_deliveries(df, checkpoint)",
    "streamlab.deliveries.feed": "feed(query, folder, rows)",
    "streamlab.deliveries.recorder": "emitted, record = recorder()",
    "streamlab.restart_trials.run_available_now": "run_available_now(df, checkpoint, output)",
    "streamlab.restart_trials.try_restart": 'try_restart("a filter", build, checkpoint, output, work)',
    "streamlab.restart_trials.session_conf": "with session_conf(spark, {KEY: 'true'}): ...",
    "streamlab.restart_trials.error_class": "error_class(error)",
    "streamlab.restart_trials.batches": 'batches(checkpoint / "offsets")',
    "streamlab.spark_private.repartition_state": "repartition_state(spark, checkpoint, 4)",
    "streamlab.spark_private.NeedsClassicSession": "except NeedsClassicSession: ...   # over Spark Connect",
    "streamlab.spark_private.over_connect": "if over_connect(spark): ...   # a Spark Connect client",
    "streamlab.delta.delta_writer": "df.writeStream.foreachBatch(delta_writer(table))",
    "streamlab.delta.fan_out": "df.writeStream.foreachBatch(fan_out(delta_writer(a), delta_writer(b)))",
    "streamlab.delta.read_table": "read_table(table)",
    # An answer cell in labs/ runs once its exercise has been graded (require_graded: the
    # guard line a notebook saved before answer_cell came starts its answer cells with)
    "streamlab.grading.answer_cell": 'answer_cell("2.4", "c31")   # shows and runs the solved cell c31 once %check 2.4 ran',
    "streamlab.grading.require_graded": 'require_graded("2.4")   # stops the cell until %check 2.4 ran',
    "streamlab.grading.heartbeat_checks.Meter": "meter = Meter(tester); meter.take()",
}
