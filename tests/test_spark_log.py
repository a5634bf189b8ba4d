"""The course's own warm-up and shutdown leave no traceback in its Spark log."""

from __future__ import annotations

import os
import subprocess
import sys

from streamlab.paths import REPO_ROOT


def test_a_warm_up_and_a_shutdown_leave_no_traceback_in_the_log(tmp_path):
    # The warm grading child's warm-up (a batch job, a Python UDF, a stateful query and a
    # transformWithState query), then the session stopped, in a build folder of its own.
    script = (
        "from streamlab.grading import warm\n"
        "from streamlab.session import stop_spark_session\n"
        "warm._warm_up()\n"
        "stop_spark_session()\n"
    )
    env = {**os.environ, "STREAMLAB_BUILD_DIR": str(tmp_path / "build")}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    log = (tmp_path / "build" / "logs" / "spark.log").read_text(encoding="utf-8")
    assert "Setting default log level" in log  # the JVM did write here
    assert "Traceback" not in log and "Error:" not in log, log


def test_only_a_workers_hang_up_is_left_out_of_the_log():
    from streamlab.spark_log import kept

    daemon = "/x/pyspark.zip/pyspark/daemon.py"
    hang_up = [
        "Traceback (most recent call last):\n",
        f'  File "{daemon}", line 264, in manager\n',
        f'  File "{daemon}", line 95, in worker\n',
        "BrokenPipeError: [Errno 32] Broken pipe\n",
    ]
    real = [
        "Traceback (most recent call last):\n",
        '  File "/x/pyspark/worker.py", line 3, in main\n',
        "    process()\n",
        "ValueError: a learner's bug\n",
    ]
    lines = ["Setting default log level\n", *hang_up, "between\n", *real, "after\n"]
    assert list(kept(lines)) == ["Setting default log level\n", "between\n", *real, "after\n"]
    # Two workers hanging up at once, their lines interleaved, another worker's line between.
    both = [hang_up[0], hang_up[0], "Starting a worker.\n", *hang_up[1:3], hang_up[3]]
    both += [*hang_up[1:3], hang_up[3]]
    assert list(kept([*both, "after\n"])) == ["Starting a worker.\n", "after\n"]
