"""``%check 2.1``: grade an exercise from its notebook, as the learner last ran its cell.

``import streamlab`` (or ``%load_ext streamlab``) in a notebook registers the magic, lazily:
this module is imported when ``%check`` is first used. It
reads the lab's notebook file, puts in the source of every graded cell as it was last run in
this kernel (:mod:`streamlab.grading.cell_history`), saved or not, writes that notebook to a temporary
folder laid out like ``labs/`` and runs the grader on it in a fresh process, exactly as
``nox -s check`` does. It shows the same verdict, sentence and hint, and says which version
of the cell it graded. A failed exercise shows the failed check's sentence, what it expected
against what the code did (or their diff), and the check's own hint when it has one.

``%check 2.1 2.2`` grades several exercises, ``%check 02`` a whole lab, and ``%check``
alone the lab of the notebook it runs in.
"""

from __future__ import annotations

import dataclasses
import html
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from IPython.core.magic import Magics, line_magic, magics_class

from streamlab import processes
from streamlab.course import registry
from streamlab.course.notebooks import cell_name, exercise_id, first_line, is_graded, read_cells
from streamlab.grading import answers, tries
from streamlab.grading.answers import AnswerCell
from streamlab.grading.cell_history import LAST_RUNS, CellRun
from streamlab.grading.supervisor import Progress
from streamlab.grading.verdict import NOT_GRADED, PASSED, REVEALED, Status
from streamlab.grading.waiting import read_progress
from streamlab.paths import REPO_ROOT


class CheckError(Exception):
    """What the learner asked for cannot be checked; the message says why."""


@dataclass(frozen=True)
class Graded:
    """One exercise's grade, and which version of its cell was graded."""

    id: str
    title: str
    status: str
    message: str
    hint: str
    version: str
    expected: str = ""
    actual: str = ""
    diff: str = ""
    #: Its answer cells from ``solutions/``, once it passed or was revealed.
    answers: tuple[AnswerCell, ...] = ()

    @property
    def shown(self) -> Status | None:
        try:
            return Status(self.status)
        except ValueError:
            return None

    @property
    def version_label(self) -> str:
        """How the version of the cell is introduced: not graded, it was only read."""
        return "Read" if self.status == NOT_GRADED else "Graded"

    def compared(self) -> list[tuple[str, str]]:
        """(label, text) of what the failed check compared: its diff, else both sides."""
        if self.status == PASSED:
            return []
        if self.diff:
            return [("Expected against your code", self.diff)]
        return [
            (label, text)
            for label, text in (("Expected", self.expected), ("Your code", self.actual))
            if text
        ]


@dataclass(frozen=True)
class CheckReport:
    """What ``%check`` shows: HTML in JupyterLab, plain text anywhere else."""

    lab: str
    notebook: Path
    exercises: tuple[Graded, ...]
    seconds: float

    def __str__(self) -> str:
        lines = []
        for e in self.exercises:
            symbol, word = (e.shown.symbol, e.shown.word) if e.shown else ("?", e.status)
            lines.append(f"{symbol} Exercise {e.id} · {e.title}: {word}")
            if e.status != "passed" and e.message:
                lines.append(f"  {e.message}")
            for label, text in e.compared():
                lines.append(f"  {label}:")
                lines.extend(f"    {line}" for line in text.splitlines())
            if e.status != "passed" and e.hint:
                lines.append(f"  Hint: {e.hint} (more: nox -s hint -- {e.id})")
            lines.append(f"  {e.version_label}: {e.version}.")
            lines.extend(_answer_lines(e))
        lines.append(f"({self.notebook.name}, graded in {self.seconds:.1f} s)")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self))

    def _repr_html_(self) -> str:
        rows = []
        for e in self.exercises:
            colour = e.shown.colour if e.shown else "inherit"
            symbol, word = (e.shown.symbol, e.shown.word) if e.shown else ("?", e.status)
            parts = [
                f"<div class='streamlab-check-head'><b style='color:{colour}'>"
                f"{symbol} {html.escape(word)}"
                f"</b> · Exercise {html.escape(e.id)} · {html.escape(e.title)}</div>"
            ]
            if e.status != "passed" and e.message:
                parts.append(f"<div class='streamlab-check-message'>{_html(e.message)}</div>")
            for label, text in e.compared():
                parts.append(
                    f"<div class='streamlab-check-compared'><i>{html.escape(label)}:</i>"
                    f"<pre style='margin:2px 0'>{html.escape(text)}</pre></div>"
                )
            if e.status != "passed" and e.hint:
                parts.append(
                    f"<div class='streamlab-check-hint'><i>Hint:</i> "
                    f"{_html(e.hint)} <span style='color:#6e7781'>(more: "
                    f"<code>nox -s hint -- {html.escape(e.id)}</code>)</span></div>"
                )
            parts.append(
                f"<div class='streamlab-check-version' style='color:#6e7781'>"
                f"{e.version_label}: {html.escape(e.version)}.</div>"
            )
            parts.append(_answer_html(e))
            rows.append(
                f"<div class='streamlab-check streamlab-check-{html.escape(e.status)}' "
                f"style='border-left:4px solid {colour};padding:2px 8px;margin:4px 0'>"
                + "".join(parts)
                + "</div>"
            )
        return "".join(rows) + (
            f"<div style='color:#6e7781;font-size:smaller'>"
            f"{html.escape(self.notebook.name)}, graded in "
            f"{self.seconds:.1f} s</div>"
        )


