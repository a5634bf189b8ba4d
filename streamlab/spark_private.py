"""The private members of PySpark the course relies on, each behind a check of the release.

Two things the course teaches have no public API in PySpark 4.3:

- offline repartitioning of a checkpoint's state (labs 05 and 10), an experimental method
  reached through ``SparkSession._streamingCheckpointManager``;
- the settings a ``DataStreamWriter`` holds before ``start()`` (lab 08's check reads the
  trigger and the checkpoint a learner's writer was given), private fields of Spark's Java
  ``DataStreamWriter`` reached through ``_jwrite``.

Every use goes through :func:`_require`, which raises :class:`SparkChanged` with a sentence
naming the member when a PySpark release no longer has it, instead of an ``AttributeError``
deep in a check or a notebook.

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


def _require(owner: Any, member: str, what: str) -> Any:
    """``owner.member`` (dotted), or :class:`SparkChanged` saying which member is gone."""
    import pyspark

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
