"""The monitor's transition sink: each micro-batch's transitions in a parquet folder of its own.

:func:`batch_writer` writes batch N to ``output/batch_id=N``, replacing it when Spark retries the
batch; :func:`read_transitions` reads every batch back without Spark. The monitor writes through
it, and so do the lab helpers that run a lab's query to the end of its input
(:func:`streamlab.restart_trials.run_available_now`).
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

#: How each batch's parquet is written (see :func:`batch_writer`): pyarrow from the driver
#: saves the Spark write job and its commit protocol.
DEFAULT_WRITER = "arrow"

#: How :func:`batch_writer` writes a batch's parquet: ``spark`` (``df.write``, a Spark job with
#: its commit protocol) or ``arrow`` (``df.toArrow()`` and pyarrow, one file from the driver).
WRITERS = ("spark", "arrow")


def batch_writer(output: Path, writer: str = DEFAULT_WRITER):
    """A foreachBatch function writing each batch to ``output/batch_id=N``, replace on retry.

    ``writer`` is one of :data:`WRITERS`; either way the folder is complete or absent.
    """
    if writer not in WRITERS:
        raise ValueError(f"writer must be one of {', '.join(WRITERS)}, not {writer!r}")
    write_folder = _write_arrow if writer == "arrow" else _write_spark

    def write(df, batch_id: int) -> None:
        final = output / f"batch_id={batch_id}"
        staging = output / f"_staging-{batch_id}-{uuid.uuid4().hex}"
        write_folder(df, staging)
        if final.exists():
            shutil.rmtree(final)
        staging.rename(final)

    return write


def _write_spark(df, folder: Path) -> None:
    df.write.parquet(str(folder))


def _write_arrow(df, folder: Path) -> None:
    import pyarrow.parquet as pq

    table = df.toArrow()
    # Timestamps as INT96, as Spark's own parquet writer stores them: Spark reads the folder
    # back (it refuses pyarrow's default nanoseconds), and pyarrow sees one schema for every
    # batch, whichever writer wrote it.
    folder.mkdir()
    pq.write_table(table, folder / "part-00000.parquet", use_deprecated_int96_timestamps=True)


def read_transitions(output: str | Path) -> list[dict]:
    """Every transition written so far, in batch order, without starting Spark."""
    import pyarrow.dataset as ds

    root = Path(output)
    if not root.exists() or not any(root.glob("batch_id=*")):
        return []
    table = ds.dataset(str(root), format="parquet", partitioning="hive").to_table()
    rows = table.to_pylist()
    rows.sort(key=lambda r: (r["batch_id"], r["last_status_change_time"], r["machine_name"]))
    return rows
