"""The receivers a task keeps open, on a fake clock: closed once idle, never while being read."""

from __future__ import annotations

import pytest

from streamlab.eventhubs.kept import KeptReceivers
from streamlab.eventhubs.options import parse_options


class FakeReceivers:
    """Stands in for a hub's buffer: ``drain`` yields the range, ``fail`` makes it raise."""

    def __init__(self, options) -> None:
        self.open: set[str] = set()
        self.closed: list[str] = []
        self.fail = False

    def reuse_or_restart(self, partition_id: str, first: int) -> None:
        self.open.add(partition_id)

    def drain(self, partition_id: str, end: int, timeout: float, **where):
        if self.fail:
            raise TimeoutError("the hub is gone")
        yield from range(end - 2, end)

    def open_partitions(self) -> set[str]:
        return set(self.open)

    def close_partition(self, partition_id: str) -> None:
        self.open.discard(partition_id)
        self.closed.append(partition_id)

    def close(self) -> None:
        self.closed += sorted(self.open)
        self.open.clear()


@pytest.fixture
def now() -> list[float]:
    return [100.0]


@pytest.fixture
def kept(now) -> KeptReceivers:
    return KeptReceivers(keep_open=20.0, clock=lambda: now[0], factory=FakeReceivers)


OPTIONS = parse_options({"connectionString": "Endpoint=sb://127.0.0.1:5672;EntityPath=heartbeats"})


def _hub(kept: KeptReceivers) -> FakeReceivers:
    (receivers,) = kept._by_hub.values()
    return receivers


def test_a_receiver_stays_open_for_the_next_range_until_it_has_been_idle_long_enough(kept, now):
    assert list(kept.read_range(OPTIONS, "0", 0, 5)) == [3, 4]
    assert list(kept.read_range(OPTIONS, "1", 0, 2)) == [0, 1]
    assert kept.partitions() == {"0", "1"}
    now[0] += 15
    assert list(kept.read_range(OPTIONS, "1", 2, 4)) == [2, 3]  # read again: idle from now
    now[0] += 5
    kept.close_idle()
    assert kept.partitions() == {"1"} and _hub(kept).closed == ["0"]
    now[0] += 20
    kept.close_idle()
    assert kept.partitions() == set()


def test_a_receiver_being_read_is_never_idle(kept, now):
    reading = kept.read_range(OPTIONS, "0", 0, 5)
    assert next(reading) == 3
    now[0] += 60
    kept.close_idle()
    assert kept.partitions() == {"0"}, "closed in the middle of a read"
    assert list(reading) == [4]
    kept.close_idle(idle_for=0.0)
    assert kept.partitions() == set()


def test_a_failed_read_closes_its_receiver_and_close_all_closes_the_rest(kept):
    list(kept.read_range(OPTIONS, "1", 0, 2))
    receivers = _hub(kept)
    receivers.fail = True
    with pytest.raises(TimeoutError):
        list(kept.read_range(OPTIONS, "0", 0, 5))
    assert receivers.closed == ["0"] and kept.partitions() == {"1"}
    kept.close_all()
    assert receivers.closed == ["0", "1"] and kept.partitions() == set()
