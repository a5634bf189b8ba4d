"""``build/grade.json`` as records: a grade, its labs, their exercises, each status an enum.

:func:`streamlab.grading.report.grade` builds the grade; :meth:`Grade.from_json` checks it
against the format its module docstring gives, both before it is written and when it is read
back, and :meth:`Grade.as_json` writes it from the records. A file of another shape (another
format version, a status the course does not have, a lab without an id) is refused with a
sentence that says what is wrong (:class:`GradeFileInvalid`), never read as "not graded".

Each record keeps the fields the format adds beside those it types (the hint, the first try,
the progress), in the order they were written, so the file reads as the builder made it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, TextIO

from streamlab.grading.verdict import Status
from streamlab.paths import write_atomically

#: The version of the format of ``build/grade.json``.
FORMAT_VERSION = 2


class GradeFileInvalid(ValueError):
    """A grade file of another shape than the course writes; its sentence says where."""


class GradeStatus(StrEnum):
    """Whether a grading wrote the file (``graded``) or is writing it (``in-progress``)."""

    GRADED = "graded"
    IN_PROGRESS = "in-progress"


class LabStatus(StrEnum):
    """A lab's checks ran (``graded``) or could not load or run (``error``)."""

    GRADED = "graded"
    ERROR = "error"


def _enum(kind: type[StrEnum], value: Any, where: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        known = ", ".join(member.value for member in kind)
        raise GradeFileInvalid(f"{where} is {value!r}; it should be one of {known}") from None


def _mapping(value: Any, where: str) -> Mapping:
    if not isinstance(value, Mapping):
        raise GradeFileInvalid(f"{where} should be an object; it is {type(value).__name__}")
    return value


def _list(value: Any, where: str) -> list:
    if not isinstance(value, list):
        raise GradeFileInvalid(f"{where} should be a list; it is {type(value).__name__}")
    return value


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise GradeFileInvalid(f"{where} should be a string; it is {value!r}")
    return value


@dataclass(frozen=True)
class ExerciseGrade:
    """An exercise's row: its id, title and status, and the verdict's other fields."""

    id: str
    title: str
    status: Status
    fields: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any, where: str) -> ExerciseGrade:
        row = _mapping(data, where)
        return cls(
            id=_text(row.get("id"), f"{where}.id"),
            title=_text(row.get("title", ""), f"{where}.title"),
            status=_enum(Status, row.get("status"), f"{where}.status"),
            fields=dict(row),
        )

    def as_json(self) -> dict:
        row = {**self.fields, "id": self.id, "status": self.status.value}
        if self.title or "title" in self.fields:
            row["title"] = self.title
        return row


@dataclass(frozen=True)
class LabGrade:
    """A lab's record: its exercises graded on one fingerprint, and those graded before.

    A lab an earlier run graded (``earlier_labs``) may carry no status of its own.
    """

    id: str
    status: LabStatus | None
    exercises: tuple[ExerciseGrade, ...]
    earlier_exercises: tuple[ExerciseGrade, ...] = ()
    fields: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any, where: str) -> LabGrade:
        lab = _mapping(data, where)
        status = lab.get("status")
        return cls(
            id=_text(lab.get("id"), f"{where}.id"),
            status=None if status is None else _enum(LabStatus, status, f"{where}.status"),
            exercises=_rows(lab.get("exercises"), f"{where}.exercises"),
            earlier_exercises=_rows(lab.get("earlier_exercises", []), f"{where}.earlier_exercises"),
            fields=dict(lab),
        )

    def as_json(self) -> dict:
        lab = {**self.fields, "id": self.id}
        if self.status is not None:
            lab["status"] = self.status.value
        lab["exercises"] = [row.as_json() for row in self.exercises]
        if "earlier_exercises" in self.fields or self.earlier_exercises:
            lab["earlier_exercises"] = [row.as_json() for row in self.earlier_exercises]
        return lab


def _rows(value: Any, where: str) -> tuple[ExerciseGrade, ...]:
    rows = _list(value, where)
    return tuple(ExerciseGrade.from_json(row, f"{where}[{n}]") for n, row in enumerate(rows))


@dataclass(frozen=True)
class Grade:
    """The whole file: the labs graded now, those an earlier run graded, and the rest."""

    status: GradeStatus
    notebooks: str = ""
    labs: tuple[LabGrade, ...] = ()
    earlier_labs: tuple[LabGrade, ...] = ()
    fields: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> Grade:
        """The records of a grade, or :class:`GradeFileInvalid` saying what is not a grade."""
        grade = _mapping(data, "the grade")
        status = _enum(GradeStatus, grade.get("status"), "its status")
        if status is GradeStatus.IN_PROGRESS:
            return cls(status, fields=dict(grade))
        version = grade.get("format_version")
        if version != FORMAT_VERSION:
            raise GradeFileInvalid(
                f"its format_version is {version!r}, and this course writes {FORMAT_VERSION}"
            )
        labs = _list(grade.get("labs"), "labs")
        earlier = _list(grade.get("earlier_labs", []), "earlier_labs")
        return cls(
            status=status,
            notebooks=_text(grade.get("notebooks"), "notebooks"),
            labs=tuple(LabGrade.from_json(lab, f"labs[{n}]") for n, lab in enumerate(labs)),
            earlier_labs=tuple(
                LabGrade.from_json(lab, f"earlier_labs[{n}]") for n, lab in enumerate(earlier)
            ),
            fields=dict(grade),
        )

    def as_json(self) -> dict:
        grade = {**self.fields, "status": self.status.value}
        if self.status is GradeStatus.GRADED:
            grade["notebooks"] = self.notebooks
            grade["labs"] = [lab.as_json() for lab in self.labs]
            grade["earlier_labs"] = [lab.as_json() for lab in self.earlier_labs]
        return grade


def read(path: Path) -> Grade | None:
    """The grade in ``path``; None when there is no file. A file that is not a grade this
    course writes raises :class:`GradeFileInvalid` with a sentence that names it."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as error:
        raise GradeFileInvalid(f"{path} cannot be read ({error.strerror})") from None
    try:
        return Grade.from_json(json.loads(text))
    except ValueError as error:
        reason = error if isinstance(error, GradeFileInvalid) else "it is not JSON"
        raise GradeFileInvalid(f"{path} is not a grade this course writes: {reason}") from None


def write(grade: Grade, path: Path) -> None:
    """Replace ``path`` atomically: a reader sees the old file or the new one, never half."""
    text = json.dumps(grade.as_json(), indent=2, ensure_ascii=False) + "\n"

    def put(out: TextIO) -> None:
        out.write(text)

    write_atomically(path, put)
