"""A stray TCP connection against a transformWithState task's state server, in a Spark of its own.

``python tests/state_server_stray.py WORK tcp|uds`` runs a small ``transformWithState`` query
with ``availableNow`` while a thread watches the JVM's loopback TCP listeners: when one appears
during the query's tasks, it connects to it first and writes 8 bytes (an AMQP client's header),
as a process on the same machine that tries a port it believes free can; so does it with every
listener that waits unserved for more than half a second. With ``tcp`` the
course's setting ``spark.python.unix.domain.socket.enabled`` is turned off; with ``uds`` the
course's session is used as it is. The last line says what happened, as JSON.

The processor's workers take 3 s to unpickle it, so a state server waits for its worker at
least that long, as on a loaded machine: the stray gets there first.
"""

from __future__ import annotations

import glob
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path


def _slow(seconds: float) -> float:
    if os.environ.get("PYSPARK_GATEWAY_PORT") is None:  # in Spark's workers only
        time.sleep(seconds)
    return seconds


class _Slow:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __reduce__(self):
        return (_slow, (self.seconds,))


def _jvm_pid() -> str | None:
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().split()
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if stat[3] == str(os.getpid()) and b"SparkSubmit" in command:
            return pid
    return None


def _listening_ports(pid: str) -> set[int]:
    inodes = set()
    for fd in glob.glob(f"/proc/{pid}/fd/*"):
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                ports.add(int(fields[1].split(":")[1], 16))
    return ports


def _served_ports(pid: str) -> set[int]:
    """Local ports with an established connection: a server that already has its client."""
    ports = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "01":  # 01: ESTABLISHED
                ports.add(int(fields[1].split(":")[1], 16))
    return ports


def main(work: Path, mode: str) -> dict:
    from pyspark.sql.streaming import StatefulProcessor

    import streamlab
    from streamlab.restart_trials import NO_DATA_BATCHES, session_conf

    conf = {"spark.python.unix.domain.socket.enabled": "false"} if mode == "tcp" else None
    spark = streamlab.spark_session("local[2]", conf=conf)

    class Counter(StatefulProcessor):
        def init(self, handle):
            self.count = handle.getValueState("count", "n LONG")

        def handleInputRows(self, key, rows, timerValues):
            seen = sum(1 for _ in rows) + ((self.count.get() or (0,))[0])
            self.count.update((seen,))
            yield from ()

        def close(self):
            pass

    processor = Counter()
    processor.slow = _Slow(3.0)
    (work / "in").mkdir(parents=True)
    (work / "in" / "a.json").write_text('{"k": "a"}\n{"k": "b"}\n')
    counted = (
        spark.readStream.schema("k STRING")
        .json(str(work / "in"))
        .groupBy("k")
        .transformWithState(processor, "k STRING", "Update", "None")
    )
    jvm = _jvm_pid()
    before = _listening_ports(jvm)
    armed, done, hits = threading.Event(), threading.Event(), []

    def stray() -> None:
        seen: dict[int, float] = {}
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not done.is_set():
            now = time.monotonic()
            reached = {port for port, _ in hits}
            for port in _listening_ports(jvm) - before - reached:
                seen.setdefault(port, now)
                waiting = armed.is_set() and now - seen[port] > 0.5
                if waiting and port not in _served_ports(jvm):
                    try:
                        held = socket.create_connection(("127.0.0.1", port))
                        held.sendall(b"AMQP\x00\x01\x00\x00")
                    except OSError:
                        continue
                    hits.append((port, held))
            time.sleep(0.02)

    def write(batch, batch_id):
        armed.set()  # planning is over: the tasks, and their state servers, come next
        batch.collect()

    threading.Thread(target=stray, daemon=True).start()
    began = time.monotonic()
    with session_conf(spark, {NO_DATA_BATCHES: "false"}):
        query = (
            counted.writeStream.foreachBatch(write)
            .option("checkpointLocation", str(work / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
    ended = query.awaitTermination(float(os.environ.get("STRAY_WITHIN", "90")))
    done.set()
    return {
        "mode": mode,
        "ended": ended,
        "seconds": round(time.monotonic() - began, 1),
        "stray_reached": [port for port, _ in hits],
    }


if __name__ == "__main__":
    result = main(Path(sys.argv[1]), sys.argv[2])
    print(json.dumps(result), flush=True)
    os._exit(0)  # a hung query's threads would keep the JVM, and this process, alive
