"""How long a learner waits for a verdict: one Spark exercise regraded, a solved lab, the self-test.

Timed through nox, as a learner runs them (``%check`` and ``nox -s watch`` run the same
``python -m streamlab.grading``), in a warm environment (the course's packages installed):

- in each lab of :data:`EXERCISES` named (default: all four), one Spark exercise, ``nox -s
  check -- LAB --exercise X.Y`` on the solved notebook, and the solved lab, ``nox -s check --
  LAB``, each graded three ways side by side, alternating: *cold* (``STREAMLAB_WARM_GRADER=0``:
  the child starts Python, a JVM and Spark itself, as the first grading of a session without
  ``nox -s lab`` does), *warm* (the child that the grading before started ahead of time,
  ready: a regrade after the learner read the verdict) and *right after* (at once after a warm
  grading, while the child it started is still warming up: a typo fixed and regraded). The
  exercise is the one whose checks
  run the most of the learner's own code on Spark at every grading: a prediction's Spark run
  is kept (``streamlab.grading.facts``), so a prediction regrades in about a second;
- the exercise's first grading again with Java's optimizing compiler kept
  (``STREAMLAB_FULL_JIT=1``), alternating with the course's quick compiler only;
- every other lab solved, graded warm (``--every-lab``, the default; ``--no-every-lab`` skips);
- where each grading's seconds went, from its ``build/grade.json`` (``timings``), and how
  long a warm child took to get ready after the grading that started it;
- the self-test: every check passes on solutions/, every exercise of the untouched labs/ is
  not started (``tests/test_grading.py``), and every solution notebook runs top to bottom
  under nbval (``solutions/``): ``nox -s test -- tests/test_grading.py solutions``, once.

    python bench/learner_loop.py [--lab 04 --lab 05] [--runs 3] [--no-every-lab] [--skip-self-test]
"""

from __future__ import annotations

import argparse
import json
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

from streamlab.session import FULL_JIT_ENV


def nox_command() -> list[str]:
    """nox as the learner runs it: the interpreter that runs ``nox -s bench`` when there is one."""
    given = os.environ.get("STREAMLAB_NOX")
    if given:
        return shlex.split(given)
    for candidate in (bench.ROOT / ".venv" / "bin" / "nox", shutil.which("nox")):
        if candidate and Path(candidate).exists():
            return [str(candidate)]
    raise SystemExit("nox not found: run this through `nox -s bench -- learner_loop`")


def timed(command: list[str], expect_success: bool, env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    process = subprocess.run(
        command, cwd=bench.ROOT, capture_output=True, text=True, timeout=1800, env=env
    )
    seconds = time.perf_counter() - started
    if (process.returncode == 0) != expect_success:
        raise RuntimeError(
            f"{' '.join(command)} exited {process.returncode}:\n"
            f"{process.stdout[-3000:]}\n{process.stderr[-3000:]}"
        )
    return seconds


#: The Spark exercise timed in each lab: of those whose checks run the learner's code on Spark
#: at every grading, the slowest to regrade (measured on the solutions in one Spark session).
EXERCISES = {"04": "4.6", "05": "5.8", "09": "9.8", "10": "10.3"}
#: The targets, in seconds: a regrade of one exercise, the first grading of one exercise (from
#: cold), a solved lab.
REGRADE_TARGET, FIRST_TARGET, LAB_TARGET = 10.0, 15.0, 20.0


class Grader:
    """``nox -s check`` on the solved notebooks, in a build folder of the benchmark's own."""

    def __init__(self, nox: list[str]) -> None:
        self.nox = nox
        self.build = Path(tempfile.mkdtemp(prefix="bench-loop-"))
        self.grade_json = self.build / "grade.json"

    def run(
        self,
        lab: str,
        *,
        warm: bool,
        exercise: str | None = None,
        right_after: bool = False,
        extra_env: dict[str, str] | None = None,
    ) -> tuple[float, dict]:
        """Seconds one grading took, and its timings; with ``warm``, a ready warm child first.

        ``right_after`` (with ``warm``): at once after the grading before, while the child that
        grading started is still warming up, as a learner who fixes a typo regrades.
        """
        env = {
            **os.environ,
            "STREAMLAB_BUILD_DIR": str(self.build),
            "STREAMLAB_WARM_GRADER": "1" if warm else "0",
            **(extra_env or {}),
        }
        if warm and not right_after:
            subprocess.run([sys.executable, "-c", _START], env=env, timeout=60, check=True)
        if not right_after:
            # No child is warming up beside the grading timed: the one the last warm grading
            # started is ready and idle, as after the learner read its verdict.
            self.settle(env)
        command = [*self.nox, "-s", "check", "--", lab, "--notebooks", "solutions"]
        command += ["--json", str(self.grade_json)]
        command += ["--exercise", exercise] if exercise else []
        seconds = timed(command, expect_success=True, env=env)
        timings = json.loads(self.grade_json.read_text()).get("timings", {})
        if warm and not right_after and not timings.get("warm"):
            raise RuntimeError(f"a warm child was ready, but the grading did not use it: {timings}")
        return seconds, timings

    def settle(self, env: dict[str, str]) -> None:
        """Wait until no warm child is warming up: those started are ready, or none is."""
        deadline = time.monotonic() + 600
        while True:
            state = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "from streamlab.grading import warm; print(warm.warming())",
                ],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            ).stdout.strip()
            if state == "False":
                return
            if time.monotonic() > deadline:
                raise RuntimeError("no warm grading child was ready within 600 s")
            time.sleep(0.5)

    def ready_times(self) -> list[float]:
        log = self.build / "logs" / "warm-grader.log"
        text = log.read_text() if log.exists() else ""
        return [
            float(line.rsplit(" ", 2)[-2]) for line in text.splitlines() if " ready after " in line
        ]

    def stop(self) -> None:
        subprocess.run(
            [sys.executable, "-c", "from streamlab.grading import warm; warm.stop()"],
            env={**os.environ, "STREAMLAB_BUILD_DIR": str(self.build)},
            timeout=60,
            check=False,
        )
        shutil.rmtree(self.build, ignore_errors=True)


