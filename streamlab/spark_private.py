"""The private members of PySpark the course relies on, each behind a check of the release.

Two things the course teaches have no public API in PySpark 4.3:

- offline repartitioning of a checkpoint's state (labs 05 and 10), an experimental method
  reached through ``SparkSession._streamingCheckpointManager``;
- the settings a ``DataStreamWriter`` holds before ``start()`` (lab 08's check reads the
  trigger and the checkpoint a learner's writer was given), private fields of Spark's Java
  ``DataStreamWriter`` reached through ``_jwrite``.

Every use goes through :func:`_require`, which raises :class:`SparkChanged` with a sentence
naming the member when a PySpark release no longer has it, instead of an ``AttributeError``
deep in a check or a notebook, and :class:`NeedsClassicSession` when the session is a Spark
Connect client, which has none of them.

A third member makes a Connect client's progress reports read as a classic session's:
:func:`read_progress_as_classic` (called by :func:`streamlab.spark_session` for a Connect
session) wraps ``StreamingQueryProgress.fromJson``.

    repartition_state(spark, "build/work/lab10/checkpoint", 4)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: The PySpark releases this module was checked against.
CHECKED_ON = ("4.3",)

_MISSING = object()


class SparkChanged(RuntimeError):
    """The installed PySpark lacks a private member the course relies on."""


class NeedsClassicSession(RuntimeError):
    """What the course asked for exists on a classic Spark session only, not over Spark Connect."""


def over_connect(owner: Any) -> bool:
    """Whether ``owner`` (a session, a writer, a query) belongs to a Spark Connect client."""
    return type(owner).__module__.startswith("pyspark.sql.connect.")


def _require(owner: Any, member: str, what: str) -> Any:
    """``owner.member`` (dotted), or :class:`SparkChanged` saying which member is gone."""
    import pyspark

    if over_connect(owner):
        raise NeedsClassicSession(
            f"{what[0].upper()}{what[1:]} needs a classic Spark session: this one is a Spark "
            f"Connect client, which has no {member} (PySpark reaches it in the driver's JVM). "
            "Run this section on the course's own session: unset STREAMLAB_SPARK_REMOTE and "
            "restart the kernel."
        )
    found = owner
    for part in member.split("."):
        found = getattr(found, part, _MISSING)
        if found is _MISSING:
            raise SparkChanged(
                f"The course reaches {what} through {member}, a private member of PySpark that "
                f"it was checked against on PySpark {' and '.join(CHECKED_ON)}; PySpark "
                f"{pyspark.__version__} does not have it. See streamlab/spark_private.py."
            )
    return found


def repartition_state(spark, checkpoint: str | Path, partitions: int, **options: Any) -> None:
    """Rewrite a stopped query's checkpoint for ``partitions`` state partitions, offline.

    Spark's experimental ``StreamingCheckpointManager.repartition`` (PySpark 4.3); ``options``
    pass through (``enforce_exactly_once_sink=False``). Spark's own errors
    (``STATE_REPARTITION_INVALID_CHECKPOINT``...) come through unchanged.
    """
    manager = _require(spark, "_streamingCheckpointManager", "offline repartitioning")
    manager.repartition(str(checkpoint), partitions, **options)


def writer_setting(writer, name: str) -> Any:
    """The value of the private field ``name`` of a ``DataStreamWriter``'s Java object
    (``trigger``, ``extraOptions``...), as set before ``start()``."""
    java = _require(writer, "_jwrite", "a DataStreamWriter's settings")
    try:
        field = java.getClass().getDeclaredField(name)
    except Exception:  # Py4J's error for a field the class does not declare
        raise SparkChanged(
            f"The course reads a DataStreamWriter's {name!r} from a private field of Spark's "
            f"Java DataStreamWriter, checked on PySpark {' and '.join(CHECKED_ON)}; this "
            "release has no such field. See streamlab/spark_private.py."
        ) from None
    field.setAccessible(True)
    return field.get(java)


def read_progress_as_classic() -> None:
    """Make this process's Spark Connect client build progress reports as a classic session has them.

    The client builds ``query.lastProgress``, ``query.recentProgress`` and a listener's
    ``event.progress`` with ``StreamingQueryProgress.fromJson`` from its server's JSON, which
    leaves out the totals (``progress["numInputRows"]`` reads None): the wrapper passes that
    JSON through :func:`streamlab.progress.as_classic` first. A classic session builds its
    reports from the JVM's objects, never through ``fromJson``. Calling it again does nothing.
    """
    from pyspark.sql.streaming.listener import StreamingQueryProgress

    from streamlab.progress import as_classic

    built = _require(StreamingQueryProgress, "fromJson", "a Spark Connect query's progress")
    if getattr(built, "_streamlab_as_classic", False):
        return
    original = built.__func__

    def from_json(cls, j: dict) -> StreamingQueryProgress:
        return original(cls, as_classic(j))

    from_json._streamlab_as_classic = True  # type: ignore[attr-defined]
    StreamingQueryProgress.fromJson = classmethod(from_json)  # type: ignore[method-assign,assignment]
