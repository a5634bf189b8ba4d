"""Waits on a streaming query that give up in time and say what they waited for.

``query.awaitTermination()`` and ``query.processAllAvailable()`` wait for ever when a query
stalls: a task that waits on a Python worker nobody answers, a source that blocks. Every wait
the course's own code makes on a query goes through here instead::

    query = writer.trigger(availableNow=True).start()
    finish(query, within=300, what="the reference pipeline reading the first file")
    drain(running, within=120, what="the board's query catching up with the hub")

On time, both return as Spark's own calls do (and raise the query's error if it failed). Past
the bound, the query is stopped and :class:`QueryStalled` says what was awaited, how long, the
query's last progress and where Spark's log is, in sentences a learner can act on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

#: How long a stop may take before the course says so (Spark's own stop waits on the stream
#: thread, which a stalled task can hold).
STOP_WITHIN = 60.0


class QueryStalled(TimeoutError):
    """A query did not finish, or did not catch up, within its bound; it has been stopped."""

    def __init__(self, message: str, *, query_name: str | None = None, last_progress=None):
        super().__init__(message)
        self.query_name = query_name
        self.last_progress = last_progress


def finish(query: Any, *, within: float, what: str) -> None:
    """Wait until ``query`` ends (an ``availableNow`` run, a stopped query), ``within`` seconds.

    Raises the query's own error if it failed, and :class:`QueryStalled` (after stopping the
    query) if it is still running when the bound has passed.
    """
    if query.awaitTermination(within):
        return
    raise _stalled(query, within, what)


def drain(query: Any, *, within: float, what: str) -> None:
    """``query.processAllAvailable()``, given up after ``within`` seconds.

    Spark's call has no timeout: it runs here in a thread of its own, and a query that has not
    caught up by the bound is stopped, which ends the call, and reported.
    """
    outcome: dict[str, BaseException | None] = {"error": None}

    def run() -> None:
        try:
            query.processAllAvailable()
        except BaseException as error:  # handed to the caller's thread below
            outcome["error"] = error

    waiter = threading.Thread(target=run, name="processAllAvailable", daemon=True)
    waiter.start()
    waiter.join(within)
    if waiter.is_alive():
        stalled = _stalled(query, within, what)
        waiter.join(STOP_WITHIN)
        raise stalled
    if outcome["error"] is not None:
        raise outcome["error"]


def stop(query: Any, *, within: float = STOP_WITHIN, what: str = "the query to stop") -> None:
    """``query.stop()``, reported if it has not returned after ``within`` seconds.

    Spark's stop interrupts the stream thread and cancels its jobs; when a task cannot be
    cancelled, stop can wait on it. The stop goes on in the background, and this says so.
    """
    done = threading.Event()

    def run() -> None:
        try:
            query.stop()
        finally:
            done.set()

    threading.Thread(target=run, name="query.stop", daemon=True).start()
    if not done.wait(within):
        raise QueryStalled(
            f"Waited {within:g} s for {what}, and it has not stopped yet: a task of it is "
            f"stuck and Spark cannot cancel it. {_where_to_look()}",
            query_name=_name(query),
        )


def wait_for(
    ready: Callable[[], Any],
    *,
    within: float,
    what: str,
    query: Any = None,
    every: float = 0.2,
    sleep: Callable[[float], object] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Any:
    """Call ``ready()`` until it returns something true; return that, or give up in time.

    With ``query``, a query that ends (with or without an error) ends the wait at once, and
    the message on a timeout carries its last progress; the query is left running.
    """
    deadline = clock() + within
    while True:
        answer = ready()
        if answer:
            return answer
        if query is not None and not query.isActive:
            error = query.exception()
            if error is not None:
                raise error
            raise QueryStalled(
                f"Waited for {what}, but the query {_label(query)} ended before it came.",
                query_name=_name(query),
            )
        left = deadline - clock()
        if left <= 0:
            last = _last_progress(query) if query is not None else None
            raise QueryStalled(
                f"Waited {within:g} s for {what}, and it did not come."
                + (f" {_describe_progress(last)}" if query is not None else ""),
                query_name=_name(query) if query is not None else None,
                last_progress=last,
            )
        sleep(min(every, left))


def _stalled(query: Any, within: float, what: str) -> QueryStalled:
    last = _last_progress(query)
    try:
        stop(query, what=f"the stalled query {_label(query)} to stop")
        stopped = f"It has been stopped. {_where_to_look()}"
    except QueryStalled as still:
        stopped = str(still)
    return QueryStalled(
        f"Waited {within:g} s for {what}, and the query {_label(query)} had not finished. "
        f"{_describe_progress(last)} {stopped}",
        query_name=_name(query),
        last_progress=last,
    )


def _name(query: Any) -> str | None:
    try:
        return query.name
    except Exception:  # a query whose session is gone has no name to give
        return None


def _label(query: Any) -> str:
    name = _name(query)
    return f"'{name}'" if name else "(unnamed)"


def _last_progress(query: Any) -> dict | None:
    try:
        return query.lastProgress
    except Exception:  # asked after the session ended
        return None


def _describe_progress(progress: dict | None) -> str:
    if not progress:
        return "It had not completed a single micro-batch."
    batch = progress.get("batchId")
    when = progress.get("timestamp", "?")
    rows = progress.get("numInputRows", "?")
    took = (progress.get("durationMs") or {}).get("triggerExecution")
    took_text = f", in {took} ms" if took is not None else ""
    return (
        f"Its last completed micro-batch was batch {batch}, started at {when} with {rows} "
        f"input row(s){took_text}."
    )


def _where_to_look() -> str:
    from streamlab.session import LOG_FILE

    return f"Spark's log says what its tasks were doing: {LOG_FILE}."
