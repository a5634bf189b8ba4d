"""``python -m streamlab.monitor``: the reference heartbeat pipeline, headless.

Reads heartbeats from an event hub, runs the course's most correct processor, lab 05's
``CatchUpProcessor`` (of ``solutions/05-restart-recovery``, loaded the way the grader loads
it: one source, no second copy) on the RocksDB state store, and appends each micro-batch's
transitions as parquet under ``--output/batch_id=N``. It runs until SIGTERM or Ctrl-C. A new
checkpoint keeps its state in the Avro encoding, so that a later release of the processor can
add, drop or widen a field of its state; a checkpoint started without it keeps the default.

Silence is judged from the heartbeats' own time (the hub's enqueue time), per event hub
partition: a machine's ``Unhealthy`` row says it changed at its last heartbeat + the timeout,
and ``noticed_time`` says when the monitor saw it. A restart after any downtime reports what
happened while it was down, and nothing that did not.

Exactly once across restarts, kill -9 included: a batch's folder is written under a
temporary name and renamed into place, replacing whatever an earlier attempt at the same
batch left. Spark replays an uncommitted batch with the same input and the state of the
batch before it, so the folder of every batch id holds one attempt's transitions, never two.

The monitor watches its own query with the course's alert rules (``streamlab.alerts``): when
the query stops with an error, or shows no progress for the stall bound (``--stall-seconds``;
by default ten triggers and at least 30 s, 120 s before its first micro-batch), it says so in one sentence on stderr, stops the
query and starts it again on the same checkpoint, at most ``--max-restarts`` times in a row (a
restarted query that completes a micro-batch starts the count again). Past that, or when a
stalled query cannot even be stopped, it exits with code 1 and a sentence saying why, for
whatever supervises it to act. SIGTERM and Ctrl-C stop it cleanly, with code 0.
"""

from __future__ import annotations

import argparse
import queue
import re
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from streamlab import deadlines, processes
from streamlab.alerts import (
    MIN_STALL_MS,
    STALLED,
    Alert,
    AlertListener,
    Thresholds,
    error_summary,
    failed,
)
from streamlab.solutions import SOLUTIONS_DIR, load_solution
from streamlab.transitions import DEFAULT_WRITER, batch_writer

# The sink has a module of its own; the notebooks and the benchmarks name it from here.
from streamlab.transitions import read_transitions as read_transitions

#: Lab 04's solution notebook, for a caller that loads it under a module name of its own.
LAB04 = SOLUTIONS_DIR / "04-transform-with-state" / "04-transform-with-state.ipynb"


# The defaults below are what ``bench/batch_breakdown.py`` found to cut the time from a
# heartbeat to its transition row on 2 cores; its results page has the figures.

#: How often a micro-batch starts. A batch with data takes longer than this on 2 cores, so
#: the next one starts as soon as it ends; ``0 seconds`` measured no faster (with
#: processing-time timers every trigger runs a batch, data or not).
DEFAULT_TRIGGER = "250 milliseconds"
#: Settings of the monitor's own Spark session (``python -m streamlab.monitor``). One shuffle
#: partition: a heartbeat batch is small, and each partition is a task, a Python worker round
#: trip and a state store commit. A checkpoint keeps the number it was started with.
SESSION_CONF: dict[str, str] = {"spark.sql.shuffle.partitions": "1"}
#: Settings of the monitor's query alone, in force while it starts. Avro lets the processor's
#: state gain, drop or widen a field in a later release, and a checkpoint keeps the encoding of
#: its first batch for good; PySpark 4.3 refuses Avro for an aggregation or a
#: ``dropDuplicates``, so the rest of the session keeps the default.
QUERY_CONF: dict[str, str] = {"spark.sql.streaming.stateStore.encodingFormat": "avro"}
#: How many times in a row the monitor restarts a query that failed or stalled.
DEFAULT_MAX_RESTARTS = 3
#: Seconds between a query's end and its restart: a fault that lasts a moment (a hub that
#: restarts) has passed, and one that stays is not hammered.
RESTART_PAUSE = 2.0


def reference_solution() -> ModuleType:
    """Lab 05's graded cells, solved: ``CatchUpProcessor``, ``catch_up_changes``, schemas."""
    return load_solution("05")