def _html(text: str) -> str:
    """``text`` escaped, with its `code` spans (hints and sentences use them) as code."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


@magics_class
class CheckMagics(Magics):
    """``%check``, registered lazily by :func:`streamlab.load_ipython_extension`."""

    @line_magic
    def check(self, line: str) -> None:
        """%check [EXERCISE | LAB ...]: grade exercises as you last ran their cells, e.g.
        %check 2.1. Without an argument, the lab of this notebook."""
        check_magic(line)


def check_magic(line: str) -> None:
    """The ``%check`` line magic: grade, then show the report (or one sentence)."""
    from IPython.display import display

    what = line.strip() or "this lab"
    shown = display({"text/plain": f"Checking {what} ..."}, raw=True, display_id=True)
    try:
        report = check(line, on_progress=_shown_in(shown, what))
    except CheckError as error:
        shown.update({"text/plain": str(error)}, raw=True)
        return
    except KeyboardInterrupt:
        shown.update({"text/plain": "Check stopped."}, raw=True)
        return
    shown.update(report)


def _shown_in(shown, what: str) -> Callable[[Progress], None]:
    """Shows what the grading waits on in ``shown``, a display handle, updated in place."""

    def show(progress: Progress) -> None:
        shown.update({"text/plain": f"Checking {what}: {progress.line()}"}, raw=True)

    return show


def check(
    line: str, cwd: Path | None = None, on_progress: Callable[[Progress], None] | None = None
) -> CheckReport:
    """Grade the exercises (or labs) named in ``line`` as last run in this kernel;
    ``on_progress`` is told what the grading waits on, about once a second."""
    lab, wanted = _targets(line.split(), Path(cwd or os.getcwd()))
    notebook = find_notebook(lab, Path(cwd or os.getcwd()))
    started = datetime.now()
    with tempfile.TemporaryDirectory(prefix="streamlab-check-") as folder:
        versions = _write_as_last_run(notebook, lab, Path(folder) / "labs")
        graded = _run_grader(
            lab,
            Path(folder) / "labs",
            wanted,
            Path(folder) / "grade.json",
            _record_args(notebook),
            on_progress,
        )
    exercises = []
    for entry in graded:
        if entry["id"] not in wanted:
            continue
        exercises.append(
            Graded(
                id=entry["id"],
                title=entry.get("title", ""),
                status=entry.get("status", "?"),
                message=entry.get("message") or "",
                hint=_first_hint(entry),
                version=versions.get(entry["id"], "no cell of the notebook is tagged for it"),
                expected=entry.get("expected") or "",
                actual=entry.get("actual") or "",
                diff=entry.get("diff") or "",
            )
        )
    seconds = (datetime.now() - started).total_seconds()
    return CheckReport(lab.id, notebook, tuple(_with_answers(e) for e in exercises), seconds)


def _with_answers(graded: Graded) -> Graded:
    """``graded`` with its answer cells, once it passed or was revealed."""
    if graded.status not in (PASSED, REVEALED):
        return graded
    return dataclasses.replace(graded, answers=tuple(answers.answer_cells(graded.id)))


#: What introduces the answer cells under a verdict.
ANSWER_HEAD = "What the notebook shows after this check:"


def _answer_lines(graded: Graded) -> list[str]:
    """The answer cells under a verdict, as text."""
    if not graded.answers:
        return []
    body = answers.as_text(graded.id, graded.answers)
    return [f"  {ANSWER_HEAD}", *(f"    {line}" for line in body.splitlines())]


def _answer_html(graded: Graded) -> str:
    """The answer cells under a verdict, markdown rendered."""
    if not graded.answers:
        return ""
    return (
        "<div class='streamlab-check-answers' style='margin-top:4px'>"
        f"<i>{html.escape(ANSWER_HEAD)}</i>{answers.as_html(graded.id, graded.answers)}</div>"
    )


def _first_hint(entry: dict) -> str:
    hint = entry.get("hint")
    if not hint and entry.get("hints"):
        hint = entry["hints"][0]
    return hint or ""


def _targets(words: list[str], cwd: Path) -> tuple[registry.Lab, list[str]]:
    """The one lab, and the exercises of it, that ``words`` name."""
    if not words:
        lab = _lab_of_current_notebook(cwd)
        if lab is None:
            raise CheckError(
                "Which exercise? Write it after %check, for example %check 2.1 "
                "(or a lab: %check 02)."
            )
        return lab, [e.id for e in lab.exercises]
    labs: dict[str, registry.Lab] = {}
    wanted: list[str] = []
    for word in words:
        try:
            if "." in word:
                lab = registry.lab(word.partition(".")[0])
                wanted.append(lab.exercise(word).id)
            else:
                lab = registry.lab(word)
                wanted.extend(e.id for e in lab.exercises)
        except (registry.RegistryError, ValueError) as error:
            raise CheckError(f"There is nothing to check called {word!r}: {error}.") from None
        labs[lab.id] = lab
    if len(labs) > 1:
        raise CheckError(
            "%check grades one lab at a time; name exercises of one lab, for "
            "example %check 2.1 2.2."
        )
    return next(iter(labs.values())), list(dict.fromkeys(wanted))


def _lab_of_current_notebook(cwd: Path) -> registry.Lab | None:
    names = [Path(os.environ.get("JPY_SESSION_NAME", "")).stem, cwd.name]
    for lab in registry.labs():
        if lab.name in names:
            return lab
    return None


def find_notebook(lab: registry.Lab, cwd: Path) -> Path:
    """The notebook the learner works on for ``lab``.

    The notebook this kernel runs (JupyterLab tells the kernel its path) if it holds the
    lab's exercises, else the lab's notebook next to or under the working directory
    (JupyterLab starts a kernel in its notebook's folder), else the one in ``labs/``.
    """
    candidates = []
    session = os.environ.get("JPY_SESSION_NAME")
    if session and Path(session).suffix == ".ipynb":
        candidates.append(Path(session))
    file = f"{lab.name}.ipynb"
    candidates += [
        cwd / file,
        cwd / lab.name / file,
        cwd.parent / lab.name / file,
        lab.notebook(REPO_ROOT / "labs"),
    ]
    tags = {f"exercise-{e.id}" for e in lab.exercises}
    for candidate in candidates:
        if candidate.is_file() and _has_any_tag(candidate, tags):
            return candidate
    raise CheckError(
        f"Cannot find the notebook of lab {lab.id} ({file}) in {cwd} or in {REPO_ROOT / 'labs'}."
    )


def _has_any_tag(path: Path, tags: set[str]) -> bool:
    try:
        cells = read_cells(path)
    except (OSError, ValueError):
        return False
    return any(tags & set(c.get("metadata", {}).get("tags", [])) for c in cells)


def _write_as_last_run(notebook: Path, lab: registry.Lab, labs_dir: Path) -> dict[str, str]:
    """Copy ``notebook`` into ``labs_dir`` with every graded cell as it was last run.

    Returns, per exercise, a phrase saying which version of its cell is graded.
    """
    import nbformat

    content = nbformat.read(notebook, as_version=4)
    saved_at = datetime.fromtimestamp(notebook.stat().st_mtime)
    versions: dict[str, list[str]] = {}
    for cell in content.cells:
        if not is_graded(cell):
            continue
        run = LAST_RUNS.get(cell.get("id", ""))
        exercise = exercise_id(cell)
        if exercise:
            versions.setdefault(exercise, []).append(_version(exercise, cell.source, run, saved_at))
        if run is not None:
            cell.source = run.source
    target = lab.notebook(labs_dir)
    target.parent.mkdir(parents=True)
    nbformat.write(content, target)
    return {exercise: "; ".join(phrases) for exercise, phrases in versions.items()}


def _version(exercise: str, saved: str, run: CellRun | None, saved_at: datetime) -> str:
    cell = cell_name(exercise, first_line(saved if run is None else run.source))
    if run is None:
        return (
            f"{cell} as saved at {saved_at:%H:%M:%S} (you have not run it since %check was loaded)"
        )
    if run.source == saved:
        return f"{cell} as you last ran it at {run.at:%H:%M:%S}, the same as saved"
    return f"{cell} as you last ran it at {run.at:%H:%M:%S}, not saved yet"


def _run_grader(
    lab: registry.Lab,
    labs_dir: Path,
    wanted: list[str],
    json_path: Path,
    extra: Sequence[str] = (),
    on_progress: Callable[[Progress], None] | None = None,
) -> list[dict]:
    """Run ``python -m streamlab.grading`` on ``labs_dir`` and return the lab's exercises."""
    base = [
        sys.executable,
        "-m",
        "streamlab.grading",
        lab.id,
        "--notebooks",
        str(labs_dir),
        "--json",
        str(json_path),
        "--progress-json",
    ]
    if len(wanted) < len(lab.exercises):
        base += [arg for exercise in wanted for arg in ("--exercise", exercise)]
    result = _grade(base + list(extra), on_progress)
    graded = json.loads(json_path.read_text(encoding="utf-8")) if json_path.exists() else {}
    for entry in graded.get("labs", []):
        if entry.get("id") == lab.id and entry.get("exercises"):
            return entry["exercises"]
    last = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or ["?"]
    raise CheckError(f"The grader could not grade lab {lab.id}: {last[0]}")


def _record_args(notebook: Path) -> list[str]:
    """Keep the learner's tries where ``nox -s check`` keeps them; none when the notebook is
    the course's own solution (an instructor checking it)."""
    if tries.is_course_solutions(notebook.parent.parent):
        return []
    return ["--first-tries", str(tries.RECORD)]


#: How long ``%check`` waits for the grader: far more than its own limits add up to for a lab.
GRADER_WITHIN = 20 * 60.0


def _grade(
    command: list[str], on_progress: Callable[[Progress], None] | None = None
) -> subprocess.CompletedProcess:
    process = subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = _follow(process, on_progress)
    except subprocess.TimeoutExpired:
        processes.terminate(process, first=signal.SIGINT)
        raise CheckError(
            f"The grader had not finished after {GRADER_WITHIN / 60:g} minutes and was stopped; "
            "every check has a time limit of its own, so the grader itself is stuck. Run "
            "`nox -s check` in a terminal to watch it work; Spark's log is in build/logs/."
        ) from None
    except BaseException:
        # Interrupting the kernel stops the grading too: SIGINT lets the grader stop its child.
        processes.terminate(process, first=signal.SIGINT)
        raise
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def _follow(
    process: subprocess.Popen, on_progress: Callable[[Progress], None] | None
) -> tuple[str, str]:
    """Wait for the grader (at most :data:`GRADER_WITHIN`), telling ``on_progress`` from this
    thread (the kernel's, which owns the display) the latest of what it waits on; returns its
    output without the progress lines."""
    kept: dict[str, list[str]] = {"stdout": [], "stderr": []}
    latest: list[Progress] = []

    def pump(name: str, stream) -> None:
        for text in stream:
            progress = read_progress(text)
            if progress is None:
                kept[name].append(text)
            else:
                latest[:] = [progress]

    pumps = [
        threading.Thread(target=pump, args=(name, stream), daemon=True)
        for name, stream in (("stdout", process.stdout), ("stderr", process.stderr))
    ]
    for thread in pumps:
        thread.start()
    deadline = time.monotonic() + GRADER_WITHIN
    shown = None
    while process.poll() is None:
        if time.monotonic() > deadline:
            raise subprocess.TimeoutExpired(process.args, GRADER_WITHIN)
        if on_progress is not None and latest and latest[0] is not shown:
            shown = latest[0]
            on_progress(shown)
        time.sleep(0.25)
    for thread in pumps:
        thread.join(timeout=10)
    return "".join(kept["stdout"]), "".join(kept["stderr"])
