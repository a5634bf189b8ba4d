"""Checks of exercise 4.2 · HeartbeatProcessor.

The processor on ``TwsTester`` on a clock the check sets; no Spark. Its checks are the ones
4.3's LeanHeartbeatProcessor must pass too: they live in story_04.py, and this file runs each
on HeartbeatProcessor.
"""

from __future__ import annotations

from story_04 import (
    a_heartbeat_after_unhealthy_is_a_recovery,
    a_leftover_timer_emits_nothing,
    first_heartbeat_is_initializing,
    heartbeats_in_one_batch_count_once,
    initializing_machine_can_time_out,
    machines_are_independent,
    never_more_than_one_timer,
    second_heartbeat_is_healthy_then_nothing,
    silence_turns_a_machine_unhealthy_once,
    steady_heartbeats_never_time_out,
    the_state_keeps_the_latest_heartbeat,
    timeout_comes_from_the_constructor,
)

from streamlab.kit import exercise

#: The processor under test: the checks shared with 4.3 (story_04.py) run on it.
PROCESSOR = "HeartbeatProcessor"


@exercise("4.2")
def test_first_heartbeat_is_initializing(nb):
    first_heartbeat_is_initializing(nb, PROCESSOR)


@exercise("4.2")
def test_heartbeats_in_one_batch_count_once(nb):
    heartbeats_in_one_batch_count_once(nb, PROCESSOR)


@exercise("4.2")
def test_second_heartbeat_is_healthy_then_nothing(nb):
    second_heartbeat_is_healthy_then_nothing(nb, PROCESSOR)


@exercise("4.2")
def test_silence_turns_a_machine_unhealthy_once(nb):
    silence_turns_a_machine_unhealthy_once(nb, PROCESSOR)


@exercise("4.2")
def test_initializing_machine_can_time_out(nb):
    initializing_machine_can_time_out(nb, PROCESSOR)


@exercise("4.2")
def test_steady_heartbeats_never_time_out(nb):
    steady_heartbeats_never_time_out(nb, PROCESSOR)


@exercise("4.2")
def test_a_heartbeat_after_unhealthy_is_a_recovery(nb):
    a_heartbeat_after_unhealthy_is_a_recovery(nb, PROCESSOR)


@exercise("4.2")
def test_timeout_comes_from_the_constructor(nb):
    timeout_comes_from_the_constructor(nb, PROCESSOR)


@exercise("4.2")
def test_machines_are_independent(nb):
    machines_are_independent(nb, PROCESSOR)


@exercise("4.2")
def test_the_state_keeps_the_latest_heartbeat(nb):
    the_state_keeps_the_latest_heartbeat(nb, PROCESSOR)


@exercise("4.2")
def test_never_more_than_one_timer(nb):
    never_more_than_one_timer(nb, PROCESSOR)


@exercise("4.2")
def test_a_leftover_timer_emits_nothing(nb):
    a_leftover_timer_emits_nothing(nb, PROCESSOR)