_START = "from streamlab.grading import warm; warm.start()"


def _spread(seconds: list[float]) -> str:
    """``min / median / max s`` of a figure's runs."""
    return f"{min(seconds):.1f} / {bench.median(seconds):.1f} / {max(seconds):.1f} s"


def _phases(timings: list[dict]) -> str:
    """The median seconds of each phase, in the order of a grading."""
    from streamlab.grading.supervisor import PHASES

    parts = []
    for phase in PHASES:
        values = [t.get(phase, 0.0) for t in timings]
        if bench.median(values) >= 0.05:
            parts.append(f"{phase} {bench.median(values):.1f}")
    return ", ".join(parts)


def _exercise_and_lab(grader: Grader, lab: str, runs: int, out: dict) -> None:
    """Lab's Spark exercise and the solved lab, cold and warm side by side, ``runs`` times."""
    exercise = EXERCISES[lab]
    kinds = ("ex_cold", "ex_cold_c2", "ex_warm", "ex_again", "lab_cold", "lab_warm", "lab_again")
    got: dict[str, list] = {k: [] for k in kinds}
    # Cold and warm alternate, so a machine busy with something else slows both alike;
    # before a cold grading the last warm child is ready, idle, as after a grading. "again"
    # regrades at once after the warm grading, while the child it started warms up.
    for _ in range(runs):
        for key, whole in (("ex", False), ("lab", True)):
            only = None if whole else exercise
            got[f"{key}_cold"].append(grader.run(lab, warm=False, exercise=only))
            if not whole:
                # The same first grading with Java's optimizing compiler kept (see
                # streamlab.session.QUICK_COMPILER), beside the course's quick one.
                got["ex_cold_c2"].append(
                    grader.run(lab, warm=False, exercise=only, extra_env={FULL_JIT_ENV: "1"})
                )
            got[f"{key}_warm"].append(grader.run(lab, warm=True, exercise=only))
            got[f"{key}_again"].append(grader.run(lab, warm=True, exercise=only, right_after=True))
    medians = {k: bench.median(s for s, _ in v) for k, v in got.items()}
    spread = {k: _spread([s for s, _ in v]) for k, v in got.items()}
    print(
        f"  lab {lab}: exercise {exercise} cold {spread['ex_cold']}, warm {spread['ex_warm']}, "
        f"right after {spread['ex_again']}; solved lab cold {spread['lab_cold']}, warm "
        f"{spread['lab_warm']}, right after {spread['lab_again']} (minimum / median / maximum "
        f"of {runs})"
    )
    quick, full = medians["ex_cold"], medians["ex_cold_c2"]
    print(
        f"    exercise, cold, Java's optimizing compiler kept ({FULL_JIT_ENV}=1): "
        f"{spread['ex_cold_c2']}; the course's quick compiler takes {quick / full:.2f} x its time"
    )
    out["targets"].append(
        bench.target(
            f"lab {lab}: {exercise} graded first, quick compiler only vs both compilers",
            round(quick / full, 2),
            "x",
            "report",
            None,
            f"{quick:.1f} s against {full:.1f} s, alternating in one run",
        )
    )
    for key, label in (
        ("ex_cold", "exercise, cold"),
        ("ex_warm", "exercise, warm"),
        ("ex_again", "exercise, right after"),
    ):
        print(f"    {label}: {_phases([t for _, t in got[key]])}")
    out["figures"]["labs"][lab] = {
        "exercise": exercise,
        **{f"{k}_s": [round(s, 1) for s, _ in v] for k, v in got.items()},
        "phases": {k: [t for _, t in v] for k, v in got.items()},
    }
    for key, figure, goal in (
        ("ex_warm", f"{exercise} regraded (warm child)", REGRADE_TARGET),
        ("ex_cold", f"{exercise} graded first (cold child)", FIRST_TARGET),
    ):
        out["targets"].append(
            bench.target(
                f"lab {lab}: {figure}",
                round(medians[key], 1),
                "s",
                f"<= {goal:g}",
                medians[key] <= goal,
                _phases([t for _, t in got[key]]),
            )
        )
    for key, figure, goal in (
        ("ex", f"{exercise} regraded right after a verdict", REGRADE_TARGET),
        ("lab", "solved lab regraded right after a verdict", LAB_TARGET),
    ):
        again, cold = medians[f"{key}_again"], medians[f"{key}_cold"]
        out["targets"].append(
            bench.target(
                f"lab {lab}: {figure}",
                round(again, 1),
                "s",
                f"<= {goal:g} and <= cold",
                again <= goal and again <= cold,
                f"{again / cold:.2f} x the cold grading ({cold:.1f} s) of the same run; "
                + _phases([t for _, t in got[f"{key}_again"]]),
            )
        )
    out["solved"][lab] = (medians["lab_warm"], got["lab_warm"], f"cold {medians['lab_cold']:.1f} s")
    out["bars"] += [
        (f"{exercise} cold", medians["ex_cold"]),
        (f"{exercise} warm", medians["ex_warm"]),
        (f"{exercise} right after", medians["ex_again"]),
        (f"lab {lab} cold", medians["lab_cold"]),
        (f"lab {lab} right after", medians["lab_again"]),
    ]


