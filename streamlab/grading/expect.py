"""What a check says when it fails: expected against actual, in full, and its own hint.

A check compares what the learner's code did with what the exercise asks for::

    from streamlab.grading import exercise, expect_equal

    @exercise("4.2", hint="A timer fires only when no heartbeat came before it.")
    def test_silence_turns_unhealthy(nb):
        rows = ...
        expect_equal(rows, [("m1", "Unhealthy", "Healthy", 7_000)],
                     "After 5 s without a heartbeat the machine should turn Unhealthy.")

The grader shows the sentence, then what was expected and what the code did (the terminal
may shorten them; ``build/grade.json`` keeps them whole), then the check's hint when it has
one, else the exercise's first hint. A plain ``assert ..., "sentence"`` still works and
shows the sentence alone.
"""

from __future__ import annotations

import pprint
from collections.abc import Callable
from typing import Any


class CheckFailed(AssertionError):
    """A check's verdict: a sentence, what it expected, what the code did, and a hint."""

    def __init__(
        self,
        message: str,
        *,
        expected: Any = None,
        actual: Any = None,
        hint: str = "",
        show: Callable[[Any], str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        shown = show or describe
        self.expected = "" if expected is None else shown(expected)
        self.actual = "" if actual is None else shown(actual)
        self.hint = hint


def describe(value: Any) -> str:
    """``value`` as a learner reads it: one item a line for a list, else its repr."""
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple) and value and len(repr(value)) > 80:
        return "\n".join(repr(item) for item in value)
    if isinstance(value, list | tuple) and not value:
        return "nothing" if isinstance(value, list) else "()"
    return pprint.pformat(value, width=88, sort_dicts=False)


def expect_equal(
    actual: Any,
    expected: Any,
    message: str,
    *,
    hint: str = "",
    show: Callable[[Any], str] | None = None,
) -> None:
    """Fail with ``message``, ``expected`` and ``actual`` unless the two are equal."""
    if actual != expected:
        raise CheckFailed(message, expected=expected, actual=actual, hint=hint, show=show)
