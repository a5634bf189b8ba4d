"""Every file of ``checks/``, ``solutions/`` and ``labs/`` is one ``course.toml`` names, and
every lab ``course.toml`` names has its files there: a stray file is an exercise forgotten in
the registry, or a lab's checks the grader would never run.

What git tracks is what a fresh clone has; a learner's own files in ``labs/`` do not count.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from streamlab.course import registry
from streamlab.paths import REPO_ROOT

#: What ``checks/`` holds besides the labs' checks: pytest's settings and the checks' plugin.
CHECKS_OWN = {"checks/conftest.py", "checks/pytest.ini"}


def tracked(folder: str, root: Path = REPO_ROOT) -> list[str]:
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--", folder], cwd=root, capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the layout is checked on one")
    return sorted(line for line in listed.stdout.splitlines() if line)


def strays(labs: tuple[registry.Lab, ...], files: list[str]) -> list[str]:
    """The files of ``checks/``, ``solutions/`` and ``labs/`` that no lab of ``labs`` names."""
    expected = set(CHECKS_OWN)
    for lab in labs:
        expected |= {f"solutions/{lab.name}/{lab.name}.ipynb", f"labs/{lab.name}/{lab.name}.ipynb"}
        folder = f"checks/lab_{lab.id}"
        expected.add(f"{folder}/story_{lab.id}.py")
        expected |= {f"{folder}/test_{e.id.replace('.', '_')}.py" for e in lab.exercises}
    data = re.compile(r"checks/data/(\d+)_[\w.-]+$")
    ids = {lab.id for lab in labs}
    return [
        path
        for path in files
        if path not in expected and not ((m := data.match(path)) and m.group(1) in ids)
    ]


def missing(labs: tuple[registry.Lab, ...], files: list[str]) -> list[str]:
    """What a lab of ``labs`` lacks: a notebook, or a check file of an exercise in its folder."""
    present, lacking = set(files), []
    for lab in labs:
        for root in ("solutions", "labs"):
            if f"{root}/{lab.name}/{lab.name}.ipynb" not in present:
                lacking.append(f"{root}/{lab.name}/{lab.name}.ipynb")
        folder = f"checks/lab_{lab.id}/"
        lacking += [
            f"{folder}test_{e.id.replace('.', '_')}.py"
            for e in lab.exercises
            if f"{folder}test_{e.id.replace('.', '_')}.py" not in present
        ]
    return lacking


def _files() -> list[str]:
    return [path for folder in ("checks", "solutions", "labs") for path in tracked(folder)]


def test_every_file_of_checks_solutions_and_labs_is_named_in_course_toml():
    assert strays(registry.labs(), _files()) == [], (
        "course.toml names no lab or exercise these files belong to"
    )


def test_every_lab_in_course_toml_has_its_notebooks_and_its_checks():
    assert missing(registry.labs(), _files()) == []


def test_the_rules_see_a_stray_and_a_missing_exercise():
    lab = registry.lab("00")
    files = [
        f"solutions/{lab.name}/{lab.name}.ipynb",
        f"labs/{lab.name}/{lab.name}.ipynb",
        "checks/lab_00/test_0_1.py",
        "checks/lab_00/test_0_9.py",
        "checks/lab_00/helpers.py",
        f"checks/test_{lab.name.replace('-', '_')}.py",
        "checks/data/00_story.json",
        "checks/data/99_story.json",
    ]
    assert strays((lab,), files) == [
        "checks/lab_00/test_0_9.py",
        "checks/lab_00/helpers.py",
        f"checks/test_{lab.name.replace('-', '_')}.py",
        "checks/data/99_story.json",
    ]
    assert missing((lab,), files) == ["checks/lab_00/test_0_2.py", "checks/lab_00/test_0_3.py"]
