"""Checks of exercise 4.4 · The learner's own test.

The learner's test run against a right processor and against broken ones; no Spark.
"""

from __future__ import annotations

import traceback
from datetime import UTC, datetime

import pytest
from pyspark.sql import Row

from streamlab.kit import (
    HEALTHY,
    INITIALIZING,
    UNHEALTHY,
    CheckFailed,
    ReferenceHeartbeatProcessor,
    exercise,
    is_not_done,
)


def _changed_row(key, status, previous, now):
    return Row(
        machine_name=key[0],
        status=status,
        previous_status=previous,
        last_status_change_time=datetime.fromtimestamp(now / 1000, tz=UTC),
    )


class _Broken(ReferenceHeartbeatProcessor):
    """The reference with its handlers spelled out, so that each variant changes one thing."""

    on_recovery_delete = True
    on_recovery_register = True
    recovery_status = HEALTHY
    recovery_emits = True
    retire_clears = True
    retire_emits = False
    retire_from_timeout = False
    retire_keeps_a_timer = False
    greets_the_retired = False
    recovery_timeout_factor = 1
    tombstone = False

    def init(self, handle):
        super().init(handle)
        self.gone = handle.getValueState("gone", "gone BOOLEAN")

    def handleInputRows(self, key, rows, timerValues):
        now = timerValues.getCurrentProcessingTimeInMs()
        saved = self.machine.get()
        if self.tombstone and saved is not None and saved[0] is None:
            saved = None
        if saved is None and self.greets_the_retired and self.gone.get():
            saved = (UNHEALTHY, now - self.retire_after_ms)
        status = saved[0] if saved else None
        new = INITIALIZING if saved is None else HEALTHY
        if saved is None:
            self.handle.registerTimer(now + self.timeout_ms)
        elif status == UNHEALTHY:
            new = self.recovery_status
            if self.on_recovery_delete:
                self.handle.deleteTimer(saved[1] + self.retire_after_ms)
            if self.on_recovery_register:
                self.handle.registerTimer(now + self.recovery_timeout_factor * self.timeout_ms)
        self.machine.update((new, now))
        if new != status and (status != UNHEALTHY or self.recovery_emits):
            yield _changed_row(key, new, status, now)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        now = timerValues.getCurrentProcessingTimeInMs()
        saved = self.machine.get()
        if saved is None:
            return
        status, seen = saved
        if status == UNHEALTHY:
            if self.tombstone:
                self.machine.update((None, seen))
            elif self.retire_clears:
                self.machine.clear()
            if self.greets_the_retired:
                self.gone.update((True,))
            if self.retire_keeps_a_timer:
                self.handle.registerTimer(now + self.retire_after_ms)
            if self.retire_emits:
                yield _changed_row(key, None, UNHEALTHY, now)
            return
        if now < seen + self.timeout_ms:
            self.handle.registerTimer(seen + self.timeout_ms)
            return
        self.machine.update((UNHEALTHY, seen))
        self.handle.registerTimer(
            (now if self.retire_from_timeout else seen) + self.retire_after_ms
        )
        yield _changed_row(key, UNHEALTHY, status, now)


def _broken(name: str, **changes) -> type:
    """The reference with one of its behaviours changed, named for what it gets wrong."""
    return type(name, (_Broken,), changes)


