"""The reference monitor on a Spark standalone cluster started by ``python -m streamlab.cluster``.

Real parts only: a master and a worker started from the installed PySpark, the hub emulator,
SDK producers, and ``python -m streamlab.monitor`` as the driver with ``STREAMLAB_SPARK_MASTER``
pointing at the cluster. The driver is killed with SIGKILL and started again on the same
checkpoint: the machines it already knew keep their state. Stopping the cluster leaves no
process of it behind.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from eventhub_clients import wait_for

from streamlab.cluster import LocalCluster
from streamlab.fleet import Fleet
from streamlab.monitor import read_transitions
from streamlab.paths import REPO_ROOT
from streamlab.session import _driver_conf, _worker_python

MACHINES = ["m1", "m2"]


def start_cluster(log_dir: Path) -> tuple[subprocess.Popen, str, str]:
    """``python -m streamlab.cluster --workers 1``; the process, the master URL and web UI it prints."""
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlab.cluster", "--workers", "1", "--cores", "2",
         "--memory", "2g", "--log-dir", str(log_dir)],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in process.stdout:
        lines.append(line)
        match = re.search(r"export STREAMLAB_SPARK_MASTER=(spark://\S+)", line)
        if match:
            web_ui = re.search(r"web UI\s+(http://\S+)", "".join(lines))
            return process, match.group(1), web_ui.group(1)
    process.wait(30)
    raise AssertionError("the cluster did not start:\n" + "".join(lines))


def start_monitor(connection_string: str, master: str, work: Path, run: str) -> subprocess.Popen:
    """The monitor as a driver on ``master``, in a process group of its own (its JVM included)."""
    log = open(work / f"monitor-{run}.log", "w")
    return subprocess.Popen(
        [sys.executable, "-m", "streamlab.monitor", "--connection-string", connection_string,
         "--checkpoint", str(work / "checkpoint"), "--output", str(work / "out"),
         "--trigger", "500 milliseconds"],
        cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, "STREAMLAB_SPARK_MASTER": master})


def statuses(rows, machine: str) -> list[str]:
    return [r["status"] for r in rows if r["machine_name"] == machine]


def batches(out: Path) -> list[int]:
    """The ids of the batches the monitor has written, empty ones included."""
    return [int(path.name.split("=")[1]) for path in out.glob("batch_id=*")]


def running(process: subprocess.Popen, log: Path):
    """A wait condition that fails at once, with the log, if ``process`` exited."""
    def check() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"the monitor exited: {log.read_text()[-3000:]}")
        return False
    return check


def process_groups() -> dict[int, int]:
    """Every live process on this machine (zombies left out): pid to process group id."""
    groups = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            groups[int(stat.parent.name)] = int(fields[2])
    return groups


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def test_the_monitor_runs_on_the_cluster_and_keeps_its_state_across_a_driver_kill(hub, tmp_path):
    cluster, master, web_ui = start_cluster(tmp_path / "cluster")
    daemons = children(cluster.pid)  # the master and the worker, each leading its own group
    out = tmp_path / "out"
    try:
        assert master.startswith("spark://127.0.0.1:")
        with Fleet(hub.connection_string) as fleet:
            for name in MACHINES:
                fleet.add(name)
            first = start_monitor(hub.connection_string, master, tmp_path, "1")
            try:
                alive = running(first, tmp_path / "monitor-1.log")
                wait_for(lambda: alive() or all(statuses(read_transitions(out), m)[:2]
                                                == ["Initializing", "Healthy"] for m in MACHINES),
                         timeout=240, interval=0.5, what="every machine Initializing, then Healthy")
            finally:
                os.killpg(first.pid, signal.SIGKILL)  # the driver and its JVM, as in a crash
                first.wait(30)
            last_batch = max(batches(out))

            second = start_monitor(hub.connection_string, master, tmp_path, "2")
            try:
                alive = running(second, tmp_path / "monitor-2.log")
                # Two batches after the last one written before the kill (which the restarted
                # driver may replay): it has read the heartbeats sent while it was down.
                wait_for(lambda: alive() or len([b for b in batches(out) if b > last_batch]) >= 2,
                         timeout=240, interval=0.5, what="two batches after the restart")
            finally:
                second.send_signal(signal.SIGTERM)
                code = second.wait(60)
            assert code == 0, (tmp_path / "monitor-2.log").read_text()[-3000:]
        with urllib.request.urlopen(f"{web_ui}/json/", timeout=10) as answer:
            apps = json.load(answer)
        # Both drivers ran on this cluster (the second may not be marked completed yet).
        names = [a["name"] for a in apps["activeapps"] + apps["completedapps"]]
        assert names == ["streamlab-monitor"] * 2, apps
        rows = read_transitions(out)
        for machine in MACHINES:
            seen = statuses(rows, machine)
            # The state survived the kill: the restarted driver did not meet them anew.
            assert seen[:2] == ["Initializing", "Healthy"] and seen.count("Initializing") == 1, (machine, rows)
    finally:
        cluster.send_signal(signal.SIGTERM)
        code = cluster.wait(60)
    assert code == 0, cluster.stdout.read()
    assert daemons, "the cluster started no daemon"
    # A process killed a moment ago may take a moment to go.
    deadline = time.monotonic() + 15
    while (left := [pid for pid, group in process_groups().items() if group in daemons]) \
            and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, f"processes of the cluster outlived it: {left}"


def test_the_driver_of_a_loopback_cluster_listens_on_loopback():
    assert _driver_conf("spark://127.0.0.1:7077")["spark.driver.host"] == "127.0.0.1"
    assert _driver_conf("spark://cluster.example.com:7077") == {}
    assert _driver_conf("local[2]") == {}


def test_executors_run_this_python_unless_a_cluster_python_was_chosen(monkeypatch):
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/cluster/bin/python3")
    assert _worker_python("spark://cluster.example.com:7077") == "/opt/cluster/bin/python3"
    assert _worker_python("local[2]") == sys.executable
    monkeypatch.delenv("PYSPARK_PYTHON")
    assert _worker_python("spark://127.0.0.1:7077") == sys.executable


def test_a_cluster_needs_a_worker():
    with pytest.raises(ValueError, match="at least one worker"):
        LocalCluster(workers=0)
    answer = subprocess.run([sys.executable, "-m", "streamlab.cluster", "--workers", "0"],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert answer.returncode == 2 and "--workers must be at least 1" in answer.stderr
    assert "Traceback" not in answer.stderr
