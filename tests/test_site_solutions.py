"""Solutions open by passing: the site holds an exercise's solution and discussion only once
``build/grade.json`` says it passed, every one in an instructor's build, and seen in Chromium."""

from __future__ import annotations

import functools
import html
import json
import re
import tomllib
from pathlib import Path

import markdown
import pytest
from jupyter_support import build_site, serving
from mkdocs.exceptions import PluginError

from streamlab.course import registry
from streamlab.course.notebooks import exercise_id, read_cells, solution_regions
from streamlab.paths import BUILD_DIR, REPO_ROOT
from streamlab.tooling import mkdocs_hooks

ARTIFACTS = BUILD_DIR / "artifacts"
#: The labs whose every exercise has a discussion.
DISCUSSED_LABS = ("04", "05", "09", "10")


def _grade(path: Path, statuses: dict[str, str], **extra) -> Path:
    """A ``grade.json`` of lab 04 in the grader's format, the exercises' statuses as given."""
    lab = registry.lab("04")
    rows = [
        {"id": e.id, "title": e.title, "status": statuses.get(e.id, "not-started")}
        for e in lab.exercises
    ]
    graded = {
        "format_version": 2,
        "status": "graded",
        "notebooks": "labs",
        "labs": [{"id": "04", "title": lab.title, "status": "graded", "exercises": rows}],
        "earlier_labs": [],
        **extra,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(graded), encoding="utf-8")
    return path


@functools.cache
def _solution_lines(exercise: str, shortest: int = 16) -> list[str]:
    """Lines of the exercise's solution regions that the learner's notebook does not hold.

    A debug exercise's statement shows the code to fix, and a statement may quote a call the
    solution makes: what the learner has already is no secret.
    """
    lab = registry.lab(exercise.partition(".")[0])
    given = _flat(
        "\n".join(cell["source"] for cell in read_cells(lab.notebook(REPO_ROOT / "labs")))
    ).replace("`", "")
    lines = []
    for cell in read_cells(lab.notebook(REPO_ROOT / "solutions")):
        if cell.get("cell_type") == "code" and exercise_id(cell) == exercise:
            for region in solution_regions(cell["source"]):
                lines += [_flat(line) for line in region.splitlines()]
    return [line for line in lines if len(line) >= shortest and line not in given]


def _text(fragment: str) -> str:
    """What a reader (or a search) finds in HTML: the text without tags, spaces collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


def _flat(text: str) -> str:
    return " ".join(text.split())


def _sections(page: str) -> dict[str, str]:
    """The rendered exercise sections of a lab's markdown, by exercise id, as text."""
    rendered = markdown.markdown(
        page, extensions=["admonition", "pymdownx.details", "pymdownx.superfences"]
    )
    parts = re.split(r"<h3>Exercise (\d+\.\d+)\b", rendered)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def _shows_solution(section: str, exercise: str) -> bool:
    text = _text(section)
    shown = '<details class="success">' in section
    return shown and all(line in text for line in _solution_lines(exercise))


def _holds_any_of_the_solution(section: str, exercise: str) -> bool:
    text = _text(section)
    return any(line in text for line in _solution_lines(exercise))


@functools.cache
def _discussions() -> dict[str, str]:
    """``discussions.toml`` as written, read without the hook."""
    with open(REPO_ROOT / "discussions.toml", "rb") as handle:
        return {key: entry["text"] for key, entry in tomllib.load(handle).items()}


def _discussion_head(exercise: str) -> str:
    """The first words of the exercise's discussion, as a reader sees them."""
    return _text(markdown.markdown(_discussions()[exercise]))[:80]


# --- the hook ----------------------------------------------------------------------------------


def test_a_passed_exercise_opens_its_solution_and_discussion_and_no_other(tmp_path):
    grade = _grade(tmp_path / "grade.json", {"4.3": "passed", "4.4": "failed"})
    opened = mkdocs_hooks.opened_exercises({}, grade)
    assert opened == {"4.3"}
    lab = registry.lab("04")
    sections = _sections(
        mkdocs_hooks.exercise_sections(lab, opened, mkdocs_hooks.read_discussions())
    )
    assert list(sections) == [e.id for e in lab.exercises]
    assert _shows_solution(sections["4.3"], "4.3")
    assert _discussion_head("4.3") in _text(sections["4.3"])
    for exercise in lab.exercises:
        if exercise.id == "4.3":
            continue
        section = sections[exercise.id]
        assert not _holds_any_of_the_solution(section, exercise.id), exercise.id
        assert _discussion_head(exercise.id) not in _text(section), exercise.id
        assert '<details class="success"' not in section, exercise.id
        assert '<details class="note"' not in section, exercise.id
        sentence = (
            f"Pass exercise {exercise.id} (nox -s check -- 04) and build the site again "
            "(nox -s serve does it on its own) to see its solution and a discussion of it."
        )
        assert sentence in _text(section), exercise.id
    # The hints are there for every exercise, collapsed, as before.
    assert sum(s.count('<details class="tip">') for s in sections.values()) == sum(
        len(e.hints) for e in lab.exercises
    )


