"""A streaming query's progress report, read the same way in whichever form it comes.

``query.lastProgress``, ``query.recentProgress`` and a listener's ``event.progress`` are
``StreamingQueryProgress`` objects whose sources carry their offsets as JSON text; the
report's own JSON (``progress.json``) and a report recorded to a file carry them as objects.
:func:`as_dict` turns any of them into plain JSON data, and :func:`offsets` reads an offset in
either form, so that the course's readings (:func:`backlog`, :mod:`streamlab.alerts`) work on
a live query and on a recorded report alike.

A Spark Connect client builds its reports from the JSON its server sends, which leaves out the
report's totals over its sources (``numInputRows``, ``inputRowsPerSecond``,
``processedRowsPerSecond``): :func:`as_classic` puts them back, and a Connect session of the
course (:func:`streamlab.spark_session`) applies it to every report it reads, so that
``progress["numInputRows"]`` reads the same on both kinds of session.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any


def as_dict(progress: Any) -> dict:
    """The report as plain JSON data (dicts, lists, strings, numbers)."""
    if progress is None:
        raise ValueError("no progress report yet: the query has not finished a micro-batch")
    text = getattr(progress, "json", None)
    if isinstance(text, str):  # a StreamingQueryProgress: its own JSON has every field
        return json.loads(text)
    if isinstance(progress, str):
        return json.loads(progress)
    if isinstance(progress, Mapping):
        return dict(progress)
    raise TypeError(f"a progress report is a dict or a StreamingQueryProgress, not {progress!r}")


#: A report's totals over its sources, in the order a classic session's report lists them.
TOTALS = ("numInputRows", "inputRowsPerSecond", "processedRowsPerSecond")


#: Fields a classic session's report leaves out of its JSON when they are empty.
_OMITTED_WHEN_EMPTY = ("eventTime", "observedMetrics")


def as_classic(report: Mapping) -> dict:
    """The report as a classic session's report has it, from the JSON a Connect server sends.

    The totals go back in, as Spark's own report computes them: each the sum of the sources'
    values, where a rate that some source does not report (NaN, which JSON leaves out) stays
    out; totals already present are kept. Empty ``eventTime`` and ``observedMetrics`` go, as a
    classic report's JSON has none.
    """
    report = {k: v for k, v in report.items() if v or k not in _OMITTED_WHEN_EMPTY}
    sources = report.get("sources") or []
    totals = {}
    for name in TOTALS:
        if report.get(name) is not None:
            totals[name] = report[name]
            continue
        values = [s.get(name) for s in sources]
        if name == "numInputRows":
            totals[name] = sum(int(v or 0) for v in values)
        elif all(isinstance(v, int | float) for v in values):
            totals[name] = float(sum(values))
    # After batchDuration, where a classic report has them (its JSON is printed in the labs).
    ordered = {key: value for key, value in report.items() if key not in TOTALS}
    if "batchDuration" not in ordered:
        return {**ordered, **totals}
    keys = list(ordered)
    at = keys.index("batchDuration") + 1
    return {k: ordered.get(k, totals.get(k)) for k in [*keys[:at], *totals, *keys[at:]]}


def offsets(value: Any) -> dict[str, int] | None:
    """A source offset of the ``eventhubs`` source, ``{"0": 42, ...}``, from text or an object.

    None when the report has none (``null``, or a source that reports no latest offset).
    """
    if isinstance(value, str):
        value = json.loads(value)
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value.values()
    ):
        raise ValueError(
            f"this offset is not a map of partition to sequence number: {value!r} "
            "(the eventhubs source's offsets are; a file source's are not)"
        )
    return {str(p): int(s) for p, s in value.items()}


def _partition_order(partition: str) -> tuple:
    return (len(partition), partition)  # "10" after "9"


def backlog(progress: Any, source: int = 0) -> dict[str, int]:
    """Events each partition of the query's ``source``-th source held beyond the batch's end.

    ``latestOffset`` (the newest event the source knew each partition to hold when it planned
    the batch) minus ``endOffset`` (where the batch stopped), per partition, in partition
    order: ``{"0": 5, "1": 1, "2": 0, "3": 0}`` means five events of partition 0 and one of
    partition 1 were left for the next batches.
    """
    report = as_dict(progress)
    sources = report.get("sources") or []
    if source >= len(sources):
        raise ValueError(f"the query has {len(sources)} source(s); there is no source {source}")
    entry = sources[source]
    latest, end = offsets(entry.get("latestOffset")), offsets(entry.get("endOffset"))
    if latest is None or end is None:
        raise ValueError(
            f"source {source} ({entry.get('description', '?')[:60]}) reports no "
            f"{'latestOffset' if latest is None else 'endOffset'}: only a source that "
            "implements reportLatestOffset (format('eventhubs') does) tells how far behind it is"
        )
    return {p: latest[p] - end[p] for p in sorted(latest, key=_partition_order) if p in end}


def timestamp(text: str | None) -> datetime | None:
    """A time of the report (``"2026-11-22T10:00:05.000Z"``) as an aware datetime, or None."""
    if not text:
        return None
    parsed = datetime.fromisoformat(text)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
