"""Every entry point of the course. `nox -l` lists them.

All sessions share one virtual environment, `.nox/course`, built from `requirements.lock`
(pinned) plus this package in editable mode. It is rebuilt only when those files change,
so the first session takes a few minutes and the rest start at once.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import nox

ROOT = Path(__file__).parent
VENV = ROOT / ".nox" / "course"
BIN = VENV / "bin"
STAMP = VENV / ".installed"
#: streamlab.jvm_archive.folder() of the course environment: made by the archive's first build.
JVM_ARCHIVE = VENV / "streamlab-jvm"
LOCK_FILES = [ROOT / "requirements.lock", ROOT / "pyproject.toml"]

nox.options.sessions = ["test"]
nox.options.default_venv_backend = "none"
# The course never uses uv. Saying so up front keeps nox from probing for the binary and
# logging "uv binary not found." at the start of every session (attributes of the pinned
# nox that its own code reads back through `_uv_state`).
nox.virtualenv.HAS_UV, nox.virtualenv.UV = False, "uv"
nox.virtualenv.UV_VERSION = nox.virtualenv.version.Version("0")


def _fingerprint() -> str:
    digest = hashlib.sha256()
    for path in LOCK_FILES:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def course_env(session: nox.Session) -> dict[str, str]:
    """Create or refresh the shared environment; return the variables that select it."""
    if not (BIN / "python").exists():
        session.run(sys.executable, "-m", "venv", str(VENV), external=True)
    if not STAMP.exists() or STAMP.read_text() != _fingerprint():
        pip = [str(BIN / "python"), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
        session.log("Installing the course's packages (first run only; a few minutes)...")
        session.run(*pip, "-r", str(ROOT / "requirements.lock"), external=True)
        session.run(*pip, "--no-deps", "-e", str(ROOT), external=True)
        shutil.rmtree(JVM_ARCHIVE, ignore_errors=True)
        STAMP.write_text(_fingerprint())
    if not JVM_ARCHIVE.exists():
        # Spark's classes archived once per install, so that every Spark after starts faster
        # (streamlab.jvm_archive); without the archive Spark starts as it always did.
        session.run(
            str(BIN / "python"),
            "-m",
            "streamlab.tooling.build_jvm_archive",
            external=True,
            success_codes=[0, 1],
        )
    return {
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "VIRTUAL_ENV": str(VENV),
        "PYTHONUNBUFFERED": "1",
        "NO_MKDOCS_2_WARNING": "1",
    }


def run(session: nox.Session, *args: str, env: dict[str, str], **kwargs) -> None:
    """Run a command from the course environment."""
    program = args[0] if "/" in args[0] else str(BIN / args[0])
    session.run(program, *args[1:], env=env, external=True, **kwargs)


def run_module(session: nox.Session, module: str) -> None:
    """Run ``python -m module`` from the course environment with the session's arguments."""
    run(session, "python", "-m", module, *session.posargs, env=course_env(session))


def hand_over(session: nox.Session, module: str) -> None:
    """Replace this process with ``python -m module`` from the course environment.

    What the module prints is the last thing the learner reads (not nox's red "Command ...
    failed" and "Session ... failed."), and its exit status is the session's.
    """
    env = course_env(session)
    sys.stdout.flush()
    sys.stderr.flush()
    python = str(BIN / "python")
    os.execve(python, [python, "-m", module, *session.posargs], {**os.environ, **env})


@nox.session
def lab(session: nox.Session) -> None:
    """Start JupyterLab on the labs (Ctrl-C stops it)."""
    run_module(session, "streamlab.tooling.lab_launcher")


@nox.session
def demo(session: nox.Session) -> None:
    """The heartbeat monitor end to end in the terminal: hub, producers, Spark (Ctrl-C stops)."""
    run_module(session, "streamlab.demo")


@nox.session
def cluster(session: nox.Session) -> None:
    """A Spark standalone master and two workers on this machine (`-- --workers 3`); Ctrl-C stops."""
    run_module(session, "streamlab.cluster")


@nox.session
def connect(session: nox.Session) -> None:
    """A Spark Connect server with the course's settings on sc://127.0.0.1:15002; Ctrl-C stops."""
    run_module(session, "streamlab.connect")