def lab04_solution() -> ModuleType:
    """Lab 04's graded cells, solved: ``LeanHeartbeatProcessor``, ``status_changes``, schemas.

    The teaching step before lab 05: it judges silence by processing time, so a restart after
    a short downtime can report machines that never stopped as Unhealthy.
    """
    return load_solution("04")


def parse_heartbeats(events, schema):
    """Typed heartbeats from ``eventhubs`` rows (lab 04's schema); malformed bodies are left out."""
    from pyspark.sql import functions as F

    parsed = events.select(F.from_json(F.col("body").cast("string"), schema).alias("h"))
    return parsed.select("h.*").where(F.col("machine_name").isNotNull())


def reference_transitions(
    spark,
    connection_string: str,
    *,
    eventhub: str = "heartbeats",
    timeout_seconds: float = 5.0,
    max_events_per_trigger: int | None = None,
    lab: ModuleType | None = None,
    source_options: dict | None = None,
    retire_after_hours: float = 24.0,
):
    """The reference pipeline as a streaming DataFrame of transition rows.

    Columns: ``machine_name, status, previous_status, last_status_change_time, noticed_time``.
    ``source_options`` adds options of the ``eventhubs`` source (``receiveOn``, ``eventsPerTask``).
    A machine silent for ``retire_after_hours`` is forgotten (lab 05's retirement).
    """
    lab = lab or reference_solution()
    reader = (
        spark.readStream.format("eventhubs")
        .option("connectionString", connection_string)
        .option("eventHubName", eventhub)
        .option("startingPosition", "earliest")
        .option("systemProperties", "true")
    )  # how far each partition was read
    if max_events_per_trigger:
        reader = reader.option("maxEventsPerTrigger", max_events_per_trigger)
    for key, value in (source_options or {}).items():
        reader = reader.option(key, value)
    processor = lab.CatchUpProcessor(
        timeout_ms=int(timeout_seconds * 1000),
        retire_after_ms=int(retire_after_hours * 3_600_000),
    )
    return lab.catch_up_changes(lab.parse_heartbeats(reader.load()), processor)


def session_and_lab(loader=reference_solution, *, app_name: str = "streamlab-monitor"):
    """The monitor's Spark session and the lab it runs (``loader()``), loaded side by side.

    Starting a JVM is the largest part of a (re)start; loading the lab from its notebook
    (reading and running its graded cells) hides behind it instead of coming first.
    """
    from concurrent.futures import ThreadPoolExecutor

    from streamlab.session import spark_session

    with ThreadPoolExecutor(1, thread_name_prefix="streamlab-lab-load") as pool:
        lab = pool.submit(loader)
        spark = spark_session(app_name=app_name, conf=SESSION_CONF)
        return spark, lab.result()


def start(
    spark,
    connection_string: str,
    checkpoint: str,
    output: str,
    *,
    eventhub: str = "heartbeats",
    timeout_seconds: float = 5.0,
    trigger: str = DEFAULT_TRIGGER,
    max_events_per_trigger: int | None = None,
    writer: str = DEFAULT_WRITER,
    lab: ModuleType | None = None,
    retire_after_hours: float = 24.0,
):
    """Start the reference monitor query in ``spark``, its state in the Avro encoding
    (:data:`QUERY_CONF`, the session put back as found); return the StreamingQuery."""
    transitions = reference_transitions(
        spark,
        connection_string,
        eventhub=eventhub,
        timeout_seconds=timeout_seconds,
        retire_after_hours=retire_after_hours,
        lab=lab,
        max_events_per_trigger=max_events_per_trigger,
    )
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    query_writer = (
        transitions.writeStream.queryName("heartbeat_monitor")
        .foreachBatch(batch_writer(out, writer))
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=trigger)
    )
    from streamlab.session import session_conf

    # Spark reads the session's settings when the query starts: put back at once, as found.
    with session_conf(spark, QUERY_CONF):
        return query_writer.start()


def command(connection_string: str, checkpoint: Path, output: Path, *extra: str) -> list[str]:
    """The command line that runs this monitor in a process of its own (``extra``: more
    options, such as ``--trigger``)."""
    return [
        sys.executable,
        "-m",
        "streamlab.monitor",
        "--connection-string",
        connection_string,
        "--checkpoint",
        str(checkpoint),
        "--output",
        str(output),
        *extra,
    ]


