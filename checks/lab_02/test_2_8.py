"""Checks of exercise 2.8 · Write the test of final_counts.

The learner's test run against the check's right final_counts (it passes) and against broken
ones (it fails each).
"""

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from story_02 import (
    reference_final_counts,
)

from streamlab.kit import (
    CheckFailed,
    exercise,
    expect_equal,
    window_bounds,
)


def _by_machine_clock(heartbeats, size="10 seconds", delay="5 seconds"):
    return reference_final_counts(
        heartbeats.withColumn("event_time", F.col("machine_time")), size, delay
    )


def _without_the_delay(heartbeats, size="10 seconds", delay="5 seconds"):
    return reference_final_counts(heartbeats, size, "0 seconds")


def _size_and_delay_swapped(heartbeats, size="10 seconds", delay="5 seconds"):
    return reference_final_counts(heartbeats, delay, size)


def _machines_mixed_up(heartbeats, size="10 seconds", delay="5 seconds"):
    return (
        heartbeats.withWatermark("event_time", delay)
        .groupBy(F.window("event_time", size))
        .agg(F.min("machine_name").alias("machine_name"), F.count("*").alias("heartbeats"))
        .select(*window_bounds(), "machine_name", "heartbeats")
    )


BROKEN = [
    ("windows by machine_time, the machine's own clock", _by_machine_clock),
    ("ignores delay (a watermark of 0 seconds)", _without_the_delay),
    ("uses size as the delay and delay as the size", _size_and_delay_swapped),
    ("counts every machine of a window together", _machines_mixed_up),
]


class _Watched:
    """Wraps a final_counts: remembers whether it was given a stream."""

    def __init__(self, function):
        self.function = function
        self.calls: list[bool] = []

    def __call__(self, heartbeats, *args, **kwargs):
        self.calls.append(isinstance(heartbeats, DataFrame) and heartbeats.isStreaming)
        return self.function(heartbeats, *args, **kwargs)


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:300] if text else ''}"


@exercise("2.8", timeout=240)
def test_your_test_passes_a_right_final_counts(nb, spark, tmp_path):
    right = _Watched(reference_final_counts)
    try:
        nb.test_final_counts(right, spark, str(tmp_path / "right"))
    except NotImplementedError:
        raise
    except AssertionError as failure:
        raise CheckFailed(
            "Your test failed on a right final_counts (the one 2.3 asks for), so it would "
            f"fail a learner who got it right. It said: {_first_line(failure)}",
            hint="Work out the expected table batch by batch: which watermark each batch runs "
            "with, and the one-batch lag of the late-row filter when data batches follow each "
            "other.",
        ) from None
    except Exception as error:
        raise CheckFailed(
            f"Your test raised an error on a right final_counts: {_first_line(error)}"
        ) from None
    expect_equal(
        right.calls[:1],
        [True],
        "Your test should call final_counts on a streaming DataFrame (spark.readStream): a "
        "batch aggregation has no watermark to test.",
    )


@exercise("2.8", timeout=300)
def test_your_test_fails_each_broken_final_counts(nb, spark, tmp_path):
    passed = []
    for number, (flaw, broken) in enumerate(BROKEN):
        try:
            nb.test_final_counts(broken, spark, str(tmp_path / f"broken-{number}"))
        except NotImplementedError:
            raise
        except Exception:  # any failure of the learner's test catches the flaw
            continue
        passed.append(flaw)
    expect_equal(
        passed,
        [],
        "Your test should fail on each broken final_counts; it passed these.",
        hint="Give each flaw input that shows it: two machines in one window, a machine "
        "whose clock is off by enough to change its window, a late heartbeat whose window is "
        "still open, and a size different from the delay.",
    )
