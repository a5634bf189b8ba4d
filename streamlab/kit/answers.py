"""A declarative shape check for a learner's ``PREDICTION`` and ``DIAGNOSIS_*`` answers.

An answer is a dict with fixed keys, each holding a value of a known shape. A check states the
shape once and compares the answer's values with Spark only after it holds:

    FIELDS = {
        "input_rows": Field(list_of(is_int), "a list of ints, one per micro-batch.",
                            expected="a list of ints"),
        "state_variables": Field(list_of(is_str), "a list of names.", expected="a list of strings"),
    }
    answer = expect_answer(nb.DIAGNOSIS_4_6, "DIAGNOSIS_4_6", FIELDS)

A wrong key set fails as :func:`~streamlab.grading.expect_keys` does (the answer's shape); a
wrong value fails with ``NAME['key'] should be <should>``, expected against the value.
:func:`expect_spark_shows` then holds the answer against what Spark showed of a run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamlab.grading.expect import CheckFailed, expect_equal, expect_keys
from streamlab.grading.facts import spark_facts

__all__ = ["Field", "expect_answer", "expect_spark_shows", "is_int", "is_str", "list_of"]


@dataclass(frozen=True)
class Field:
    """One key of an answer: what it accepts and the sentence when it does not.

    ``should`` ends the sentence ``NAME['key'] should be ...``. With ``expected`` the failure
    shows it against ``actual(value)``; without, the sentence ends ``; it is <value>.``.
    """

    accepts: Callable[[Any], bool]
    should: str
    expected: str | None = None
    actual: Callable[[Any], Any] = repr


def is_int(value: Any) -> bool:
    """An int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_str(value: Any) -> bool:
    return isinstance(value, str)


def list_of(item: Callable[[Any], bool], kinds: tuple = (list, tuple)) -> Callable[[Any], bool]:
    """Accepts a list (or tuple, or ``kinds``) whose every item ``item`` accepts."""
    return lambda value: isinstance(value, kinds) and all(item(v) for v in value)


def expect_answer(answer: Any, name: str, fields: Mapping[str, Field], *, hint: str = "") -> dict:
    """``answer`` when it has exactly the keys of ``fields`` and each value their shape."""
    expect_keys(answer, name, list(fields), hint=hint)
    for key, field in fields.items():
        value = answer[key]
        if field.accepts(value):
            continue
        if field.expected is None:
            raise CheckFailed(
                f"{name}[{key!r}] should be {field.should}; it is {value!r}.", hint=hint
            )
        raise CheckFailed(
            f"{name}[{key!r}] should be {field.should}",
            expected=field.expected,
            actual=field.actual(value),
            hint=hint,
        )
    return dict(answer)


def expect_spark_shows(
    answer: Any,
    name: str,
    measure: Callable[[], Any],
    sentence: str,
    *,
    check: str,
    hint: str = "",
    inputs: Sequence[Path] = (),
) -> None:
    """Fail with ``sentence`` unless ``answer`` is what ``measure()`` shows of a run on Spark.

    The run is a fact of the course's own code, kept per machine by
    :func:`~streamlab.grading.facts.spark_facts` under ``name``, ``check`` (the check file's
    ``__file__``) and ``inputs``; ``hint`` is shown when the answer differs.
    """
    shown = spark_facts(name, measure, check=check, inputs=inputs)
    expect_equal(answer, shown, sentence, hint=hint)
