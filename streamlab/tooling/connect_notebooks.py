"""``nox -s connect_notebooks``: the solution notebooks under nbval over a Spark Connect server.

Starts the course's Spark Connect server (:class:`streamlab.connect.ConnectServer`, on a free
port), runs each lab's solution notebook under nbval with ``STREAMLAB_SPARK_REMOTE`` pointing at
it, one notebook at a time, and stops the server. Prints, per notebook, the cells that passed,
the cells that differ or fail and the time it took; each notebook's pytest output is in
``build/connect-notebooks/NN.log``. Exit status 0 when every notebook passed.

Where Spark Connect truly behaves otherwise, the cell says so, and ``connect_differences.cfg``
holds both readings of the line it prints: nbval compares the rest of the cell. A cell that
cannot run over Connect at all is tagged ``classic-only`` and skipped
(:mod:`streamlab.tooling.connect_nbval`); the count of those is printed too.

    python -m streamlab.tooling.connect_notebooks            # every lab
    python -m streamlab.tooling.connect_notebooks 00 04      # some
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from streamlab import processes
from streamlab.connect import ConnectServer, ConnectServerError
from streamlab.course import registry
from streamlab.paths import BUILD_DIR, REPO_ROOT
from streamlab.session import REMOTE_ENV
from streamlab.tooling.connect_nbval import REASON

LOG_DIR = BUILD_DIR / "connect-notebooks"
#: The lines a notebook truly prints otherwise over Spark Connect, each with both readings.
DIFFERENCES = Path(__file__).with_name("connect_differences.cfg")
#: How long one notebook may take over Connect, all its cells (each is held to 300 s by nbval).
NOTEBOOK_TIMEOUT = 1800


@dataclass
class NotebookRun:
    """What nbval said of one solution notebook over Connect."""

    lab: str
    passed: int = 0
    skipped: int = 0
    classic_only: int = 0  # skipped as tagged classic-only
    failed: list[str] = field(default_factory=list)  # the cells that differ or raise
    seconds: float = 0.0

    def line(self) -> str:
        verdict = "passed" if not self.failed else f"{len(self.failed)} cell(s) differ or fail"
        cells = f"{self.passed} of {self.passed + len(self.failed)} cells"
        classic = f"{self.classic_only} classic-only"
        names = f": {', '.join(self.failed)}" if self.failed else ""
        return (
            f"lab {self.lab}  {verdict:<28} {cells:<16} {classic:<15} {self.seconds:6.0f} s{names}"
        )


def read_junit(lab: str, report: Path, seconds: float) -> NotebookRun:
    """The run of ``lab`` from pytest's JUnit XML ``report`` (a cell per test case)."""
    run = NotebookRun(lab, seconds=seconds)
    if not report.exists():
        run.failed.append("(nbval did not run: see the log)")
        return run
    for case in ET.parse(report).getroot().iter("testcase"):
        name = case.get("name", "?").rsplit("::", 1)[-1]
        skipped = case.find("skipped")
        if skipped is not None:
            run.skipped += 1
            run.classic_only += REASON in (skipped.get("message") or "")
        elif case.find("failure") is not None or case.find("error") is not None:
            run.failed.append(name)
        else:
            run.passed += 1
    return run


def run_notebook(lab: registry.Lab, remote: str, log_dir: Path) -> NotebookRun:
    """nbval on ``lab``'s solution notebook with ``STREAMLAB_SPARK_REMOTE`` set to ``remote``."""
    report = log_dir / f"{lab.id}.xml"
    report.unlink(missing_ok=True)
    env = {**os.environ, REMOTE_ENV: remote, "STREAMLAB_WARM_GRADER": "0"}
    notebook = lab.notebook(REPO_ROOT / "solutions")
    command = [sys.executable, "-m", "pytest", str(notebook), "-q", f"--junitxml={report}"]
    command += [f"--nbval-sanitize-with={DIFFERENCES}", "-p", "streamlab.tooling.connect_nbval"]
    log = log_dir / f"{lab.id}.log"
    log.write_text("", encoding="utf-8")
    began = time.monotonic()
    # A session of its own, so that a notebook that overstays ends with its kernel.
    pytest = processes.Child(command, log=log, group=True, env=env, cwd=REPO_ROOT)
    try:
        pytest.wait(NOTEBOOK_TIMEOUT)
    except subprocess.TimeoutExpired:
        processes.terminate(pytest, group=True)
        with log.open("a", encoding="utf-8") as out:
            out.write(f"\nnbval did not finish lab {lab.id} within {NOTEBOOK_TIMEOUT} s.\n")
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the notebook's kernel goes too
        processes.terminate(pytest, group=True)
        raise
    return read_junit(lab.id, report, time.monotonic() - began)


def run_all(lab_ids: list[str], log_dir: Path = LOG_DIR) -> list[NotebookRun]:
    """Start a server, run the notebooks of ``lab_ids`` one after the other, stop the server."""
    labs = [registry.lab(lab_id) for lab_id in lab_ids] if lab_ids else list(registry.labs())
    log_dir.mkdir(parents=True, exist_ok=True)
    runs = []
    with ConnectServer(log_dir=log_dir) as server:
        print(f"Spark Connect server on {server.url} (log: {server.log})", flush=True)
        for lab in labs:
            runs.append(run_notebook(lab, server.url, log_dir))
            print(runs[-1].line(), flush=True)
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="nox -s connect_notebooks --",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("labs", nargs="*", help="lab numbers (default: every lab)")
    parser.add_argument("--log-dir", type=Path, default=LOG_DIR, help="where the logs go")
    args = parser.parse_args(argv)
    processes.interrupt_on_sigterm()
    try:
        runs = run_all(args.labs, args.log_dir)
    except registry.RegistryError as error:
        print(f"{str(error)[0].upper()}{str(error)[1:]}.", file=sys.stderr)
        return 2
    except ConnectServerError as error:
        print(f"The Spark Connect server did not start: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # the server has been stopped on the way out
        print("Stopped.", file=sys.stderr)
        return 130
    failed = [run.lab for run in runs if run.failed]
    print(
        f"{len(runs) - len(failed)} of {len(runs)} solution notebooks passed over Spark Connect"
        + (f"; these did not: {', '.join(failed)} (logs in {args.log_dir})." if failed else ".")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
