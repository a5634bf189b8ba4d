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
one, else the exercise's first hint. When both are lists (of transitions, of rows), it shows
a diff instead: the items as expected, missing, extra and changed, one a line
(:func:`list_diff`). A check that is not a comparison says what it wanted and what it got
with :func:`expect_that`. The course's checks hold no bare ``assert`` (``tests/test_check_kit.py``):
one would show the sentence alone.
"""

from __future__ import annotations

import pprint
from collections.abc import Callable, Sequence
from difflib import SequenceMatcher
from typing import Any

#: What a :class:`CheckFailed` was not given: no expected or no actual value to show (``None``
#: is a value a learner's code can give, and is shown).
NOT_GIVEN: Any = type("NotGiven", (), {"__repr__": lambda self: "NOT_GIVEN"})()


class CheckFailed(AssertionError):
    """A check's verdict: a sentence, what it expected, what the code did, and a hint.

    ``values`` keeps the two as given, for a failed answer to say which of its parts are
    wrong without showing the expected ones (:mod:`streamlab.grading.attempt`); ``of_shape``
    is true when the answer's shape is what failed (:func:`expect_keys`), not its values.
    """

    of_shape = False

    def __init__(
        self,
        message: str,
        *,
        expected: Any = NOT_GIVEN,
        actual: Any = NOT_GIVEN,
        hint: str = "",
        show: Callable[[Any], str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.values = (expected, actual)
        shown = show or describe
        self.expected = "" if expected is NOT_GIVEN else shown(expected)
        self.actual = "" if actual is NOT_GIVEN else shown(actual)
        self.hint = hint
        self.diff = ""
        if _listlike(expected, actual):
            try:
                self.diff = list_diff(expected, actual, show)
            except Exception:  # a diff is a help; the check's verdict must not hang on it
                self.diff = ""


def _listlike(expected: Any, actual: Any) -> bool:
    """Two lists worth a diff: sequences (not text), one of them with two items or more."""
    both = all(isinstance(v, list | tuple) for v in (expected, actual))
    return both and max(len(expected), len(actual)) >= 2


#: How a diff labels its lines.
SAME, MISSING, EXTRA, CHANGED, TO = "ok", "missing", "extra", "changed", "to"


def list_diff(
    expected: Sequence[Any], actual: Sequence[Any], show: Callable[[Any], str] | None = None
) -> str:
    """``expected`` against ``actual``, one item a line, each labelled.

    ``ok`` as expected, ``missing`` expected but not produced, ``extra`` produced but not
    expected, ``changed`` ... ``to`` an item in the place of the one expected there.

    ``show`` renders a whole list (as :class:`CheckFailed` uses it), so an item is shown as
    ``show([item])``. Numbers that are equal as numbers are shown alike on both sides (13.0
    as 13, in tuples, rows, lists and dicts too), so that only real differences stand out:
    :func:`expect_equal` compares values, and 13 == 13.0.
    """
    want = [_line(x, show, expected) for x in expected]
    got = [_line(x, show, actual) for x in actual]
    lines = []
    matcher = SequenceMatcher(a=want, b=got, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            lines += [f"{SAME:<8} {x}" for x in want[i1:i2]]
            continue
        paired = min(i2 - i1, j2 - j1) if tag == "replace" else 0
        for i, j in zip(range(i1, i1 + paired), range(j1, j1 + paired)):
            if _equal(expected[i], actual[j]):
                # Equal, though shown otherwise (a Row against a tuple): no difference.
                lines += [f"{SAME:<8} {want[i]}"]
            else:
                lines += [f"{CHANGED:<8} {want[i]}", f"{TO:>7}  {got[j]}"]
        lines += [f"{MISSING:<8} {x}" for x in want[i1 + paired : i2]]
        lines += [f"{EXTRA:<8} {y}" for y in got[j1 + paired : j2]]
    return "\n".join(lines)


def _line(item: Any, show: Callable[[Any], str] | None, whole: Sequence[Any]) -> str:
    """One item of a diff on one line, its whole numbers shown without a fraction."""
    item = _whole_numbers(item)
    if show is None:
        return repr(item)
    try:
        text = show([item] if isinstance(whole, list) else (item,))
    except Exception:  # a show that cannot take one item: the item as Python writes it
        return repr(item)
    return " ".join(str(text).split("\n"))


#: Floats this far from zero or farther are shown as they are (an int would be exact).
_EXACT = 2.0**53


def _whole_numbers(value: Any) -> Any:
    """``value`` with every float that holds a whole number (13.0) as an int (13)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < _EXACT:
        return int(value)
    if isinstance(value, tuple):
        items = [_whole_numbers(v) for v in value]
        fields = getattr(value, "__fields__", None)
        if fields is not None:  # a pyspark Row: the same fields, the numbers shown whole
            row: Any = type(value)(*items)
            row.__fields__ = fields
            return row
        if hasattr(value, "_fields"):  # a named tuple
            named: Any = type(value)
            return named._make(items)
        return tuple(items) if type(value) is tuple else value
    if type(value) is list:
        return [_whole_numbers(v) for v in value]
    if type(value) is dict:
        return {k: _whole_numbers(v) for k, v in value.items()}
    return value


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return False


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


def expect_that(
    condition: object,
    message: str,
    *,
    expected: Any,
    actual: Any,
    hint: str = "",
    show: Callable[[Any], str] | None = None,
) -> None:
    """Fail with ``message`` unless ``condition`` holds, saying what was expected (a value,
    or what it should be in words: ``"a DataFrame"``) and what the code gave."""
    if not condition:
        raise CheckFailed(message, expected=expected, actual=actual, hint=hint, show=show)


def expect_dataframe(result: Any, name: str, columns: Sequence[str] | None = None) -> Any:
    """``result`` when it is a DataFrame, with exactly ``columns`` in order when they are given;
    else a failure that names ``name()`` and says what it returned instead."""
    from pyspark.sql import DataFrame

    expect_that(
        isinstance(result, DataFrame),
        f"{name}() should return a DataFrame. Build the query and return it, without "
        "collecting or starting it.",
        expected="a DataFrame",
        actual=type(result).__name__,
    )
    if columns is not None:
        expect_equal(
            list(result.columns),
            list(columns),
            f"{name}() should return exactly these columns, in this order.",
        )
    return result


def expect_keys(answer: Any, name: str, keys: Sequence[str], *, hint: str = "") -> dict:
    """``answer`` when it is a dict with exactly ``keys`` (a learner's ``DIAGNOSIS_N_M``, a
    prediction); else a failure that names ``name`` and shows the keys expected against those
    it has."""
    listed = (
        ", ".join(repr(k) for k in keys[:-1]) + f" and {keys[-1]!r}"
        if len(keys) > 1
        else (repr(keys[0]))
    )
    try:
        expect_that(
            isinstance(answer, dict),
            f"{name} should be a dict with the keys {listed}.",
            expected="a dict",
            actual=type(answer).__name__,
            hint=hint,
        )
        expect_that(
            sorted(map(str, answer)) == sorted(keys),
            f"{name} should have exactly the keys {listed}.",
            expected=sorted(keys),
            actual=sorted(map(str, answer)),
            hint=hint,
        )
    except CheckFailed as failed:
        failed.of_shape = True
        raise
    return answer
