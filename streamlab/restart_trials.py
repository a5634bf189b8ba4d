"""Restart a stopped streaming query with a change, on a copy of its checkpoint, and say what Spark did.

Lab 10 measures which changes a checkpoint accepts on this machine, and its checks grade a
learner's predictions against the same measurements. A trial never touches the checkpoint it
starts from: it copies the checkpoint (and the output folder whose batches it records) first, so
one stopped query can be restarted with many changes, each on its own::

    base = run_available_now(pipeline(source), checkpoint, output)
    trial = try_restart("a filter", lambda: pipeline(source.where(...)), checkpoint, output, work)
    trial.outcome   # "runs", "ignored" (the checkpoint's value won) or "refused"
    trial.error     # for a refusal: Spark's error class and its first sentence

Queries run with ``trigger(availableNow=True)`` and no-data batches off while they start, so a
query with processing-time timers ends once its input is read (lab 04 explains why).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from streamlab.deadlines import QueryStalled, finish
from streamlab.session import NO_DATA_BATCHES, session_conf

#: The outcomes of a trial: the change took effect, the checkpoint's value won, Spark refused.
RUNS, IGNORED, REFUSED = "runs", "ignored", "refused"


#: How long one restart may take to read its input (a few files; the first batch of a session
#: starts Spark's Python workers). A run still going after this has stalled.
RUN_WITHIN = 180.0


def run_available_now(
    transitions, checkpoint: str | Path, output: str | Path, *, within: float = RUN_WITHIN
) -> None:
    """Run ``transitions`` to the end of its input into the monitor's replace-on-retry sink.

    Each batch goes to ``output/batch_id=N`` (``streamlab.monitor.batch_writer``); the call
    returns when the query has ended, and raises the query's error if it failed. A query still
    running after ``within`` seconds is stopped and reported (:class:`QueryStalled`).
    """
    from streamlab.transitions import batch_writer

    Path(output).mkdir(parents=True, exist_ok=True)
    spark = transitions.sparkSession
    writer = (
        transitions.writeStream.foreachBatch(batch_writer(Path(output)))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
    )
    with session_conf(spark, {NO_DATA_BATCHES: "false"}):
        query = writer.start()
    finish(query, within=within, what=f"the query on checkpoint {checkpoint} to read its input")


@dataclass(frozen=True)
class Trial:
    """What one restart with a change did."""

    change: str
    ran: bool
    #: For a refusal: the innermost error class Spark names and its first sentence.
    error: str | None = None
    #: The settings the checkpoint's newest plan holds after the restart.
    pinned: dict = field(default_factory=dict)
    #: The settings the session was given for the restart.
    asked: dict = field(default_factory=dict)
    #: Where the copies are: ``folder/checkpoint`` and ``folder/output``.
    folder: Path | None = None

    @property
    def outcome(self) -> str:
        if not self.ran:
            return REFUSED
        if any(self.pinned.get(key) != value for key, value in self.asked.items()):
            return IGNORED
        return RUNS

    @property
    def error_class(self) -> str | None:
        return self.error.split(":", 1)[0] if self.error else None


def try_restart(
    change: str,
    build: Callable[[], object],
    checkpoint: str | Path,
    output: str | Path,
    work: str | Path,
    *,
    conf: dict[str, str] | None = None,
    within: float = RUN_WITHIN,
) -> Trial:
    """Restart on a copy of ``checkpoint`` (and ``output``) the query ``build()`` defines.

    ``conf`` is set on the session while the query is defined and run, then put back as it
    was. The copy lives in ``work/<change as a folder name>``, replaced if it exists.
    """
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    folder = Path(work) / re.sub(r"[^A-Za-z0-9]+", "-", change).strip("-").lower()
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(checkpoint, folder / "checkpoint")
    shutil.copytree(output, folder / "output")
    asked = dict(conf or {})
    with session_conf(spark, asked):
        try:
            run_available_now(build(), folder / "checkpoint", folder / "output", within=within)
        except QueryStalled:  # a stall is not Spark's answer to the change
            raise
        except Exception as error:  # what Spark said is the result
            return Trial(change, False, error_class(error), asked=asked, folder=folder)
    return Trial(
        change, True, pinned=pinned_settings(folder / "checkpoint"), asked=asked, folder=folder
    )


def error_class(error: BaseException) -> str:
    """``CLASS: first sentence`` of the innermost error class in Spark's message.

    Spark wraps a query's failure (``[STREAM_FAILED] ... terminated with exception: [...]``);
    the innermost class is the one that says why. An error raised in a Python worker
    (``PYTHON_EXCEPTION``, or ``FOREACH_BATCH_USER_FUNCTION_ERROR`` around it) is named by the
    JVM exception its traceback reports, when there is one. A message without a class gives
    its first line, after the wrapper's.
    """
    text = str(error)
    found = list(re.finditer(r"\[([A-Z][A-Z0-9_.]{5,})\] ", text))
    if not found:
        return text.splitlines()[0] if text else type(error).__name__
    inner = found[-1]
    if inner.group(1) in _FROM_PYTHON:
        jvm = list(_JVM_EXCEPTION.finditer(text, inner.end()))
        if jvm:
            return f"{jvm[-1].group(1)}: {jvm[-1].group(2).strip()}"
    sentence = text[inner.end() :].splitlines()[0].split(" SQLSTATE")[0]
    if inner.group(1) == "STREAM_FAILED":
        return sentence.split("terminated with exception: ", 1)[-1]
    return f"{inner.group(1)}: {sentence}"


_FROM_PYTHON = ("PYTHON_EXCEPTION", "FOREACH_BATCH_USER_FUNCTION_ERROR")
#: ``org.apache.spark.sql.avro.IncompatibleSchemaException: message`` in a worker's traceback.
_JVM_EXCEPTION = re.compile(r"\b(?:org|java)\.(?:\w+\.)+([A-Z]\w*(?:Exception|Error)): ([^\n]*)")


def batches(folder: Path) -> list[int]:
    """The batch ids that have a file in a checkpoint's ``offsets/`` or ``commits/``, sorted."""
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


def pinned_settings(checkpoint: str | Path) -> dict[str, str]:
    """The settings the newest ``offsets/N`` of a checkpoint pins (its ``conf``); {} if none."""
    planned = batches(Path(checkpoint) / "offsets")
    if not planned:
        return {}
    text = (Path(checkpoint) / "offsets" / str(planned[-1])).read_text()
    return json.loads(text.splitlines()[1]).get("conf", {})
