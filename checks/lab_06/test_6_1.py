"""Checks of exercise 6.1 · Settings for one query.

The diagnosis against what the helper as found does to this session's settings, then the fix:
the session as before the block, whether the block ends or raises, and a query after it
committing in the session's own mode.
"""

from __future__ import annotations

from contextlib import contextmanager

from story_06 import (
    CHANGELOG,
    _heartbeats,
    _listing,
    _run,
)

from streamlab.kit import (
    STATE_PROVIDER,
    CheckFailed,
    exercise,
    expect_equal,
    expect_keys,
    settings_kept,
)

UNSET_KEY = "spark.streamlab.check.unsetBefore"


SETTINGS_HINT = (
    "After the block each key must hold what the session had before it, for a key it had and "
    "for one it had not: read spark.conf.get(key, None) before the block and after it, and ask "
    "what your way of putting a key back gives in each case."
)


def _after(spark, keys) -> dict:
    return {key: spark.conf.get(key, None) for key in keys}


#: 6.1's outcomes: what spark.conf.get(key, None) gives after a helper's block, against before.
AS_BEFORE, FORGOTTEN, BLOCK_VALUE = "as before", "forgotten", "block value"


#: 6.1's cases: the key, the value the block sets, and whether the block raises.
CASES = {
    "after_return": (CHANGELOG, "false", False),
    "after_raise": (CHANGELOG, "false", True),
    "never_set": (UNSET_KEY, "on", False),
}


DIAGNOSIS_HINT = (
    "Run the helper as found in the notebook, for each case: print spark.conf.get(key, None) "
    "before the block and after it, catching the exception of a block that raises."
)


@contextmanager
def _settings_as_found(spark, settings):
    """The helper as the notebook gives it (session_settings_as_found)."""
    for key, value in settings.items():
        spark.conf.set(key, value)
    yield
    for key in settings:
        spark.conf.unset(key)


def _diagnosis_6_1(answer) -> dict:
    """DIAGNOSIS_6_1, checked for shape before it is compared with the session."""
    expect_keys(answer, "DIAGNOSIS_6_1", sorted(CASES), hint=DIAGNOSIS_HINT)
    for case, outcome in answer.items():
        if outcome not in (AS_BEFORE, FORGOTTEN, BLOCK_VALUE):
            raise CheckFailed(
                f"DIAGNOSIS_6_1[{case!r}] should be one of the setup cell's outcomes: AS_BEFORE, "
                "FORGOTTEN or BLOCK_VALUE.",
                expected=f"one of {AS_BEFORE!r}, {FORGOTTEN!r}, {BLOCK_VALUE!r}",
                actual=outcome,
                hint=DIAGNOSIS_HINT,
            )
    return dict(answer)


def _outcome(before, block_value, after) -> str:
    if after == before:
        return AS_BEFORE
    if after == block_value:
        return BLOCK_VALUE
    if after is None:
        return FORGOTTEN
    raise CheckFailed(  # neither: the helper as found cannot do that
        "After the helper as found, the session gave a value that is neither the one before the "
        "block nor the block's (a course bug).",
        expected=f"{before!r} or {block_value!r} or None",
        actual=after,
    )


def _what_the_found_helper_does(spark) -> dict:
    """Each case of DIAGNOSIS_6_1, run with the helper as found on this session."""
    shows = {}
    for case, (key, value, raises) in CASES.items():
        with settings_kept(spark, [key]):
            if key == UNSET_KEY:
                spark.conf.unset(key)
            before = spark.conf.get(key, None)
            try:
                with _settings_as_found(spark, {key: value}):
                    if raises:
                        raise KeyError("a query that failed to start")
            except KeyError:
                pass
            shows[case] = _outcome(before, value, spark.conf.get(key, None))
    return shows


@exercise("6.1", timeout=60, part="diagnosis")
def test_the_diagnosis_is_what_the_found_helper_does(nb, spark):
    diagnosis = _diagnosis_6_1(nb.DIAGNOSIS_6_1)
    expect_equal(
        diagnosis,
        _what_the_found_helper_does(spark),
        "DIAGNOSIS_6_1 against the helper as found, run on this session: for each case, what "
        "spark.conf.get(key, None) gives after the block, against what it gave before "
        "(after_return: a key the session had, after a block that ends normally; after_raise: "
        "the same after a block that raises; never_set: a key the session did not have).",
        hint=DIAGNOSIS_HINT,
    )


@exercise("6.1", timeout=60, part="fix", hint=SETTINGS_HINT)
def test_the_session_is_as_before_after_the_block(nb, spark):
    asked = {CHANGELOG: "false", STATE_PROVIDER: "org.example.NoSuchProvider", UNSET_KEY: "on"}
    with settings_kept(spark, asked) as before:
        spark.conf.unset(UNSET_KEY)
        before[UNSET_KEY] = None
        inside = None
        with nb.session_settings(spark, asked):
            inside = _after(spark, asked)
        after = _after(spark, asked)
    expect_equal(
        inside,
        asked,
        "Inside the block the session should have every setting given to session_settings.",
    )
    expect_equal(
        after,
        {CHANGELOG: before[CHANGELOG], STATE_PROVIDER: before[STATE_PROVIDER], UNSET_KEY: None},
        "After the block, spark.conf.get(key, None) should give for every key what it gave "
        "before: the session's changelog setting and provider, and None for a key the session "
        "did not have.",
    )


@exercise("6.1", timeout=60, part="fix", hint=SETTINGS_HINT)
def test_the_session_is_restored_when_the_block_raises(nb, spark):
    asked = {CHANGELOG: "false"}
    with settings_kept(spark, asked) as before:
        raised = None
        try:
            with nb.session_settings(spark, asked):
                raise KeyError("a query that failed to start")
        except KeyError as error:
            raised = error
        after = _after(spark, asked)
    if raised is None:
        raise CheckFailed(
            "An exception raised inside the block should reach the caller; session_settings "
            "swallowed it.",
            expected="the KeyError raised inside the block",
            actual="no exception",
            hint="Your block swallowed the exception: a helper that puts settings back must "
            "not hide an error from its caller.",
        )
    expect_equal(
        after,
        before,
        "When the block raises, the session should still get its settings back.",
        hint="When the block raises, the exception comes back into your generator at its "
        "yield: ask which of your lines still run then.",
    )


@exercise("6.1", timeout=150, part="fix", hint=SETTINGS_HINT)
def test_a_query_after_the_block_commits_changelogs(nb, spark, tmp_path):
    incoming = tmp_path / "incoming"
    _heartbeats(incoming, "a", ["m1", "m2", "m3"])
    with settings_kept(spark, [CHANGELOG]) as before:
        expect_equal(
            before[CHANGELOG],
            "true",
            "The course's session has changelog checkpointing on (a course bug if not).",
        )
        with nb.session_settings(spark, {CHANGELOG: "false"}):
            pass
        query = _run(spark, incoming, tmp_path / "after", "lab06_after_settings")
        files = sorted({kind for p in (0, 1) for _, kind in _listing(tmp_path / "after", 0, p)})
    expect_equal(
        files,
        ["changelog"],
        "A query started after `with session_settings(spark, {changelog: 'false'})` should "
        "commit in the session's own mode, changelog checkpointing: only .changelog files in "
        "its state folders.",
    )
    expect_equal(
        query.lastProgress.stateOperators[0].numRowsTotal,
        3,
        "The query started after the block should hold the three machines of its input in its "
        "state (rows in the state store).",
    )
