"""Checks of exercise 0.1 · What a restart really runs with.

The settings a checkpoint pins, read from offsets files written the way Spark writes them (a
version line, the batch's metadata as JSON, one line per source); no Spark.
"""

import json
from pathlib import Path

from streamlab.kit import (
    ROCKSDB_PROVIDER,
    SHUFFLE_PARTITIONS,
    STATE_ENCODING,
    STATE_PROVIDER,
    CheckFailed,
    exercise,
    expect_equal,
)

TIME_ZONE = "spark.sql.session.timeZone"


def _offsets(checkpoint: Path, batch: int, conf: dict[str, str]) -> None:
    """offsets/<batch> as Spark writes it, with its hidden checksum beside it."""
    folder = checkpoint / "offsets"
    folder.mkdir(parents=True, exist_ok=True)
    metadata = {
        "batchWatermarkMs": 0,
        "batchTimestampMs": 1795000000000 + batch,
        "conf": conf,
    }
    (folder / str(batch)).write_text(
        "v1\n" + json.dumps(metadata, separators=(",", ":")) + '\n{"logOffset":' + f"{batch}}}"
    )
    (folder / f".{batch}.crc").write_text("crc")


PINNED = {STATE_PROVIDER: ROCKSDB_PROVIDER, SHUFFLE_PARTITIONS: "2", STATE_ENCODING: "unsaferow"}


def _effective(nb, conf, checkpoint) -> dict:
    given = dict(conf)
    result = nb.effective_settings(conf, str(checkpoint))
    if not isinstance(result, dict):
        raise CheckFailed(
            f"effective_settings() should return a dict of settings; it returned "
            f"{type(result).__name__}."
        )
    expect_equal(
        conf,
        given,
        "effective_settings() changed the dict it was given; return a new one instead.",
        hint="Copy conf before you change anything, or build the answer as a new dict.",
    )
    return result


@exercise("0.1")
def test_a_new_checkpoint_runs_with_the_sessions_settings(nb, tmp_path):
    conf = {SHUFFLE_PARTITIONS: "4", TIME_ZONE: "UTC"}
    expect_equal(
        _effective(nb, conf, tmp_path / "never-started"),
        conf,
        "A checkpoint folder that does not exist pins nothing: the session's settings hold.",
    )
    (tmp_path / "empty" / "offsets").mkdir(parents=True)
    (tmp_path / "empty" / "metadata").write_text('{"id":"q"}')
    expect_equal(
        _effective(nb, conf, tmp_path / "empty"),
        conf,
        "A checkpoint whose query never planned a batch (no offsets/N file) pins nothing.",
    )


@exercise("0.1")
def test_the_checkpoint_wins_over_the_session(nb, tmp_path):
    for batch in range(3):
        _offsets(tmp_path, batch, PINNED)
    conf = {SHUFFLE_PARTITIONS: "4", TIME_ZONE: "UTC"}
    expect_equal(
        _effective(nb, conf, tmp_path),
        {
            SHUFFLE_PARTITIONS: "2",
            TIME_ZONE: "UTC",
            STATE_PROVIDER: ROCKSDB_PROVIDER,
            STATE_ENCODING: "unsaferow",
        },
        "Every setting the newest offsets file pins replaces or adds to the session's; the "
        "others keep their values.",
        hint="The settings are in the 'conf' of the JSON on the second line of offsets/N.",
    )


@exercise("0.1")
def test_the_newest_offsets_file_is_the_largest_number(nb, tmp_path):
    # Batches 0 to 9 ran with 2 partitions; the checkpoint was then repartitioned offline to
    # 8, which wrote offsets/10 with the new count. "10" sorts before "9" as text.
    for batch in range(10):
        _offsets(tmp_path, batch, PINNED)
    _offsets(tmp_path, 10, {**PINNED, SHUFFLE_PARTITIONS: "8"})
    (tmp_path / "offsets" / ".11.1a2b3c.tmp").write_text("v1\n{half written")
    expect_equal(
        _effective(nb, {SHUFFLE_PARTITIONS: "2"}, tmp_path)[SHUFFLE_PARTITIONS],
        "8",
        "offsets/10 is the newest of offsets/0 to offsets/10; files whose name is not a number "
        "(checksums, temporary files) are not offsets files.",
        hint="Compare the file names as numbers: as text, '9' comes after '10'.",
    )
