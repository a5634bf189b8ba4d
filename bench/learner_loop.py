"""How long a learner waits: grading one lab, and the course's whole self-test.

Both are timed through nox, as a learner and CI run them, in a warm environment (the
course's packages already installed):

- ``nox -s check -- 04``: once on the untouched lab (every exercise not started, the
  grader stops before any Spark check) and once on the solved notebook (every check runs,
  Spark included), three runs each, alternating, median reported;
- the self-test: every check passes on solutions/, every exercise of the untouched labs/ is
  not started (``tests/test_grading.py``), and every solution notebook runs top to bottom
  under nbval (``solutions/``): ``nox -s test -- tests/test_grading.py solutions``, once.

    python bench/learner_loop.py [--lab 04] [--runs 3] [--skip-self-test]
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as bench


def nox_command() -> list[str]:
    """nox as the learner runs it: the interpreter that runs ``nox -s bench`` when there is one."""
    given = os.environ.get("STREAMLAB_NOX")
    if given:
        return shlex.split(given)
    for candidate in (bench.ROOT / ".venv" / "bin" / "nox", shutil.which("nox")):
        if candidate and Path(candidate).exists():
            return [str(candidate)]
    raise SystemExit("nox not found: run this through `nox -s bench -- learner_loop`")


def timed(command: list[str], expect_success: bool) -> float:
    started = time.perf_counter()
    process = subprocess.run(command, cwd=bench.ROOT, capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - started
    if (process.returncode == 0) != expect_success:
        raise RuntimeError(
            f"{' '.join(command)} exited {process.returncode}:\n"
            f"{process.stdout[-3000:]}\n{process.stderr[-3000:]}"
        )
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lab", default="04")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-self-test", action="store_true")
    args = parser.parse_args()
    nox = nox_command()
    grade_json = Path(tempfile.mkdtemp(prefix="bench-loop-")) / "grade.json"

    def check(notebooks: str) -> list[str]:
        return [
            *nox,
            "-s",
            "check",
            "--",
            "--notebooks",
            notebooks,
            "--json",
            str(grade_json),
            args.lab,
        ]

    # An untouched lab is not an error (exit 0, every exercise not started); a solved one
    # passes. The two alternate so that a machine busy with something else slows both alike.
    untouched, solved = [], []
    for _ in range(args.runs):
        untouched.append(timed(check("labs"), expect_success=True))
        solved.append(timed(check("solutions"), expect_success=True))
    print(
        f"  nox -s check -- {args.lab}: untouched {bench.median(untouched):.1f} s, "
        f"solved {bench.median(solved):.1f} s (median of {args.runs})"
    )
    figures = {
        "check_untouched_s": [round(s, 1) for s in untouched],
        "check_solved_s": [round(s, 1) for s in solved],
    }
    targets = [
        bench.target(
            f"nox -s check -- {args.lab}, solved lab (every check runs)",
            round(bench.median(solved), 1),
            "s",
            "<= 30",
            bench.median(solved) <= 30,
        ),
        bench.target(
            f"nox -s check -- {args.lab}, untouched lab",
            round(bench.median(untouched), 1),
            "s",
            "report",
            None,
        ),
    ]
    bars = [
        (f"check {args.lab}, untouched", bench.median(untouched)),
        (f"check {args.lab}, solved", bench.median(solved)),
    ]
    if not args.skip_self_test:
        self_test = timed(
            [*nox, "-s", "test", "--", "tests/test_grading.py", "solutions"], expect_success=True
        )
        print(f"  self-test: {self_test / 60:.1f} min")
        figures["self_test_s"] = round(self_test, 1)
        targets.append(
            bench.target(
                "self-test (grading both ways, every solution under nbval)",
                round(self_test / 60, 1),
                "min",
                "<= 10",
                self_test <= 600,
            )
        )
    chart = bench.bar_chart(
        "learner_loop",
        "What a learner waits for",
        bars,
        "s",
        reference=("target 30 s", 30.0),
        note="warm environment, through nox, 2 cores",
    )
    bench.write_result(
        "learner_loop",
        "The learner's loop",
        {"lab": args.lab, "runs": args.runs, "nox": " ".join(nox)},
        figures,
        targets,
        [chart],
    )


if __name__ == "__main__":
    main()
