"""What the heartbeat checks share, where a learner's processor goes wrong in a typical way."""

from __future__ import annotations

import pytest
from pyspark.sql.streaming import StatefulProcessor

from streamlab.grading import CheckFailed
from streamlab.kit.heartbeat import ProcessorStory, handler_must_yield


class ForgetsToYield(StatefulProcessor):
    """Updates nothing and returns None from its handler: a `return` where a `yield` belongs."""

    def init(self, handle) -> None:
        self.handle = handle

    def handleInputRows(self, key, rows, timerValues):
        for _ in rows:
            pass


def test_a_handler_that_returns_none_is_named_with_what_it_should_yield(spark):
    story = ProcessorStory(ForgetsToYield(), "ForgetsToYield")
    with pytest.raises(CheckFailed) as failed:
        story.batch(("Producer 1",), [])
    assert failed.value.message.startswith("ForgetsToYield.handleInputRows returned None")
    assert failed.value.expected == "a generator that yields status_row(...) for each change"
    assert failed.value.actual == "None"


def test_any_other_type_error_is_left_as_it_is():
    with pytest.raises(TypeError, match="unsupported operand"):
        with handler_must_yield("Anything"):
            1 + "one"  # noqa: B018
