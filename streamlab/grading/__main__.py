"""``python -m streamlab.grading [LAB ...]``: grade the lab notebooks (``nox -s check``).

The learner's code never runs in this process: the checks run in a child process
(:mod:`streamlab.grading.supervisor`) under a hard wall-clock limit.

Exit status: 0 when no exercise failed (passed or not started: an untouched lab is not an
error), 1 when an exercise failed or could not be graded (a lab that could not be graded, or
an exercise "not graded" because the course's reference notebooks are missing), 2 for a wrong
command line, and, with ``--complete``, 3 when nothing failed but some exercise is not started
yet. ``build/grade.json`` says the same in ``"complete"``.

With ``--exercise``, the lab's other exercises keep their grade from the run before in
``build/grade.json`` (see :mod:`streamlab.grading.report`), so the course's progress still
counts them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from streamlab import processes
from streamlab.course import registry
from streamlab.grading import answers, blame, report, supervisor, tries, unsaved, waiting, warm
from streamlab.grading.grade_file import GradeFileInvalid
from streamlab.grading.verdict import CheckResult
from streamlab.paths import BUILD_DIR

#: Exit statuses.
OK, FAILED, USAGE, INCOMPLETE = 0, 1, 2, 3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nox -s check --", description=__doc__.split("\n")[0])
    parser.add_argument(
        "labs",
        nargs="*",
        help="lab ids to grade, e.g. 04 (default: all, or the labs of the exercises named)",
    )
    parser.add_argument(
        "--notebooks", default="labs", help="folder of notebooks to grade (default: labs)"
    )
    parser.add_argument(
        "--exercise",
        action="append",
        default=[],
        metavar="ID",
        help="grade only this exercise, e.g. 4.2 (repeatable); the others are left out "
        "of the table, and keep their earlier grade in the JSON",
    )
    parser.add_argument(
        "--json", default=str(BUILD_DIR / "grade.json"), help="where to write the grade as JSON"
    )
    parser.add_argument(
        "--complete", action="store_true", help="exit 3 unless every exercise graded has passed"
    )
    parser.add_argument(
        "--first-tries",
        default=None,
        help="the learner's record of tries, kept across gradings (default: first-tries.json "
        "beside the JSON; none for the course's solutions/)",
    )
    parser.add_argument("--max-check-seconds", type=float, default=None, help=argparse.SUPPRESS)
    # %check reads what the grading waits on as JSON lines (streamlab.grading.waiting).
    parser.add_argument("--progress-json", action="store_true", help=argparse.SUPPRESS)
    return parser


def _choose(labs: list[str], exercises: list[str]) -> list[registry.Lab]:
    """The labs to grade, checking that every lab and exercise named exists."""
    chosen = [registry.lab(i) for i in labs]
    for exercise_id in exercises:
        try:
            lab = registry.lab(exercise_id.partition(".")[0])
        except registry.RegistryError:
            raise registry.RegistryError(
                f"there is no exercise {exercise_id!r}: exercises are named like 4.2"
            ) from None
        lab.exercise(exercise_id)
        if lab not in chosen:
            if labs:
                raise registry.RegistryError(
                    f"exercise {exercise_id} is in lab {lab.id}, which is not among the "
                    f"labs named ({', '.join(labs)})"
                )
            chosen.append(lab)
    return chosen or list(registry.labs())


def _earlier(json_path: Path) -> dict | None:
    """The grade an earlier run wrote; a file that is not one is said, then graded over."""
    try:
        return report.read_json(json_path)
    except GradeFileInvalid as refused:
        print(f"{refused}: this grading writes a new one, without what it held.", file=sys.stderr)
        return None


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        chosen = _choose(args.labs, args.exercise)
    except registry.RegistryError as error:
        text = str(error).rstrip(".")
        print(f"{text[:1].upper()}{text[1:]}.", file=sys.stderr)
        return USAGE
    missing = [lab for lab in chosen if not lab.check_dir.is_dir()]
    for lab in missing:
        print(
            f"No checks for lab {lab.id}: a lab's checks are in checks/{lab.check_dir.name}/, "
            f"one file an exercise (test_{int(lab.id)}_1.py, ...) ({supervisor.REPORT_BUGS}).",
            file=sys.stderr,
        )
    if missing:
        return USAGE

    json_path = Path(args.json)
    earlier = _earlier(json_path)
    # Whatever happens from here on, no earlier grade stays in place.
    report.write_json(
        {
            "format_version": report.FORMAT_VERSION,
            "status": "in-progress",
            "notebooks": args.notebooks,
            "labs": [],
        },
        json_path,
    )
    print(f"Grading {len(chosen)} lab(s) in {args.notebooks}/ ...", flush=True)
    outcome = supervisor.run(
        chosen,
        args.notebooks,
        exercises=args.exercise,
        max_check_seconds=args.max_check_seconds,
        log_path=json_path.with_name("grade.log"),
        on_progress=_progress(args),
    )
    record = _tries(args, json_path, outcome)
    graded = _graded(chosen, outcome, args, earlier, record, json_path)
    graded["unsaved"] = unsaved.warnings(chosen, graded, args.notebooks)
    graded["timings"] = outcome.timings
    report.write_json(graded, json_path)
    # The next grading's child warms up while the learner reads this one's verdict.
    warm.start()
    print()
    print(report.render(graded))
    for line in (
        answers.write_opened(graded, json_path.parent / "answers") if record is not None else []
    ):
        print(line)
    return _status(graded, outcome, args.complete)


def _graded(
    chosen: list[registry.Lab],
    outcome: supervisor.Outcome,
    args: argparse.Namespace,
    earlier: dict | None,
    record: dict[str, dict] | None,
    json_path: Path,
) -> dict:
    """The grade of what the supervisor found, each failure blamed on the exercise whose code
    caused it, as the learner's record of tries says it."""
    return report.grade(
        chosen,
        tries.masked(_blamed(chosen, args, outcome, json_path), record or {}),
        lab_errors=outcome.lab_errors,
        not_graded=outcome.not_graded,
        cells=outcome.cells,
        first_lines=outcome.first_lines,
        fingerprints=outcome.fingerprints,
        exercises=set(args.exercise) or None,
        notebooks=args.notebooks,
        earlier=earlier,
        tries=record,
    )


