"""The check kit: the one surface ``checks/`` imports from ``streamlab``.

A check takes from here what it uses: the assertions and the exercise marker (from the
grader), the stories and the shared vocabulary (:mod:`.stories`), the heartbeat helpers
(:mod:`.heartbeat`), the answer shapes (:mod:`.answers`), a query started to read its input
and stop (:mod:`.queries`), the Spark facts kept between gradings, the settings context that
puts back what it found, and the course's reference solutions. Besides the kit a check
imports only a notebook-facing name it exercises on purpose (``streamlab/notebook_api.py``).
``tests/test_check_kit.py`` holds both, and that no check declares a name of the kit again.

The kit sits above the grader and the solutions it loads; the grader never imports it
(``tests/test_import_direction.py``), save the warm grader, which loads it ahead of a check.
"""

from __future__ import annotations

from streamlab.alerts import Alerter, state_growing
from streamlab.course import registry
from streamlab.eventhubs import SYSTEM_SCHEMA
from streamlab.grading.expect import (
    CheckFailed,
    expect_dataframe,
    expect_equal,
    expect_keys,
    expect_that,
)
from streamlab.grading.facts import spark_facts
from streamlab.grading.plugin import exercise
from streamlab.grading.verdict import query_cause
from streamlab.kit.answers import (
    Field,
    expect_answer,
    expect_spark_shows,
    is_int,
    is_str,
    list_of,
)
from streamlab.kit.heartbeat import Meter, ProcessorStory, handler_must_yield, status_tuples
from streamlab.kit.queries import start_available
from streamlab.kit.stories import (
    HEALTHY,
    HEARTBEAT_DDL,
    HUB_ARROW_SCHEMA,
    HUB_SYSTEM_ARROW_SCHEMA,
    INITIALIZING,
    START,
    START_MS,
    TRANSITION_DDL,
    TRANSITION_FIELDS,
    UNHEALTHY,
    crash_before_commit,
    deliver_file,
    heartbeat_line,
    is_not_done,
    window_bounds,
    write_heartbeats,
)
from streamlab.paths import REPO_ROOT
from streamlab.restart_trials import IGNORED, REFUSED, RUNS, pinned_settings
from streamlab.session import NO_DATA_BATCHES, ROCKSDB_PROVIDER, session_conf, settings_kept
from streamlab.solutions import load_solution
from streamlab.spark_private import SparkChanged, writer_setting

#: The setting that names a session's state store provider.
STATE_PROVIDER = "spark.sql.streaming.stateStore.providerClass"
#: The settings of a stateful query's shuffle partitions and of its state's encoding, which a
#: checkpoint pins.
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
STATE_ENCODING = "spark.sql.streaming.stateStore.encodingFormat"

__all__ = [
    "HEALTHY",
    "HEARTBEAT_DDL",
    "HUB_ARROW_SCHEMA",
    "HUB_SYSTEM_ARROW_SCHEMA",
    "IGNORED",
    "INITIALIZING",
    "NO_DATA_BATCHES",
    "REFUSED",
    "REPO_ROOT",
    "ROCKSDB_PROVIDER",
    "RUNS",
    "SHUFFLE_PARTITIONS",
    "START",
    "START_MS",
    "STATE_ENCODING",
    "STATE_PROVIDER",
    "SYSTEM_SCHEMA",
    "TRANSITION_DDL",
    "TRANSITION_FIELDS",
    "UNHEALTHY",
    "Alerter",
    "CheckFailed",
    "Field",
    "Meter",
    "ProcessorStory",
    "ReferenceHeartbeatProcessor",
    "SparkChanged",
    "crash_before_commit",
    "deliver_file",
    "exercise",
    "expect_answer",
    "expect_dataframe",
    "expect_equal",
    "expect_keys",
    "expect_spark_shows",
    "expect_that",
    "handler_must_yield",
    "heartbeat_line",
    "is_int",
    "is_not_done",
    "is_str",
    "list_of",
    "load_solution",
    "pinned_settings",
    "query_cause",
    "registry",
    "session_conf",
    "settings_kept",
    "spark_facts",
    "start_available",
    "state_growing",
    "status_tuples",
    "window_bounds",
    "write_heartbeats",
    "writer_setting",
]


def __getattr__(name: str):
    # Lab 04's solution notebook runs on first use, and only for the checks that use it.
    if name == "ReferenceHeartbeatProcessor":
        from streamlab.kit import heartbeat

        return heartbeat.ReferenceHeartbeatProcessor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