@nox.session
def connect_notebooks(session: nox.Session) -> None:
    """Run the solution notebooks under nbval over a Spark Connect server it starts (`-- 00 04`: some)."""
    hand_over(session, "streamlab.tooling.connect_notebooks")


@nox.session
def hub(session: nox.Session) -> None:
    """Look inside the running hub: partitions, sequence numbers, recent events, readers."""
    hand_over(session, "streamlab.hub_explorer")


@nox.session
def check(session: nox.Session) -> None:
    """Grade your labs: `nox -s check` for all, `nox -s check -- 04` for one."""
    hand_over(session, "streamlab.grading")


@nox.session
def hint(session: nox.Session) -> None:
    """The next hint of an exercise, one tier more each time: `nox -s hint -- 2.1`."""
    run_module(session, "streamlab.tooling.hints")


@nox.session
def reveal(session: nox.Session) -> None:
    """Show an exercise's answer, solution and discussion: `nox -s reveal -- 2.4` (graded as revealed)."""
    hand_over(session, "streamlab.grading.reveal")


@nox.session
def watch(session: nox.Session) -> None:
    """Regrade a lab each time its notebook is saved: `nox -s watch -- 04`; Ctrl-C stops."""
    run_module(session, "streamlab.grading.watch")


@nox.session
def author(session: nox.Session) -> None:
    """Regenerate labs/ from solutions/ and strip notebook outputs."""
    run_module(session, "streamlab.tooling.authoring")


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff's lint and format checks, and mypy over the grader and the notebook API; `nox -s lint -- fix` applies ruff's fixes."""
    env = course_env(session)
    _lint(session, env, fix="fix" in session.posargs)


def _lint(session: nox.Session, env: dict[str, str], *, fix: bool = False) -> None:
    if fix:
        run(session, "ruff", "check", "--fix", str(ROOT), env=env)
        run(session, "ruff", "format", str(ROOT), env=env)
    else:
        run(session, "ruff", "check", str(ROOT), env=env)
        run(session, "ruff", "format", "--check", str(ROOT), env=env)
    # The grader and the modules notebooks import from (pyproject.toml's [tool.mypy] files).
    run(session, "mypy", env=env)


@nox.session
def test(session: nox.Session) -> None:
    """Everything CI runs: lint, freshness of labs/, the package's tests, the self-test, the site."""
    env = course_env(session)
    _lint(session, env)
    run(session, "python", "-m", "streamlab.tooling.authoring", "--check", env=env)
    if session.posargs:
        run(session, "python", "-m", "pytest", *session.posargs, env=env)
        return
    # Two streams side by side, as both spend much of their time waiting on Spark's triggers,
    # the hub and child processes: the package's tests, and beside them the solution notebooks
    # (nbval), the tests that run whole programs (the monitor, the demo, a cluster), and some of
    # the solution notebooks again over a Spark Connect server (CONNECT_LABS).
    # The side stream has a scratch folder of its own.
    logs = {
        "the solution notebooks under nbval": ROOT / "build" / "solutions-nbval.log",
        "the whole-program tests": ROOT / "build" / "whole-programs.log",
        "the solution notebooks over Spark Connect": ROOT / "build" / "connect-notebooks.log",
    }
    logs[next(iter(logs))].parent.mkdir(parents=True, exist_ok=True)
    side_env = {**os.environ, **env, "STREAMLAB_BUILD_DIR": str(ROOT / "build" / "side")}
    # No grading child started ahead of time (streamlab.grading.warm) holds a JVM past the run.
    side_env["STREAMLAB_WARM_GRADER"] = "0"
    session.log(
        f"Running the solution notebooks, then {len(SIDE_TESTS)} test files of whole programs, "
        f"then labs {', '.join(CONNECT_LABS)} over Spark Connect, beside the tests (output: {', '.join(str(path) for path in logs.values())})"
    )
    side = threading.Thread(target=_side_stream, args=(side_env, logs), daemon=True)
    side.start()
    try:
        ignored = [f"--ignore={path}" for path in SIDE_TESTS]
        run(session, "python", "-m", "pytest", "tests", *ignored, env=env)
    finally:
        side.join()
        for name, path in logs.items():
            session.log(f"{name[0].upper()}{name[1:]}:")
            print(path.read_text()[-5000:] if path.exists() else "(did not run)", flush=True)
    failed = [f"{name} (see {logs[name]})" for name in logs if SIDE_RESULTS.get(name) != 0]
    if failed:
        session.error(f"Beside the tests, these failed: {'; '.join(failed)}.")