def _tries(
    args: argparse.Namespace, json_path: Path, outcome: supervisor.Outcome
) -> dict[str, dict] | None:
    """The learner's record of tries with this grading's added (:mod:`.tries`); None when
    the course's own solutions are graded, which is no try of the learner's."""
    if tries.is_course_solutions(args.notebooks):
        return None
    path = Path(args.first_tries) if args.first_tries else json_path.with_name("first-tries.json")
    return tries.update(outcome.results, path)


def _progress(args: argparse.Namespace):
    """Where the grading says what it waits on: JSON lines for %check, else the terminal."""
    return waiting.json_progress if args.progress_json else waiting.TerminalProgress()


def _blamed(
    chosen: list[registry.Lab],
    args: argparse.Namespace,
    outcome: supervisor.Outcome,
    json_path: Path,
) -> list[CheckResult]:
    """The verdicts, with each check that failed because of an earlier exercise's code said so
    (:mod:`streamlab.grading.blame`); an earlier exercise this run did not grade is graded
    apart first, only to know whether it is the cause."""
    graded = args.exercise or [e.id for lab in chosen for e in lab.exercises]
    wanted = blame.unchecked(outcome.results, outcome.uses, graded)
    evidence: list[CheckResult] = []
    if wanted:
        print(
            f"Grading exercise(s) {', '.join(wanted)} as well, whose code a failed check runs ...",
            flush=True,
        )
        labs = [registry.lab(e.partition(".")[0]) for e in wanted]
        evidence = supervisor.run(
            list(dict.fromkeys(labs)),
            args.notebooks,
            exercises=wanted,
            max_check_seconds=args.max_check_seconds,
            log_path=json_path.with_name("grade-earlier.log"),
            on_progress=_progress(args),
        ).results
    return blame.blamed(outcome.results, outcome.uses, evidence)


def _status(graded: dict, outcome: supervisor.Outcome, complete: bool) -> int:
    """The exit status of a grading (see the module's docstring)."""
    tally = report.counts(graded)
    if tally["failed"] or tally["not-graded"] or outcome.lab_errors:
        return FAILED
    if complete and not graded["complete"]:
        return INCOMPLETE
    return OK


if __name__ == "__main__":
    # A front end that stops the grader (SIGTERM) stops its child too: the supervisor's
    # cleanup runs on the way out.
    processes.interrupt_on_sigterm()
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("\nGrading stopped.", file=sys.stderr)
        sys.exit(130)
