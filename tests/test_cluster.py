"""The reference monitor on a Spark standalone cluster started by ``python -m streamlab.cluster``.

Real parts only: a master and a worker started from the installed PySpark, the hub emulator,
SDK producers, and ``python -m streamlab.monitor`` as the driver with ``STREAMLAB_SPARK_MASTER``
pointing at the cluster. The driver is killed with SIGKILL and started again on the same
checkpoint: the machines it already knew keep their state. Stopping the cluster leaves no
process of it behind.

The ``eventhubs`` source with ``receiveOn=executors`` on the same cluster: a driver killed with
SIGKILL mid-stream and a new one on its checkpoint write every event exactly once, and every
receiver that read a partition was opened by a process of the worker, none by the driver.
"""

from __future__ import annotations

import contextlib
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
from eventhub_clients import send, wait_for

import streamlab.hub.connection
from streamlab.cluster import LocalCluster
from streamlab.fleet import Fleet
from streamlab.monitor import command, read_transitions
from streamlab.paths import REPO_ROOT
from streamlab.session import _driver_conf, _worker_python

MACHINES = ["m1", "m2"]


def start_cluster(log_dir: Path) -> tuple[subprocess.Popen, str, str]:
    """``python -m streamlab.cluster --workers 1``; the process, the master URL and web UI it prints."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlab.cluster",
            "--workers",
            "1",
            "--cores",
            "2",
            "--memory",
            "2g",
            "--log-dir",
            str(log_dir),
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
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
        command(
            connection_string, work / "checkpoint", work / "out", "--trigger", "500 milliseconds"
        ),
        cwd=REPO_ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, "STREAMLAB_SPARK_MASTER": master},
    )


def statuses(rows, machine: str) -> list[str]:
    return [r["status"] for r in rows if r["machine_name"] == machine]


def batches(out: Path) -> list[int]:
    """The ids of the batches the monitor has written, empty ones included."""
    return [int(path.name.split("=")[1]) for path in out.glob("batch_id=*")]


def running(process: subprocess.Popen, log: Path):
    """A wait condition that fails at once, with the log, if ``process`` exited."""

    def check() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"the driver exited: {log.read_text()[-3000:]}")
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
                wait_for(
                    lambda: (
                        alive()
                        or all(
                            statuses(read_transitions(out), m)[:2] == ["Initializing", "Healthy"]
                            for m in MACHINES
                        )
                    ),
                    timeout=240,
                    interval=0.5,
                    what="every machine Initializing, then Healthy",
                )
            finally:
                os.killpg(first.pid, signal.SIGKILL)  # the driver and its JVM, as in a crash
                first.wait(30)
            last_batch = max(batches(out))

            second = start_monitor(hub.connection_string, master, tmp_path, "2")
            try:
                alive = running(second, tmp_path / "monitor-2.log")
                # Two batches after the last one written before the kill (which the restarted
                # driver may replay): it has read the heartbeats sent while it was down.
                wait_for(
                    lambda: alive() or len([b for b in batches(out) if b > last_batch]) >= 2,
                    timeout=240,
                    interval=0.5,
                    what="two batches after the restart",
                )
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
            assert seen[:2] == ["Initializing", "Healthy"] and seen.count("Initializing") == 1, (
                machine,
                rows,
            )
    finally:
        cluster.send_signal(signal.SIGTERM)
        code = cluster.wait(60)
    assert code == 0, cluster.stdout.read()
    assert daemons, "the cluster started no daemon"
    # A process killed a moment ago may take a moment to go.
    deadline = time.monotonic() + 15
    while (
        left := [pid for pid, group in process_groups().items() if group in daemons]
    ) and time.monotonic() < deadline:
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
    answer = subprocess.run(
        [sys.executable, "-m", "streamlab.cluster", "--workers", "0"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert answer.returncode == 2 and "--workers must be at least 1" in answer.stderr
    assert "Traceback" not in answer.stderr


#: A driver on ``master``: the hub read with ``receiveOn=executors`` into a parquet folder,
#: at most ``limit`` events a batch (0: no limit), until it has read what the hub holds.
_EXECUTORS_DRIVER = """
import sys
from streamlab import spark_session
from streamlab.deadlines import finish
master, connection_string, output, checkpoint, limit = sys.argv[1:]
spark = spark_session(master, app_name="streamlab-executors")
reader = (spark.readStream.format("eventhubs").option("connectionString", connection_string)
          .option("eventHubName", "heartbeats").option("startingPosition", "earliest")
          .option("receiveOn", "executors"))
if int(limit):
    reader = reader.option("maxEventsPerTrigger", limit)