def _solved_lab(grader: Grader, lab: str, runs: int, out: dict) -> None:
    """A lab outside :data:`EXERCISES`, solved, graded warm ``runs`` times."""
    got = [grader.run(lab, warm=True) for _ in range(runs)]
    seconds = bench.median(s for s, _ in got)
    print(f"  lab {lab}: solved lab warm {seconds:.1f} s (median of {runs})")
    out["figures"]["labs"][lab] = {
        "lab_warm_s": [round(s, 1) for s, _ in got],
        "phases": {"lab_warm": [t for _, t in got]},
    }
    out["solved"][lab] = (seconds, got, "")


def _solved_targets(out: dict) -> None:
    """The solved-lab target of every lab graded, in the labs' order."""
    for lab, (seconds, got, cold) in sorted(out["solved"].items()):
        phases = _phases([t for _, t in got])
        out["targets"].append(
            bench.target(
                f"lab {lab}: solved lab (warm child)",
                round(seconds, 1),
                "s",
                f"<= {LAB_TARGET:g}",
                seconds <= LAB_TARGET,
                "; ".join(part for part in (phases, cold) if part),
            )
        )
        out["bars"].append((f"lab {lab} warm", seconds))


def _self_test(out: dict) -> None:
    seconds = timed(
        [*nox_command(), "-s", "test", "--", "tests/test_grading.py", "solutions"],
        expect_success=True,
    )
    print(f"  self-test: {seconds / 60:.1f} min")
    out["figures"]["self_test_s"] = round(seconds, 1)
    out["targets"].append(
        bench.target(
            "self-test (grading both ways, every solution under nbval)",
            round(seconds / 60, 1),
            "min",
            "<= 5",
            seconds <= 300,
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lab", action="append", choices=sorted(EXERCISES))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--every-lab", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--skip-self-test", action="store_true")
    args = parser.parse_args()
    labs = args.lab or sorted(EXERCISES)
    grader = Grader(nox_command())
    out: dict = {"figures": {"labs": {}}, "targets": [], "bars": [], "solved": {}}
    try:
        for lab in labs:
            _exercise_and_lab(grader, lab, args.runs, out)
        if args.every_lab:
            from streamlab.course.registry import labs as every_lab

            for lab in (each.id for each in every_lab() if each.id not in EXERCISES):
                _solved_lab(grader, lab, args.runs, out)
        _solved_targets(out)
        ready = grader.ready_times()
        out["figures"]["warm_child_ready_s"] = ready
        print(
            f"  a warm child was ready {bench.median(ready):.1f} s (median) after the grading "
            "that started it"
        )
        out["targets"].append(
            bench.target(
                "a warm child ready after the grading that started it",
                round(bench.median(ready), 1),
                "s",
                "report",
                None,
                "a regrade sooner than this waits for it, and is still ahead of a cold start",
            )
        )
    finally:
        grader.stop()
    if not args.skip_self_test:
        _self_test(out)
    chart = bench.bar_chart(
        "learner_loop",
        "What a learner waits for",
        out["bars"],
        "s",
        reference=("regrade target 10 s", REGRADE_TARGET),
        note="solved notebooks, through nox, 2 cores; cold: no warm child; warm: one ready",
    )
    bench.write_result(
        "learner_loop",
        "The learner's loop",
        {"labs": labs, "runs": args.runs, "every_lab": args.every_lab, "nox": " ".join(grader.nox)},
        out["figures"],
        out["targets"],
        [chart],
    )


if __name__ == "__main__":
    main()
