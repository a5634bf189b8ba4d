"""The lab registry: ``course.toml`` lists every lab and exercise, in order.

The grader, the authoring pipeline, nox and the site navigation all read it, so a lab
exists in one place.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from streamlab.paths import REPO_ROOT

REGISTRY_FILE = REPO_ROOT / "course.toml"
#: Where the graded checks live, a folder a lab.
CHECKS_DIR = REPO_ROOT / "checks"
#: The version of ``course.toml``'s format these tools read: a change that an older tool
#: would misread (a field renamed, or given another meaning) moves it on.
FORMAT_VERSION = 1


class RegistryError(ValueError):
    """``course.toml`` is malformed, or a lab or exercise it names does not exist."""


MIN_HINTS, MAX_HINTS = 2, 3

#: What an exercise asks of the learner: write the code (build), write down what Spark will
#: do before running it (predict), fix a query that silently goes wrong (debug), or write
#: the test that tells right code from broken code (test).
KINDS = ("build", "predict", "debug", "test")


@dataclass(frozen=True)
class Exercise:
    """One exercise; ``hints`` go from a nudge to an approach, never the solution's code."""

    id: str
    title: str
    hints: tuple[str, ...]
    kind: str = "build"

    @property
    def hint(self) -> str:
        """The first tier, the one the grader shows when a check fails."""
        return self.hints[0]


@dataclass(frozen=True)
class Lab:
    id: str
    slug: str
    title: str
    summary: str
    exercises: tuple[Exercise, ...]

    @property
    def name(self) -> str:
        """Folder and file stem, e.g. ``04-transform-with-state``."""
        return f"{self.id}-{self.slug}"

    def notebook(self, root: str | Path) -> Path:
        """The lab's notebook under ``root`` (``labs/`` or ``solutions/``)."""
        return Path(root) / self.name / f"{self.name}.ipynb"

    @property
    def check_dir(self) -> Path:
        """``checks/lab_04``: the lab's checks, one file an exercise (``test_4_1.py``, ...)."""
        return CHECKS_DIR / f"lab_{self.id}"

    @property
    def check_files(self) -> list[Path]:
        """The lab's check files in its folder (not its story module), in exercise order."""
        return sorted(self.check_dir.glob("test_*.py"), key=lambda p: _number(_dotted(p)))

    @property
    def site_page(self) -> str:
        """The page's path relative to ``site/``."""
        return f"labs/{self.name}.md"

    def exercise(self, exercise_id: str) -> Exercise:
        for exercise in self.exercises:
            if exercise.id == exercise_id:
                return exercise
        known = ", ".join(e.id for e in self.exercises)
        raise RegistryError(f"lab {self.id} has no exercise {exercise_id} (it has {known})")


def _parse(data: dict, source: Path) -> tuple[Lab, ...]:
    version = data.get("format_version")
    if version is None:
        raise RegistryError(
            f"{source} has no format_version; add `format_version = {FORMAT_VERSION}` at its top"
        )
    if version != FORMAT_VERSION or isinstance(version, bool):
        raise RegistryError(
            f"{source} has format_version {version!r}; these tools read format_version "
            f"{FORMAT_VERSION}"
        )
    labs: list[Lab] = []
    seen: set[str] = set()
    for raw in data.get("labs", []):
        try:
            exercises = tuple(_exercise(e, source) for e in raw.get("exercises", []))
            lab = Lab(
                id=raw["id"],
                slug=raw["slug"],
                title=raw["title"],
                summary=raw.get("summary", ""),
                exercises=exercises,
            )
        except KeyError as missing:
            raise RegistryError(f"{source}: a lab or exercise has no {missing} field") from None
        for exercise in exercises:
            if not exercise.id.startswith(f"{int(lab.id)}."):
                raise RegistryError(
                    f"{source}: exercise {exercise.id} of lab {lab.id} should be numbered "
                    f"{int(lab.id)}.N"
                )
        for before, after in zip(exercises, exercises[1:]):
            if _number(after.id) <= _number(before.id):
                raise RegistryError(
                    f"{source}: exercise {after.id} of lab {lab.id} is listed "
                    f"after {before.id}; list exercises in order"
                )
        if lab.id in seen:
            raise RegistryError(f"{source}: lab {lab.id} is listed twice")
        if labs and int(lab.id) < int(labs[-1].id):
            raise RegistryError(
                f"{source}: lab {lab.id} is listed after lab {labs[-1].id}; list labs in order"
            )
        seen.add(lab.id)
        labs.append(lab)
    return tuple(labs)


