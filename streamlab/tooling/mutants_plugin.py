"""The pytest plugin that ``nox -s mutants`` adds to the grading child: variants, not labs.

:mod:`streamlab.tooling.mutants` loads it with ``-p streamlab.tooling.mutants_plugin`` and
``--variants FILE``, a JSON list of ``{"unit": "m12", "exercise": "0.2", "folder": ...}``:
each variant is a copy of its lab's notebook in ``folder``, with one change in ``exercise``'s
cell (``solution`` is the solution itself). Each check of the variant's exercise runs once per
variant, checks without Spark first, on that variant's notebook; a variant stops at its first
check that does not pass. The grading plugin (:mod:`streamlab.grading.plugin`) does the rest:
every event and verdict names the variant as its ``unit``, and its ``lab`` stays the lab.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamlab.grading.plugin import GradedUnit, exercise_of, grading_plan, results
from streamlab.grading.verdict import PASSED

_variant_key = pytest.StashKey[GradedUnit]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("streamlab", "course grading").addoption(
        "--variants",
        default=None,
        help="JSON: variants of the lab's notebook to grade, each against its exercise's "
        "checks, fast checks first, stopping at a variant's first failing check "
        "(nox -s mutants)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The checks become one copy per variant of each check of its exercise."""
    path = config.getoption("variants")
    if path:
        wanted = set(config.getoption("exercise"))
        checks = [i for i in items if not wanted or exercise_of(i) in wanted]
        items[:] = _variant_items(json.loads(Path(path).read_text()), checks)


def _variant_items(variants: list[dict], items: list[pytest.Item]) -> list[pytest.Item]:
    """A copy of each check of a variant's exercise, per variant, checks without Spark first."""
    by_exercise: dict[str, list[pytest.Function]] = {}
    for item in items:
        if isinstance(item, pytest.Function):
            by_exercise.setdefault(exercise_of(item), []).append(item)
    for checks in by_exercise.values():
        checks.sort(key=lambda item: "spark" in item.fixturenames)
    copies: list[pytest.Item] = []
    for variant in variants:
        for item in by_exercise.get(variant["exercise"], []):
            copy = pytest.Function.from_parent(
                item.parent,
                name=f"{item.name}@{variant['unit']}",
                callspec=getattr(item, "callspec", None),
                callobj=item.obj,
                fixtureinfo=item._fixtureinfo,
                originalname=item.originalname,
            )
            copy.stash[_variant_key] = GradedUnit(variant["unit"], Path(variant["folder"]))
            copies.append(copy)
    return copies


def pytest_grading_unit(item: pytest.Item) -> GradedUnit | None:
    """The variant a copy of a check grades."""
    return item.stash.get(_variant_key, None)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> bool | None:
    """Run nothing of a variant that already did not pass a check: it is caught."""
    variant = item.stash.get(_variant_key, None)
    if variant is None:
        return None
    caught = set(grading_plan(item.config).get("failed", []))
    caught.update(r.unit for r in results(item.config) if r.verdict.status != PASSED)
    return True if variant.id in caught else None