_UNITS_MS = {"millisecond": 1, "second": 1_000, "minute": 60_000, "hour": 3_600_000}


def trigger_ms(trigger: str) -> float | None:
    """A trigger interval such as ``"250 milliseconds"`` or ``"2 seconds"`` in milliseconds;
    None for a form this does not read (Spark reads more)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]+?)s?\s*", trigger.lower())
    if match is None or match[2] not in _UNITS_MS:
        return None
    return float(match[1]) * _UNITS_MS[match[2]]


def _say(sentence: str) -> None:
    print(f"monitor: {sentence}", file=sys.stderr, flush=True)


#: Why a query is restarted, as the restart's sentence says it.
FAILED_TO_START = "its query could not start"
FAILED_QUERY = "its query stopped with an error"
ENDED = "its query stopped"
STALLED_QUERY = "its query stalled"


def _why_it_ended(query: Any) -> tuple[str, str]:
    """Why a query that is no longer active ended, and the sentence that says so."""
    try:
        error = query.exception()
        last = query.lastProgress
    except Exception as gone:  # the session itself went away
        return ENDED, f"its query ended and Spark could not say why: {error_summary(str(gone))}"
    text = str(error) if error else None
    alert = failed([last] if last else [], text, datetime.now(UTC), query=query.name)
    if alert is None:
        return ENDED, f"query {query.name}: stopped without an error, and nobody had asked it to."
    return FAILED_QUERY, alert.message


def _completed_a_batch(query: Any) -> bool:
    try:
        return query.lastProgress is not None
    except Exception:  # asked after the session ended
        return False


def _watch(
    query: Any, stop: threading.Event, stalls: queue.Queue, every: float
) -> tuple[str, str] | None:
    """Wait until ``stop`` is set (None), or ``query`` ends or stalls: why, and the sentence."""
    while not stop.wait(every):
        if not query.isActive:
            return _why_it_ended(query)
        try:
            alert: Alert = stalls.get_nowait()
        except queue.Empty:
            continue
        if alert.rule == STALLED and alert.query == query.name:
            return STALLED_QUERY, alert.message
    return None


def _drain(stalls: queue.Queue) -> None:
    while True:
        try:
            stalls.get_nowait()
        except queue.Empty:
            return


def supervise(
    start_query: Callable[[], Any],
    *,
    stop: threading.Event,
    stalls: queue.Queue,
    max_restarts: int = DEFAULT_MAX_RESTARTS,
    pause: float = RESTART_PAUSE,
    every: float = 0.5,
    stop_within: float = deadlines.STOP_WITHIN,
    started: Callable[[], None] = lambda: None,
) -> int:
    """Run ``start_query()``'s query until ``stop`` is set; restart it when it fails or stalls.

    ``stalls`` receives the :data:`~streamlab.alerts.STALLED` alerts of a listener (see
    :func:`main`); ``started()`` is called once the first query runs. Each wait has a bound:
    ``every`` between looks at the query, ``stop_within`` for a stop. Returns the exit code:
    0 when stopped, 1 when the restarts are used up or a query cannot be stopped.
    """
    restarts, first = 0, True
    while not stop.is_set():
        _drain(stalls)  # alerts about an earlier run of the query
        try:
            query = start_query()
        except Exception as error:
            query, why = None, _could_not_start(error)
        else:
            if first:
                started()
                first = False
            watched = _watch(query, stop, stalls, every)
            if watched is None:  # asked to stop
                return _stop_on_request(query, stop_within)
            why = watched
            if _completed_a_batch(query):
                restarts = 0
        cause, sentence = why
        _say(sentence)
        if query is not None and not _stopped_for_restart(query, stop_within):
            return 1
        if restarts >= max_restarts:
            _say(
                f"giving up after {restarts} restart(s) in a row without a completed "
                "micro-batch: exiting with code 1, for a supervisor to act on the sentences "
                "above."
            )
            return 1
        restarts += 1
        _say(
            f"restart {restarts} of {max_restarts} in {pause:g} s, on the same checkpoint, "
            f"because {cause}."
        )
        stop.wait(pause)
    return 0


def _could_not_start(error: Exception) -> tuple[str, str]:
    """Why a query that raised as it started is restarted, and the sentence that says so."""
    text = error_summary(f"{type(error).__name__}: {error}")
    return FAILED_TO_START, f"its query could not start: {text}"


def _stop_on_request(query: Any, stop_within: float) -> int:
    """Stop the query as asked: exit code 0, or 1 when it does not stop in time."""
    try:
        deadlines.stop(query, within=stop_within, what="the monitor's query to stop")
    except deadlines.QueryStalled as stuck:
        _say(f"{stuck} Exiting with code 1.")
        return 1
    return 0


def _stopped_for_restart(query: Any, stop_within: float) -> bool:
    """Stop a query that failed or stalled, if it still runs; False when it does not stop."""
    if not query.isActive:
        return True
    try:
        deadlines.stop(query, within=stop_within, what="the stalled query to stop")
    except deadlines.QueryStalled as stuck:
        _say(
            f"{stuck} It holds its checkpoint, so it cannot be started again here: "
            "exiting with code 1, for a supervisor to start the monitor again."
        )
        return False
    return True


def _parser() -> argparse.ArgumentParser:
    """The monitor's command line."""
    parser = argparse.ArgumentParser(
        prog="python -m streamlab.monitor",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--connection-string", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--eventhub", default="heartbeats")
    parser.add_argument("--timeout-seconds", type=float, default=5.0)
    parser.add_argument(
        "--retire-after-hours",
        type=float,
        default=24.0,
        help="forget a machine silent this long (longer than --timeout-seconds)",
    )
    parser.add_argument("--trigger", default=DEFAULT_TRIGGER)
    parser.add_argument(
        "--max-events-per-trigger",
        type=int,
        default=None,
        help="read a backlog in micro-batches of at most this many events",
    )
    parser.add_argument(
        "--max-restarts",
        type=int,
        default=DEFAULT_MAX_RESTARTS,
        help="restarts in a row of a query that failed or stalled before the monitor exits "
        f"with code 1 (default {DEFAULT_MAX_RESTARTS})",
    )
    parser.add_argument(
        "--stall-seconds",
        type=float,
        default=None,
        help="seconds without progress that make the query stalled (default: ten triggers, "
        "at least 30 s, and 120 s before its first micro-batch)",
    )
    return parser