def test_the_solutions_have_lines_of_their_own_to_look_for():
    for exercise in registry.lab("04").exercises:
        assert _solution_lines(exercise.id), exercise.id
    every = [e.id for lab in registry.labs() for e in lab.exercises]
    assert sum(bool(_solution_lines(e)) for e in every) >= 0.9 * len(every)


def test_the_instructors_build_opens_every_solution_and_discussion(tmp_path):
    switch = {"STREAMLAB_SITE_SOLUTIONS": "all"}
    assert mkdocs_hooks.opened_exercises(switch, tmp_path / "no-grade.json") is None
    discussions = mkdocs_hooks.read_discussions()
    for lab in registry.labs():
        sections = _sections(mkdocs_hooks.exercise_sections(lab, None, discussions))
        for exercise in lab.exercises:
            section = sections[exercise.id]
            assert _shows_solution(section, exercise.id), exercise.id
            assert "Pass exercise" not in _text(section), exercise.id
            if exercise.id in discussions:
                assert '<details class="note">' in section
                assert _discussion_head(exercise.id) in _text(section), exercise.id


@pytest.mark.parametrize(
    "content",
    [
        None,  # no grade.json
        "{not json",
        '["a list"]',
        json.dumps({"status": "in-progress", "notebooks": "labs", "labs": []}),
        json.dumps({"status": "graded", "labs": "not a list"}),
        json.dumps({"status": "graded", "labs": [{"exercises": [{"status": "passed"}]}, 3]}),
    ],
    ids=["missing", "unreadable", "not-a-grade", "in-progress", "odd-labs", "odd-rows"],
)
def test_without_a_readable_grade_nothing_is_open(tmp_path, content):
    grade = tmp_path / "grade.json"
    if content is not None:
        grade.write_text(content, encoding="utf-8")
    opened = mkdocs_hooks.opened_exercises({}, grade)
    assert opened == frozenset()
    discussions = mkdocs_hooks.read_discussions()
    for lab in registry.labs():
        sections = _sections(mkdocs_hooks.exercise_sections(lab, opened, discussions))
        for exercise in lab.exercises:
            assert not _holds_any_of_the_solution(sections[exercise.id], exercise.id)
            assert f"Pass exercise {exercise.id}" in _text(sections[exercise.id])
            assert '<details class="success"' not in sections[exercise.id]


def test_a_pass_of_an_earlier_run_counts_and_a_grade_of_the_solutions_does_not(tmp_path):
    earlier = {
        "id": "05",
        "exercises": [{"id": "5.2", "status": "passed"}, {"id": "5.3", "status": "failed"}],
        "earlier_exercises": [{"id": "5.4", "status": "passed", "fingerprint": "old"}],
    }
    grade = _grade(tmp_path / "grade.json", {"4.1": "passed"}, earlier_labs=[earlier])
    assert mkdocs_hooks.opened_exercises({}, grade) == {"4.1", "5.2", "5.4"}
    graded = json.loads(grade.read_text())
    for notebooks in ("solutions", str(REPO_ROOT / "solutions")):
        grade.write_text(json.dumps({**graded, "notebooks": notebooks}))
        assert mkdocs_hooks.opened_exercises({}, grade) == frozenset(), notebooks
    for switch in ("", "passed"):
        grade.write_text(json.dumps(graded))
        opened = mkdocs_hooks.opened_exercises({mkdocs_hooks.SOLUTIONS_SWITCH: switch}, grade)
        assert opened == {"4.1", "5.2", "5.4"}


def test_an_unknown_switch_is_refused_with_a_sentence(tmp_path):
    with pytest.raises(PluginError, match="use `all`"):
        mkdocs_hooks.opened_exercises({mkdocs_hooks.SOLUTIONS_SWITCH: "yes"}, tmp_path / "g")


def test_nox_s_serve_builds_again_when_a_grade_is_written():
    watched = []

    class Server:
        def watch(self, path, recursive=True):
            watched.append((Path(path), recursive))

    mkdocs_hooks.on_serve(Server(), config=None, builder=None)
    assert (mkdocs_hooks.GRADE_FILE.parent, False) in watched
    assert (mkdocs_hooks.DISCUSSIONS_FILE.parent, False) in watched


