"""Spark's web UI from a notebook: where it is, and the numbers behind its pages.

Start the session with its UI (``streamlab.spark_session(ui=True)``: on a free port of
127.0.0.1, address printed) and open the **Structured Streaming** tab. The numbers of its charts
come from each query's progress reports (``query.recentProgress``); Spark 4.3 has no REST
endpoint for them (``/api/v1/applications/<app>/streaming/statistics`` belongs to the older
DStream API, and answers 404 for a Structured Streaming query). What the REST API does give is
the **SQL** tab: every micro-batch runs as a SQL execution whose plan nodes carry their metrics,
among them each state store operator's (``number of total state rows``, ``memory used by
state``, RocksDB's own)::

    ui = SparkUI.of(spark)
    ui.streaming_page(query)                   # the query's page in the Structured Streaming tab
    ui.state_metrics(query)["StateStoreSave"]["number of total state rows"]   # '118'
    metric_value("total (min, med, max (stageId: taskId))\\n2.0 MiB (1 KiB, ...)")   # 2097152.0
"""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
from typing import Any

#: The plan nodes that hold a stateful operator's state store metrics.
STATE_NODES = (
    "StateStoreSave",
    "StateStoreRestore",
    "TransformWithStateInPySpark",
    "TransformWithState",
    "FlatMapGroupsInPandasWithState",
    "FlatMapGroupsWithState",
    "Deduplicate",
    "StreamingDeduplicate",
    "DeduplicateWithinWatermark",
    "StreamingSymmetricHashJoin",
    "SessionWindowStateStoreSave",
)

_UNITS = {
    "B": 1,
    "KiB": 1024,
    "MiB": 1024**2,
    "GiB": 1024**3,
    "TiB": 1024**4,
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "h": 3_600_000,
}
_NUMBER = re.compile(r"^\s*(-?[\d,]+(?:\.\d+)?)\s*([A-Za-z]*)")


def address(spark: Any) -> str | None:
    """``http://127.0.0.1:PORT`` of the session's UI, or None when it runs without one.

    A Spark Connect session's UI is its server's, where its queries run: the server says where
    (``python -m streamlab.connect`` runs one) through its settings, as it has no
    ``sparkContext`` to ask.
    """
    from streamlab.spark_private import over_connect

    if over_connect(spark):
        if spark.conf.get("spark.ui.enabled", "false") != "true":
            return None
        host = spark.conf.get("spark.connect.grpc.binding.address", None)
        port = spark.conf.get("spark.ui.port", None)
        return f"http://{host}:{port}" if host and port else None
    url = spark.sparkContext.uiWebUrl
    if not url:
        return None
    port = urllib.parse.urlsplit(url).port
    return f"http://127.0.0.1:{port}"


def metric_value(text: str) -> float:
    """A SQL metric as the UI shows it, as a number: bytes for sizes, milliseconds for times.

    ``"118"`` -> 118; ``"2.0 MiB"`` -> 2097152; ``"451 ms"`` -> 451; a metric summed over tasks,
    ``"total (min, med, max (stageId: taskId))\\n2.0 MiB (1026.1 KiB, ...)"``, -> its total.
    """
    line = text.splitlines()[-1] if text.startswith("total") else text
    match = _NUMBER.match(line)
    if not match or (match.group(2) and match.group(2) not in _UNITS):
        raise ValueError(f"not a metric the UI shows: {text!r}")
    number = float(match.group(1).replace(",", ""))
    return number * _UNITS.get(match.group(2), 1)


class SparkUI:
    """The REST API of one Spark application's UI, at ``url`` (``http://127.0.0.1:4040``)."""

    def __init__(self, url: str, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._app: str | None = None

    @classmethod
    def of(cls, spark: Any) -> SparkUI:
        from streamlab.spark_private import NeedsClassicSession, over_connect

        url = address(spark)
        if url is None and over_connect(spark):
            raise NeedsClassicSession(
                "This Spark Connect session's web UI is its server's, and its server runs "
                "without one or does not say where: the course's server (nox -s connect) runs "
                "one; or run this section on the course's own session: unset "
                "STREAMLAB_SPARK_REMOTE and restart the kernel."
            )
        if url is None:
            raise RuntimeError(
                "this Spark session runs without its web UI: start it with "
                "streamlab.spark_session(ui=True), before anything else starts Spark "
                "(restart the kernel if a session is already running)"
            )
        return cls(url)

    def get(self, path: str) -> Any:
        """GET ``path`` of the REST API (``/api/v1/...``) as JSON."""
        with urllib.request.urlopen(self.url + path, timeout=self.timeout) as answer:
            return json.loads(answer.read())

    @property
    def app_id(self) -> str:
        if self._app is None:
            self._app = self.get("/api/v1/applications")[0]["id"]
        return self._app

    def streaming_page(self, query: Any) -> str:
        """The address of ``query``'s page (a query, or its run id) in the Structured Streaming tab."""
        return f"{self.url}/StreamingQuery/statistics/?id={_run_id(query)}"

    def sql_executions(self, query: Any = None) -> list[dict]:
        """The SQL executions (one or more per micro-batch), with their nodes' metrics.

        With ``query`` (a query, or its run id), only those of that run: Spark describes a
        micro-batch's execution as ``<name>\\nid = ...\\nrunId = <runId>\\nbatch = <n>``.
        """
        executions = self.get(
            f"/api/v1/applications/{self.app_id}/sql"
            "?details=true&planDescription=false&offset=0&length=100000"
        )
        if query is None:
            return executions
        tag = f"runId = {_run_id(query)}"
        return [e for e in executions if tag in (e.get("description") or "")]

    def state_execution(self, query: Any, batch_id: int | None = None) -> dict:
        """The newest completed SQL execution of batch ``batch_id`` (default: of any batch)
        whose state nodes carry metrics; a batch may run more than one execution."""
        for execution in reversed(self.sql_executions(query)):
            if execution.get("status") != "COMPLETED":
                continue
            batch = re.search(r"batch = (\d+)", execution.get("description") or "")
            if batch_id is not None and (batch is None or int(batch.group(1)) != batch_id):
                continue
            if any(_state_nodes(execution).values()):
                return execution
        which = "any batch" if batch_id is None else f"batch {batch_id}"
        raise LookupError(
            f"no completed SQL execution of {which} of query run {_run_id(query)} "
            "with state metrics yet (does it hold state? has a batch finished?)"
        )

    def state_metrics(self, query: Any, batch_id: int | None = None) -> dict[str, dict[str, str]]:
        """Per state node of the query's plan, its metrics as the SQL tab shows them, from
        :meth:`state_execution`."""
        return _state_nodes(self.state_execution(query, batch_id))


def _state_nodes(execution: dict) -> dict[str, dict[str, str]]:
    return {
        node["nodeName"]: {m["name"]: m["value"] for m in node.get("metrics", [])}
        for node in execution.get("nodes", [])
        if node["nodeName"] in STATE_NODES
    }


def _run_id(query: Any) -> str:
    return str(getattr(query, "runId", query))
