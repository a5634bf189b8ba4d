"""``python -m streamlab.grading.watch [LAB ...]``: regrade a lab each time its notebook is saved.

What ``nox -s watch`` runs. It polls the notebooks' modification times (no file-system
events, no extra package), waits for a burst of saves to settle, then runs the grader
(``python -m streamlab.grading LAB``) in a fresh process and prints its table. A lab named
on the command line is graded once at the start; without one, every lab is watched and only
a saved one is graded. Ctrl-C stops it.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from streamlab import processes
from streamlab.course import registry
from streamlab.paths import BUILD_DIR, REPO_ROOT

#: How often the notebooks' modification times are read, in seconds.
POLL_SECONDS = 0.2
#: A save counts once nothing has changed for this long (editors save in bursts).
SETTLE_SECONDS = 0.3


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:  # being replaced by an atomic save, or deleted
        return None
    return stat.st_mtime_ns, stat.st_size


class Watcher:
    """Regrades the labs whose notebooks under ``notebooks`` change."""

    def __init__(
        self, labs: list[registry.Lab], notebooks: Path, json_path: Path, clear: bool
    ) -> None:
        self.labs = labs
        self.notebooks = notebooks
        self.json_path = json_path
        self.clear = clear
        self.stamps = {lab.id: _stamp(lab.notebook(notebooks)) for lab in labs}
        self.grader: subprocess.Popen | None = None

    def changed(self) -> list[registry.Lab]:
        """The labs whose notebooks changed since last asked, once their saves have settled."""
        moved = [
            lab for lab in self.labs if _stamp(lab.notebook(self.notebooks)) != self.stamps[lab.id]
        ]
        while moved:
            before = {lab.id: _stamp(lab.notebook(self.notebooks)) for lab in moved}
            time.sleep(SETTLE_SECONDS)
            after = {lab.id: _stamp(lab.notebook(self.notebooks)) for lab in moved}
            if before == after:
                self.stamps.update(after)
                break
        # A notebook that is gone (deleted or renamed) has nothing to grade until it is back.
        return [lab for lab in moved if self.stamps[lab.id] is not None]

    def grade(self, lab: registry.Lab, what: str) -> None:
        if self.clear:
            print("\033[2J\033[H", end="")
        print(f"{datetime.now():%H:%M:%S} {what} ...", flush=True)
        # A session of its own, so that Ctrl-C reaches the watcher, which stops the grader.
        self.grader = grader = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlab.grading",
                lab.id,
                "--notebooks",
                str(self.notebooks),
                "--json",
                str(self.json_path),
            ],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        for line in grader.stdout or ():
            if not line.startswith("Grading "):
                print(line, end="", flush=True)
        grader.wait()
        self.grader = None
        print(
            f"\nWatching {self._what()}: save a notebook to regrade it; Ctrl-C stops.", flush=True
        )

    def _what(self) -> str:
        if len(self.labs) == 1:
            return self.labs[0].notebook(self.notebooks).name
        return f"{len(self.labs)} labs in {self.notebooks}"

    def stop_grader(self) -> None:
        if self.grader is not None and self.grader.poll() is None:
            # SIGINT: the grader stops the process that runs the checks, with its Spark.
            processes.terminate(self.grader, first=signal.SIGINT)

    def run(self, grade_first: bool) -> None:
        if grade_first:
            for lab in self.labs:
                self.grade(lab, f"grading lab {lab.id}")
        else:
            print(
                f"Watching {self._what()}: save a notebook to grade it; Ctrl-C stops.", flush=True
            )
        while True:
            for lab in self.changed():
                name = lab.notebook(self.notebooks).name
                self.grade(lab, f"{name} saved: regrading lab {lab.id}")
            time.sleep(POLL_SECONDS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nox -s watch --", description=__doc__.split("\n")[0])
    parser.add_argument("labs", nargs="*", help="lab ids to watch, e.g. 04 (default: all)")
    parser.add_argument(
        "--notebooks", default="labs", help="folder of notebooks to watch (default: labs)"
    )
    parser.add_argument(
        "--json",
        default=str(BUILD_DIR / "grade.json"),
        help="where the grader writes the grade as JSON",
    )
    args = parser.parse_args(argv)
    try:
        chosen = [registry.lab(i) for i in args.labs] or list(registry.labs())
    except registry.RegistryError as error:
        print(error, file=sys.stderr)
        return 2
    notebooks = Path(args.notebooks)
    notebooks = notebooks if notebooks.is_absolute() else (REPO_ROOT / notebooks)
    missing = [lab.notebook(notebooks) for lab in chosen if not lab.notebook(notebooks).is_file()]
    if missing:
        print(f"There is no notebook {missing[0]}.", file=sys.stderr)
        return 2
    watcher = Watcher(chosen, notebooks, Path(args.json), clear=sys.stdout.isatty())
    processes.interrupt_on_sigterm()
    try:
        watcher.run(grade_first=bool(args.labs))
    except KeyboardInterrupt:
        watcher.stop_grader()
        print("\nStopped watching.", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