# --- discussions.toml --------------------------------------------------------------------------


def test_every_discussion_is_of_an_exercise_and_the_discussed_labs_are_whole():
    discussions = _discussions()
    known = {e.id for lab in registry.labs() for e in lab.exercises}
    assert set(discussions) <= known, sorted(set(discussions) - known)
    for lab_id in DISCUSSED_LABS:
        missing = [e.id for e in registry.lab(lab_id).exercises if e.id not in discussions]
        assert not missing, f"lab {lab_id} has no discussion of {missing}"
    for exercise, text in discussions.items():
        sentences = re.findall(r"[.!?](?:\s|$)", text)
        assert 3 <= len(sentences) <= 8 and len(text) <= 1_300, (exercise, len(sentences))


def test_a_malformed_discussion_is_named(tmp_path):
    path = tmp_path / "discussions.toml"
    path.write_text('["4.3"]\nbody = "no text"\n')
    with pytest.raises(PluginError, match="'4.3'"):
        mkdocs_hooks.read_discussions(path)
    assert mkdocs_hooks.read_discussions(tmp_path / "none.toml") == {}


# --- the learner's site, built and read in Chromium ---------------------------------------------


@pytest.fixture(scope="module")
def learner_site(tmp_path_factory) -> Path:
    """The site as a learner builds it, with a grade in which only exercise 4.3 passed."""
    build = tmp_path_factory.mktemp("build")
    _grade(build / "grade.json", {"4.3": "passed", "4.4": "failed"})
    with pytest.MonkeyPatch.context() as env:
        env.setenv("STREAMLAB_BUILD_DIR", str(build))
        env.delenv("STREAMLAB_SITE_SOLUTIONS", raising=False)
        return build_site(tmp_path_factory.mktemp("site"))


def test_the_built_site_holds_no_solution_or_discussion_that_is_locked(learner_site):
    pages = {p: _text(p.read_text()) for p in learner_site.rglob("*.html")}
    index = json.loads((learner_site / "search" / "search_index.json").read_text())
    searched = {doc["location"]: _text(doc.get("text", "")) for doc in index["docs"]}
    discussions = _discussions()
    everywhere = [*pages.values(), *searched.values()]
    for lab in registry.labs():
        # A solution's lines on its lab's page, in the page or its search entries.
        own = [pages[learner_site / "labs" / lab.name / "index.html"]]
        own += [text for where, text in searched.items() if where.startswith(f"labs/{lab.name}/")]
        for exercise in lab.exercises:
            if exercise.id == "4.3":
                continue
            # Lines that 4.3's solution shares (4.3 builds on 4.2) are 4.3's to show.
            opened = " ".join(_solution_lines("4.3", shortest=1))
            hidden = [line for line in _solution_lines(exercise.id) if line not in opened]
            leaked = [line for line in hidden if any(line in text for text in own)]
            assert not leaked, (exercise.id, leaked[:2])
            if exercise.id in discussions:
                head = _discussion_head(exercise.id)
                assert not any(head in text for text in everywhere), exercise.id
    lab04 = pages[learner_site / "labs" / registry.lab("04").name / "index.html"]
    assert all(line in lab04 for line in _solution_lines("4.3"))
    assert _discussion_head("4.3") in lab04


def test_a_learner_sees_a_locked_exercise_and_opens_a_passed_one(browser, learner_site):
    lab = registry.lab("04")
    with serving(learner_site) as url:
        page = browser.new_page()
        page.goto(f"{url}/labs/{lab.name}/")
        locked = page.locator(".admonition.locked", has_text="Pass exercise 4.4")
        assert locked.count() == 1 and locked.is_visible()
        assert "nox -s check -- 04" in locked.inner_text()
        article = page.locator("article").inner_text()
        assert not any(line in _flat(article) for line in _solution_lines("4.4"))
        assert page.locator(".admonition.locked").count() == len(lab.exercises) - 1

        solution = page.locator("details.success")
        assert solution.count() == 1 and not solution.evaluate("el => el.open")
        assert not solution.locator("code").first.is_visible()
        solution.locator("summary").click()
        assert solution.evaluate("el => el.open")
        code = _flat(solution.locator("code").first.inner_text())
        assert all(line in code for line in _solution_lines("4.3"))

        discussion = page.locator("details.note", has_text="Discussion")
        assert discussion.count() == 1
        discussion.locator("summary").click()
        assert discussion.evaluate("el => el.open")
        assert _discussion_head("4.3") in _flat(discussion.inner_text())
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        solution.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "site-solution-opened-by-passing.png"), full_page=True)
        page.close()
