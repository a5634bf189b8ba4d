"""Checks of exercise 4.2 · HeartbeatProcessor.

The processor on ``TwsTester`` on a clock the check sets; no Spark. Its checks are the ones
4.3's LeanHeartbeatProcessor must pass too: they live in story_04.py (``SHARED``), and this
file runs each on HeartbeatProcessor.
"""

from __future__ import annotations

from story_04 import shared_checks

# test_first_heartbeat_is_initializing, ...: one check of 4.2 a function of story_04.SHARED.
globals().update(shared_checks("4.2", "HeartbeatProcessor"))