def _exercise(raw: dict, source: Path) -> Exercise:
    """One ``[[labs.exercises]]`` entry, whose ``hints`` go from a nudge to an approach."""
    exercise_id = raw["id"]
    if "hint" in raw and "hints" not in raw:
        raise RegistryError(
            f"{source}: exercise {exercise_id} has a single hint; give it "
            f"hints = [...], {MIN_HINTS} to {MAX_HINTS} of them, from a nudge "
            "to an approach"
        )
    hints = raw["hints"]
    if (
        not isinstance(hints, list)
        or not MIN_HINTS <= len(hints) <= MAX_HINTS
        or not all(isinstance(h, str) and h.strip() for h in hints)
    ):
        raise RegistryError(
            f"{source}: exercise {exercise_id} should have {MIN_HINTS} to "
            f"{MAX_HINTS} hints, each a non-empty string, from a nudge to an "
            "approach"
        )
    if len(set(hints)) < len(hints):
        raise RegistryError(
            f"{source}: exercise {exercise_id} repeats a hint; each tier "
            "should say more than the one before"
        )
    kind = raw.get("kind", "build")
    if kind not in KINDS:
        raise RegistryError(
            f"{source}: exercise {exercise_id} has kind {kind!r}; the kinds are " + ", ".join(KINDS)
        )
    return Exercise(
        id=exercise_id, title=raw["title"], hints=tuple(h.strip() for h in hints), kind=kind
    )


def _number(exercise_id: str) -> int:
    """The N of an exercise id LAB.N, compared as a number (4.10 comes after 4.9)."""
    return int(exercise_id.partition(".")[2] or 0)


@cache
def labs(path: Path = REGISTRY_FILE) -> tuple[Lab, ...]:
    """Every lab in course order."""
    with open(path, "rb") as handle:
        return _parse(tomllib.load(handle), path)


def lab(lab_id: str) -> Lab:
    """One lab by id; ``"4"`` and ``"04"`` both name lab 04."""
    wanted = lab_id.zfill(2)
    for candidate in labs():
        if candidate.id == wanted:
            return candidate
    known = ", ".join(known_lab.id for known_lab in labs())
    raise RegistryError(f"there is no lab {lab_id!r}; the labs are {known}")


_EXERCISE_ID = re.compile(r"^\d+\.\d+$")


def find_exercise(exercise_id: str) -> tuple[Lab, Exercise]:
    """The lab and exercise of an id such as ``2.1``; a sentence when there is none."""
    if exercise_id.isdigit():
        known = ", ".join(e.id for e in lab(exercise_id).exercises)
        raise RegistryError(f"{exercise_id} is a lab; name one of its exercises: {known}")
    if not _EXERCISE_ID.match(exercise_id):
        raise RegistryError(
            f"{exercise_id!r} is not an exercise id: give one such as 2.1 (lab 02, exercise 1)"
        )
    found = lab(exercise_id.partition(".")[0])
    return found, found.exercise(exercise_id)


_CHECK_PATH = re.compile(r"(?:^|/)lab_(\d+)/[^/]*$")


def lab_of_check(path: str | Path) -> str | None:
    """The lab of a check file or node id: ``checks/lab_04/test_4_2.py::t`` is 04; None for a
    path outside a lab's folder."""
    found = _CHECK_PATH.search(Path(str(path).partition("::")[0]).as_posix())
    return found.group(1) if found else None


def _dotted(check: Path) -> str:
    """``4.10`` for ``test_4_10.py``: the exercise a check file is named after."""
    return check.stem.removeprefix("test_").replace("_", ".")
