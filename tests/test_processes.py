"""Child processes: started with their output kept, waited on until ready, dead or late, and
stopped with a grace period; Ctrl-C and SIGTERM as a request to stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from streamlab import processes
from streamlab.processes import Child, serve_until_stopped, terminate, wait_until

IGNORES_SIGTERM = (
    "import signal, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(120)\n"
)


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def _printed(child: Child, text: str) -> bool:
    return any(text in line for line in child.lines())


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace():
    child = Child(_python(IGNORES_SIGTERM))
    wait_until(lambda: _printed(child, "ready"), timeout=30, sleep=child.wait_for_output)
    began = time.monotonic()
    code = terminate(child, grace=1.0)
    took = time.monotonic() - began
    assert code == -signal.SIGKILL
    assert 1.0 <= took < 10, took


def test_a_child_that_obeys_sigterm_ends_with_it_at_once():
    child = Child(_python("import time; print('ready', flush=True); time.sleep(120)"))
    wait_until(lambda: _printed(child, "ready"), timeout=30, sleep=child.wait_for_output)
    began = time.monotonic()
    assert terminate(child, grace=30) == -signal.SIGTERM
    assert time.monotonic() - began < 10
    assert terminate(child) == -signal.SIGTERM  # an ended child is only reaped


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and " Z " not in stat.read_text()  # a zombie has ended


def test_stopping_a_group_stops_what_the_child_started():
    # The child starts a grandchild that ignores SIGTERM too, then exits on SIGTERM itself.
    code = (
        "import subprocess, sys, time\n"
        f"grandchild = subprocess.Popen([sys.executable, '-c', {IGNORES_SIGTERM!r}])\n"
        "print('grandchild', grandchild.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    child = Child(_python(code), group=True)
    line = wait_until(
        lambda: next((x for x in child.lines() if x.startswith("grandchild")), None),
        timeout=30,
        sleep=child.wait_for_output,
    )
    grandchild = int(line.split()[1])
    assert _alive(grandchild)
    assert terminate(child, group=True, grace=5) == -signal.SIGTERM
    wait_until(lambda: not _alive(grandchild), timeout=10, every=0.1)


def test_waiting_returns_what_ready_answered_once_it_is_ready():
    answers = iter([None, "", "Endpoint=sb://127.0.0.1:5672"])
    naps: list[float] = []
    assert (
        wait_until(lambda: next(answers), timeout=10, every=0.25, sleep=naps.append)
        == "Endpoint=sb://127.0.0.1:5672"
    )
    assert naps == [0.25, 0.25]


def test_waiting_gives_up_at_the_deadline_with_the_callers_error():
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    class Late(Exception):
        pass

    with pytest.raises(Late, match="not listening"):
        wait_until(
            lambda: False,
            timeout=2,
            every=0.5,
            sleep=sleep,
            clock=lambda: now[0],
            expired=lambda: Late("not listening"),
        )
    assert now[0] == 2.0
    with pytest.raises(TimeoutError, match="not ready within 1 s"):
        wait_until(lambda: False, timeout=1, sleep=sleep, clock=lambda: now[0])


def test_a_dead_child_is_reported_with_its_output():
    child = Child(
        _python("import sys; print('no config file at /nowhere', flush=True); sys.exit(3)")
    )
    with pytest.raises(RuntimeError, match="exited with code 3") as error:
        wait_until(lambda: False, timeout=30, every=0.05, watch=[child])
    assert "no config file at /nowhere" in str(error.value)


def test_a_logging_childs_output_is_the_end_of_its_log(tmp_path):
    log = tmp_path / "logs" / "server.log"
    log.parent.mkdir()
    log.write_text("an earlier run\n")
    child = Child(_python("for i in range(30): print('line', i)"), log=log)
    assert child.wait(30) == 0
    assert child.output(lines=2) == "line 28\nline 29"
    assert log.read_text().startswith("an earlier run\n")  # appended, not replaced


def test_ctrl_c_and_sigterm_ask_a_loop_to_stop_and_clean_up():
    code = (
        "from streamlab.processes import stop_requested\n"
        "stop = stop_requested()\n"
        "print('waiting', flush=True)\n"
        "while not stop.wait(0.1): pass\n"
        "print('cleaned up', flush=True)\n"
    )
    for sig in (signal.SIGINT, signal.SIGTERM):
        child = Child(_python(code))
        wait_until(
            lambda child=child: _printed(child, "waiting"),
            timeout=30,
            sleep=child.wait_for_output,
        )
        child.send_signal(sig)
        assert child.wait(30) == 0
        assert "cleaned up" in child.output()


def test_sigterm_interrupts_a_blocked_call_as_ctrl_c_does():
    code = (
        "import time\n"
        "from streamlab.processes import interrupt_on_sigterm\n"
        "interrupt_on_sigterm()\n"
        "try:\n"
        "    print('blocked', flush=True)\n"
        "    time.sleep(120)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
    )
    child = Child(_python(code))
    wait_until(lambda: _printed(child, "blocked"), timeout=30, sleep=child.wait_for_output)
    child.terminate()
    assert child.wait(30) == 0 and "interrupted" in child.output()


class _Service:
    def __init__(self, runs_for: int, fails_to_start: bool = False) -> None:
        self.checks, self.runs_for, self.fails = 0, runs_for, fails_to_start
        self.started = self.stopped = False

    def start(self) -> None:
        if self.fails:
            raise ConnectionError("port 7077 is taken")
        self.started = True

    def running(self) -> bool:
        self.checks += 1
        return self.checks <= self.runs_for

    def stop(self) -> None:
        self.stopped = True


def _serve(service: _Service, stop: threading.Event) -> int:
    return serve_until_stopped(
        service,
        lambda: ["Spark master  spark://127.0.0.1:7077", "Ctrl-C stops the cluster."],
        start_error=ConnectionError,
        did_not_start="the cluster did not start",
        stopped="cluster stopped",
        died=lambda: "the master exited; stopping the workers",
        stop=stop,
    )


def test_serving_ends_with_1_when_the_service_dies_and_stops_it(capsys):
    service = _Service(runs_for=0)
    assert _serve(service, threading.Event()) == 1
    out = capsys.readouterr()
    assert service.started and service.stopped
    assert out.out == (
        "Spark master  spark://127.0.0.1:7077\nCtrl-C stops the cluster.\ncluster stopped\n"
    )
    assert out.err == "the master exited; stopping the workers\n"


def test_serving_ends_with_0_when_asked_to_stop(capsys):
    stop = threading.Event()
    stop.set()
    service = _Service(runs_for=100)
    assert _serve(service, stop) == 0
    assert service.stopped and capsys.readouterr().out.endswith("cluster stopped\n")


def test_a_service_that_does_not_start_says_why_and_ends_with_1(capsys):
    service = _Service(runs_for=100, fails_to_start=True)
    assert _serve(service, threading.Event()) == 1
    out = capsys.readouterr()
    assert out.out == "" and out.err == "the cluster did not start: port 7077 is taken\n"
    assert not service.stopped


def test_a_plain_popen_is_stopped_too():
    process = subprocess.Popen(_python(IGNORES_SIGTERM), stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "ready\n"
    assert processes.terminate(process, grace=0.5) == -signal.SIGKILL
    process.stdout.close()