query = (reader.load().writeStream.format("parquet").option("path", output)
         .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
finish(query, within=600, what="the cluster's executors to read the hub's events")
"""


def start_executors_driver(
    connection_string: str, master: str, work: Path, run: str, limit: int
) -> subprocess.Popen:
    """The driver above in a process group of its own (its JVM included), logging to ``work``."""
    log = open(work / f"driver-{run}.log", "w")
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            _EXECUTORS_DRIVER,
            master,
            connection_string,
            str(work / "out"),
            str(work / "checkpoint"),
            str(limit),
        ],
        cwd=REPO_ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def committed_batches(out: Path) -> int:
    """How many batches the parquet sink has committed: entries of its metadata log."""
    log = out / "_spark_metadata"
    return len([p for p in log.glob("*") if p.name.split(".")[0].isdigit()]) if log.exists() else 0


def socket_owner(local_port: int, remote_port: int) -> int | None:
    """The process holding the loopback TCP socket ``local_port`` -> ``remote_port``."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if (int(fields[1].split(":")[1], 16), int(fields[2].split(":")[1], 16)) == (
            local_port,
            remote_port,
        ):
            inodes.add(f"socket:[{fields[9]}]")
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            if any(os.readlink(fd) in inodes for fd in fd_dir.iterdir()):
                return int(fd_dir.parent.name)
        except OSError:
            continue  # gone, or not ours
    return None


def ancestors(pid: int | None) -> list[int]:
    """``pid`` and its parents up to the first process."""
    chain = []
    while pid and pid not in chain:
        chain.append(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            break
    return chain


@pytest.fixture
def partition_receivers(monkeypatch) -> list[tuple[str, list[int]]]:
    """Every receiver link on a hub partition, as it attaches: its address and the process that
    opened it with that process's ancestors (looked up while the client waits for the answer)."""
    seen: list[tuple[str, list[int]]] = []
    attach = streamlab.hub.connection.attach

    def watched(conn, session, perf) -> None:
        if perf.get(2, False):  # the client receives
            peer = conn.writer.get_extra_info("peername")
            local = conn.writer.get_extra_info("sockname")
            source = perf.get(5)
            address = str(source.value[0]) if hasattr(source, "value") else ""
            if "/Partitions/" in address:
                seen.append((address, ancestors(socket_owner(peer[1], local[1]))))
        attach(conn, session, perf)

    monkeypatch.setattr(streamlab.hub.connection, "attach", watched)
    return seen


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL to ``process`` and its process group (its JVM), as in a crash; then reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(30)


def test_executors_read_the_hub_on_the_cluster_exactly_once_across_a_driver_kill(
    spark, hub, tmp_path, partition_receivers
):
    first_wave = [f"first-{i}" for i in range(64)]
    second_wave = [f"second-{i}" for i in range(24)]
    send(hub.connection_string, first_wave)
    cluster, master, _ = start_cluster(tmp_path / "cluster")
    worker = next(
        pid
        for pid in children(cluster.pid)
        if "deploy.worker.Worker" in Path(f"/proc/{pid}/cmdline").read_text()
    )
    drivers = []
    try:
        # Two events a partition a batch: several batches, the kill lands between two of them
        # or inside one.
        first = start_executors_driver(hub.connection_string, master, tmp_path, "1", limit=8)
        drivers.append(first.pid)
        try:
            alive = running(first, tmp_path / "driver-1.log")
            wait_for(
                lambda: alive() or committed_batches(tmp_path / "out") >= 2,
                timeout=240,
                interval=0.1,
                what="two batches committed",
            )
        finally:
            kill_group(first)
        read_before = spark.read.parquet(str(tmp_path / "out")).count()
        assert 0 < read_before < len(first_wave), "the kill did not land mid-stream"

        send(hub.connection_string, second_wave)
        second = start_executors_driver(hub.connection_string, master, tmp_path, "2", limit=0)
        drivers.append(second.pid)
        try:
            code = second.wait(240)
        finally:
            kill_group(second)
        assert code == 0, (tmp_path / "driver-2.log").read_text()[-3000:]
    finally:
        cluster.send_signal(signal.SIGTERM)
        cluster.wait(60)
    # The file sink's metadata log decides what the folder holds: the files of a batch the
    # kill interrupted are not in it, and the replayed batch is there once.
    bodies = [r.body.decode() for r in spark.read.parquet(str(tmp_path / "out")).collect()]
    assert sorted(bodies) == sorted(first_wave + second_wave)
    # Every receiver that read a partition ran under the worker (in an executor's Python
    # worker); the drivers opened none (they only asked the hub for the partitions' ends).
    assert partition_receivers, "no receiver read a partition"
    for address, chain in partition_receivers:
        assert worker in chain and not set(drivers) & set(chain), (
            f"a receiver of {address} ran in {chain[:1]} under {chain[1:]}, not the worker {worker}"
        )