#: Test files that run whole programs (the monitor, the demo, a standalone cluster, a state
#: server's strays, the board and the tours in a browser): `nox -s test` runs them after the
#: solution notebooks, beside the rest, so that the two streams end about together.
SIDE_TESTS = [
    "tests/test_cluster.py",
    "tests/test_demo.py",
    "tests/test_state_server_strays.py",
    "tests/test_monitor.py",
    "tests/test_lab05_recovery.py",
    "tests/test_capstone.py",
    "tests/test_jupyterlab_board.py",
    "tests/test_tour.py",
]
SIDE_RESULTS: dict[str, int] = {}
#: The labs whose solution notebooks `nox -s test` also runs over Spark Connect (all eleven:
#: `nox -s connect_notebooks`).
CONNECT_LABS = ["00", "01", "02", "04"]


def _side_stream(env: dict[str, str], logs: dict[str, Path]) -> None:
    """The solution notebooks under nbval, the whole-program tests, then CONNECT_LABS over
    Spark Connect, each to its log."""
    connect = ["streamlab.tooling.connect_notebooks", *CONNECT_LABS]
    steps = (["pytest", "solutions", "-q"], ["pytest", *SIDE_TESTS, "-q"], connect)
    for name, args in zip(logs, steps, strict=True):
        with logs[name].open("w") as out:
            SIDE_RESULTS[name] = subprocess.call(
                [str(BIN / "python"), "-m", *args],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )


@nox.session
def site(session: nox.Session) -> None:
    """Build the course website into build/site."""
    env = course_env(session)
    run(session, "python", "-m", "mkdocs", "build", "--strict", env=env)


@nox.session
def serve(session: nox.Session) -> None:
    """Serve the course website at http://127.0.0.1:8000 with live reload."""
    env = course_env(session)
    run(session, "python", "-m", "mkdocs", "serve", *session.posargs, env=env)


#: Every benchmark, in the order `nox -s bench` runs them (about an hour on 2 cores).
BENCHMARKS = [
    "hub_throughput",
    "eventhubs_ingest",
    "latency",
    "state_calls",
    "state_machine",
    "fleet_capacity",
    "state_store",
    "state_value_size",
    "restart_recovery",
    "learner_loop",
    "checkpoint_files",
    "delta_sink",
    "batch_breakdown",
    "batch_floor",
    "cluster_ingest",
    "mapstate",
]


@nox.session
def bench(session: nox.Session) -> None:
    """Measure what the course claims (`nox -s bench -- latency` runs one); prints the targets."""
    env = {**course_env(session), "STREAMLAB_NOX": f"{sys.executable} -m nox"}
    unknown = sorted(set(session.posargs) - set(BENCHMARKS))
    if unknown:
        session.error(
            f"no benchmark {', '.join(unknown)}; the benchmarks are {', '.join(BENCHMARKS)}"
        )
    took = {}
    for name in session.posargs or BENCHMARKS:
        session.log(f"benchmark {name}")
        start = time.monotonic()
        run(session, "python", str(ROOT / "bench" / f"{name}.py"), env=env)
        took[name] = time.monotonic() - start
    run(session, "python", str(ROOT / "bench" / "_report.py"), env=env)
    session.log(
        "wall time: "
        + ", ".join(f"{name} {seconds:.0f} s" for name, seconds in took.items())
        + f"; total {sum(took.values()) / 60:.1f} min"
    )


@nox.session
def clean(session: nox.Session) -> None:
    """Delete build/ (checkpoints, grades, site) and the course environment."""
    for path in (ROOT / "build", VENV):
        if path.exists():
            session.log(f"removing {path}")
            shutil.rmtree(path)


@nox.session
def mutants(session: nox.Session) -> None:
    """Do the checks catch wrong solutions? `nox -s mutants -- 04` (`--exercise 4.2`: one)."""
    run_module(session, "streamlab.tooling.mutants")


@nox.session
def reset(session: nox.Session) -> None:
    """Put an exercise's stub back (`nox -s reset -- 4.2`, or a lab: `-- 04`); yours is kept beside it."""
    run_module(session, "streamlab.tooling.reset")