BROKEN = [
    (
        _broken("NoTimeoutAfterRecovery", on_recovery_register=False),
        "gives a recovered machine no timeout timer, so it never turns Unhealthy again",
        "After a recovery, let the machine go silent for longer than the timeout and expect "
        "Healthy -> Unhealthy at the right time.",
    ),
    (
        _broken("TimesOutLateAfterRecovery", recovery_timeout_factor=2),
        "gives a recovered machine twice the timeout before it turns Unhealthy again",
        "After a recovery, expect Healthy -> Unhealthy exactly timeout_ms after the recovering "
        "heartbeat.",
    ),
    (
        _broken("KeepsTheRetirementTimer", on_recovery_delete=False),
        "keeps the retirement timer of a machine's first silence after it recovers, so a "
        "machine that goes silent again is retired too early",
        "Recover a machine, let it go Unhealthy again, and check that it is still in the state "
        "retire_after_ms after its first silence's heartbeat (and gone only retire_after_ms after "
        "its latest one).",
    ),
    (
        _broken("RecoversSilently", recovery_emits=False),
        "emits nothing when an Unhealthy machine sends a heartbeat",
        "Check the exact rows a recovery emits: one Unhealthy -> Healthy row at the batch's time.",
    ),
    (
        _broken("RecoversAsNew", recovery_status=INITIALIZING),
        "reports a recovered machine as Initializing",
        "Check the status of the recovery row, not only that a row came out.",
    ),
    (
        _broken("RetiresWithARow", retire_emits=True),
        "emits a row when it retires a machine",
        "Check that the moment of retirement emits nothing at all.",
    ),
    (
        _broken("RetiresWithoutForgetting", retire_clears=False),
        "never clears a retired machine's state",
        "After retire_after_ms, peek at the state (peekValueState) and expect None; and a "
        "machine that comes back after that must be Initializing.",
    ),
    (
        _broken("KeepsATombstone", tombstone=True),
        "keeps a retired machine's state as an empty marker instead of removing it",
        "After the retirement, expect no state at all for the machine: peekValueState returns "
        "None.",
    ),
    (
        _broken("RetiresButKeepsATimer", retire_keeps_a_timer=True),
        "leaves a timer behind when it retires a machine",
        "After the retirement, check that the machine has no pending timer (pending_timers).",
    ),
    (
        _broken("GreetsTheRetiredAsRecovered", greets_the_retired=True),
        "remembers retired machines and greets one that comes back as recovered, Unhealthy -> "
        "Healthy",
        "Send a heartbeat after the retirement and check the exact row: None -> Initializing.",
    ),
    (
        _broken("RetiresFromTheTimeout", retire_from_timeout=True),
        "counts retire_after_ms from the moment a machine turned Unhealthy instead of from its "
        "latest heartbeat",
        "Check the state at exactly retire_after_ms after the latest heartbeat: gone then, and "
        "still there a millisecond before.",
    ),
]


def _run_learner_test(nb, processor_class):
    """What the learner's test did: ``("passed", returned)`` or ``("failed", where and why)``."""
    try:
        returned = nb.check_recovery_and_retirement(processor_class)
    except Exception as error:  # a test that fails, whatever it raised
        if is_not_done(error):
            raise
        return "failed", _where(error)
    return "passed", returned


def _where(error: Exception) -> str:
    """The error and the line of the learner's cell that raised it."""
    said = f"{type(error).__name__}: {error}".rstrip(": ")
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        if frame.filename.startswith("<") and "cell" in frame.filename and frame.line:
            return f"{said}, at `{frame.line.strip()}`"
    return said


@exercise("4.4")
def test_your_test_passes_on_a_right_processor(nb):
    outcome, detail = _run_learner_test(nb, ReferenceHeartbeatProcessor)
    if outcome == "failed":
        raise CheckFailed(
            "check_recovery_and_retirement failed on a right LeanHeartbeatProcessor (the "
            "course's reference): a test must pass on code that is right.",
            expected="it returns",
            actual=detail,
            hint="Compare your expectations with the worked examples of 4.3 and 4.4: timers fire "
            "in the first callback at or after their time, and rows carry the batch's time.",
        )
    if detail is not None:
        raise CheckFailed(
            "check_recovery_and_retirement should return None when every expectation holds "
            "and raise (an assert) when one does not.",
            expected="None",
            actual=repr(detail),
        )


@pytest.mark.parametrize(
    "broken, mistake",
    [pytest.param(c, m, marks=exercise("4.4", hint=h), id=c.__name__) for c, m, h in BROKEN],
)
def test_your_test_fails_on_a_broken_processor(nb, broken, mistake):
    outcome, detail = _run_learner_test(nb, broken)
    if outcome == "passed":
        raise CheckFailed(
            f"check_recovery_and_retirement passed on a processor that {mistake}: a test must "
            f"fail on it.",
            expected="an AssertionError",
            actual="it returned without raising" + ("" if detail is None else f" ({detail!r})"),
        )
