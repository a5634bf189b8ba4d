"""Fixtures for the support package's own tests: the checks' Spark fixtures and an emulator."""

from __future__ import annotations

import logging

import pytest

from streamlab.hub import Hub

pytest_plugins = ["streamlab.spark_fixtures"]


@pytest.fixture(autouse=True)
def _quiet_sdk_logs() -> None:
    # The SDK logs every reconnect at INFO/WARNING; the tests check outcomes instead.
    logging.getLogger("azure").setLevel(logging.ERROR)


@pytest.fixture
def hub(tmp_path):
    """An in-process emulator on a free port, default hubs (heartbeats:4, status:1), durable."""
    with Hub(data_dir=tmp_path / "hub", port=0) as running:
        yield running


@pytest.fixture
def conn_str(hub) -> str:
    return hub.connection_string