def _stall_listener(args: argparse.Namespace) -> tuple[AlertListener, queue.Queue[Alert]]:
    """A listener of the alert rules, and the queue it puts each stall alert on."""
    thresholds = Thresholds(
        trigger_ms=trigger_ms(args.trigger),
        stall_after_ms=args.stall_seconds * 1000 if args.stall_seconds else None,
    )
    if thresholds.stall_bound_ms() is None:  # a trigger this does not read: the least bound
        thresholds = Thresholds(stall_after_ms=MIN_STALL_MS)
    stalls: queue.Queue[Alert] = queue.Queue()

    def hand_over(alerts: list[Alert]) -> None:
        for alert in alerts:
            if alert.rule == STALLED:
                stalls.put(alert)

    return AlertListener(thresholds, send=hand_over), stalls


def main(argv: list[str] | None = None) -> int:
    """Run the monitor until SIGTERM or Ctrl-C (the module says how); return the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.retire_after_hours * 3600 <= args.timeout_seconds:
        parser.error(
            f"--retire-after-hours {args.retire_after_hours:g} is not longer than "
            f"--timeout-seconds {args.timeout_seconds:g}: a machine must be Unhealthy before "
            "it is forgotten."
        )
    stop = processes.stop_requested()
    listener, stalls = _stall_listener(args)
    spark, lab = session_and_lab()
    spark.streams.addListener(listener)

    def start_query():
        return start(
            spark,
            args.connection_string,
            args.checkpoint,
            args.output,
            eventhub=args.eventhub,
            timeout_seconds=args.timeout_seconds,
            retire_after_hours=args.retire_after_hours,
            trigger=args.trigger,
            max_events_per_trigger=args.max_events_per_trigger,
            lab=lab,
        )

    try:
        code = supervise(
            start_query,
            stop=stop,
            stalls=stalls,
            max_restarts=args.max_restarts,
            started=lambda: print(f"monitor running: transitions in {args.output}", flush=True),
        )
    finally:
        spark.streams.removeListener(listener)
        listener.close()
    if code == 0:
        print("monitor stopped", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
