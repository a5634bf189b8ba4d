"""Fixtures for the support package's own tests: the checks' Spark fixtures and an emulator."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from streamlab.hub import Hub

pytest_plugins = ["streamlab.spark_fixtures"]

# A grading started by a test ends with its next child started ahead of time
# (streamlab.grading.warm), a JVM per build folder that no later test would claim: the tests
# grade from cold, but for those of warm children, which turn them on.
os.environ.setdefault("STREAMLAB_WARM_GRADER", "0")


@pytest.fixture(autouse=True)
def _quiet_sdk_logs() -> None:
    # The SDK logs every reconnect at INFO/WARNING; the tests check outcomes instead.
    logging.getLogger("azure").setLevel(logging.ERROR)


@pytest.fixture
def hub(tmp_path):
    """An in-process emulator on a free port, default hubs (heartbeats:4, status:1, alerts:1), durable."""
    with Hub(data_dir=tmp_path / "hub", port=0) as running:
        yield running


@pytest.fixture
def conn_str(hub) -> str:
    return hub.connection_string


class FakeClock:
    """A clock that moves only when a test moves it: schedules become deterministic."""

    def __init__(self, now: float = 1_795_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def fleet(hub, clock):
    """A producer fleet on the test's hub, on the fake clock, checking for work every 10 ms."""
    from streamlab.fleet import Fleet

    with Fleet(hub.connection_string, clock=clock, tick=0.01) as running:
        yield running


#: Debian's Chromium, driven by Playwright (never a browser Playwright downloads).
CHROMIUM = os.environ.get("STREAMLAB_CHROMIUM", "/usr/bin/chromium")
# Headless, and no background traffic: this machine reaches no network but the registries.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser():
    """Chromium under Playwright; skipped where it is missing, except in CI."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(f"CI must install Chromium ({CHROMIUM}); see .ci/run")
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield instance
        instance.close()
