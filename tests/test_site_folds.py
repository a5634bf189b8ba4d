"""Folds on the site: ``<!-- after N.M -->`` ... ``<!-- /after -->`` keeps text that tells
exercise N.M's answer off every page until the grade says N.M passed or was revealed, and the
instructor's build shows it all."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from types import SimpleNamespace

import markdown
import pytest
from jupyter_support import build_site
from mkdocs.exceptions import PluginError

from streamlab.paths import REPO_ROOT
from streamlab.tooling import mkdocs_hooks

SITE = REPO_ROOT / "site"
_FOLD = re.compile(r"^<!-- after (\S+) -->\n(.*?)^<!-- /after -->$", re.MULTILINE | re.DOTALL)
PAGE = """# A page

Before the fold.

<!-- after 2.4 -->
The batch after the one that closed the window drops the heartbeat.
<!-- /after -->

After the fold.
"""


def _grade(path: Path, statuses: dict[str, str]) -> Path:
    """A ``grade.json`` in the grader's format, with each exercise's status as given."""
    rows = [{"id": exercise, "status": status} for exercise, status in statuses.items()]
    graded = {
        "format_version": 2,
        "status": "graded",
        "notebooks": "labs",
        "labs": [{"id": "02", "status": "graded", "exercises": rows}],
        "earlier_labs": [],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(graded), encoding="utf-8")
    return path


def _text(fragment: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


def _site_folds() -> list[tuple[Path, str, str]]:
    """Every fold of the site's pages: the page, its exercise and what it wraps."""
    return [
        (page, match.group(1), match.group(2))
        for page in sorted(SITE.rglob("*.md"))
        for match in _FOLD.finditer(mkdocs_hooks.FENCE.sub("", page.read_text(encoding="utf-8")))
    ]


def _rendered(text: str) -> str:
    return _text(markdown.markdown(text, extensions=["tables", "attr_list"]))


def _sample(page: Path, folded: str) -> str:
    """Eight words of the fold's text, as a reader finds them, that the page says nowhere else."""
    elsewhere = _rendered(_FOLD.sub("", page.read_text(encoding="utf-8")))
    words = _rendered(folded).split()
    for start in range(max(len(words) - 7, 1)):
        sample = " ".join(words[start : start + 8])
        if sample not in elsewhere:
            return sample
    raise AssertionError(f"{page.name}: a fold that says nothing the page does not say anyway")


def _built_page(site: Path, source: Path) -> str:
    relative = source.relative_to(SITE).with_suffix("")
    page = site / "index.html" if relative.name == "index" else site / relative / "index.html"
    return _text(page.read_text(encoding="utf-8"))


# --- the hook --------------------------------------------------------------------------------


def test_a_fold_is_one_line_until_its_exercise_passes_or_is_revealed(tmp_path):
    closed = mkdocs_hooks.unfold(PAGE, frozenset({"2.3"}))
    assert "drops the heartbeat" not in closed
    assert mkdocs_hooks.folded_sentence("2.4") in closed
    assert [line for line in closed.splitlines() if "2.4" in line] == [
        mkdocs_hooks.folded_sentence("2.4")
    ]
    assert "Before the fold." in closed and "After the fold." in closed
    assert "nox -s check -- 02" in mkdocs_hooks.folded_sentence("2.4")

    for status in ("passed", "revealed"):
        opened = mkdocs_hooks.opened_exercises({}, _grade(tmp_path / status, {"2.4": status}))
        text = mkdocs_hooks.unfold(PAGE, opened)
        assert "The batch after the one that closed the window drops the heartbeat." in text
        assert "<!--" not in text and "This part opens" not in text, status
    failed = mkdocs_hooks.opened_exercises({}, _grade(tmp_path / "failed", {"2.4": "failed"}))
    assert "drops the heartbeat" not in mkdocs_hooks.unfold(PAGE, failed)
    instructor = mkdocs_hooks.opened_exercises({"STREAMLAB_SITE_SOLUTIONS": "all"}, tmp_path / "g")
    assert "drops the heartbeat" in mkdocs_hooks.unfold(PAGE, instructor)


@pytest.mark.parametrize(
    "page, sentence",
    [
        (
            "text\n<!-- after 2.9 -->\nx\n<!-- /after -->\n",
            "site/x.md: the fold on line 2 opens with exercise 2.9, which course.toml does not "
            "have; name one, as in `<!-- after 2.4 -->`.",
        ),
        (
            "<!-- after 2.4 -->\nx\n",
            "site/x.md: the fold `<!-- after 2.4 -->` on line 1 is never closed: end it with "
            "`<!-- /after -->` on a line of its own.",
        ),
        ("x\n\n<!-- /after -->\n", "site/x.md: `<!-- /after -->` on line 3 closes no fold."),
        (
            "<!-- after 2.4 -->\n<!-- after 2.5 -->\nx\n<!-- /after -->\n",
            "site/x.md: the fold `<!-- after 2.4 -->` on line 1 is never closed: end it with "
            "`<!-- /after -->` on a line of its own.",
        ),
    ],
    ids=["unknown-exercise", "unclosed", "stray-close", "unclosed-outer"],
)
def test_a_fold_that_cannot_be_read_stops_the_build_with_a_sentence(page, sentence):
    with pytest.raises(PluginError) as raised:
        mkdocs_hooks.unfold(page, None, "site/x.md")
    assert str(raised.value) == sentence
    fake = SimpleNamespace(file=SimpleNamespace(src_uri="x.md"))
    with pytest.raises(PluginError, match=re.escape(sentence[:30])):
        mkdocs_hooks.on_page_markdown(page, fake, config=None, files=None)


def test_a_fold_inside_another_opens_only_with_both():
    page = (
        "<!-- after 2.4 -->\nouter\n<!-- after 2.6 -->\ninner\n<!-- /after -->\n<!-- /after -->\n"
    )
    assert mkdocs_hooks.unfold(page, {"2.4", "2.6"}).split() == ["outer", "inner"]
    closed_inner = mkdocs_hooks.unfold(page, {"2.4"})
    assert "outer" in closed_inner and "inner" not in closed_inner
    assert mkdocs_hooks.folded_sentence("2.6") in closed_inner
    closed_outer = mkdocs_hooks.unfold(page, {"2.6"})
    assert closed_outer.strip() == mkdocs_hooks.folded_sentence("2.4")


def test_a_fold_in_a_code_example_is_shown_as_written():
    page = "How to fold:\n\n```markdown\n<!-- after 2.4 -->\nthe answer\n<!-- /after -->\n```\n"
    assert mkdocs_hooks.unfold(page, frozenset()) == page


# --- the site, built -------------------------------------------------------------------------


def _build(tmp_path_factory, statuses: dict[str, str], switch: str = "") -> Path:
    build = tmp_path_factory.mktemp("build")
    _grade(build / "grade.json", statuses)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("STREAMLAB_BUILD_DIR", str(build))
        env.setenv("STREAMLAB_SITE_SOLUTIONS", switch)
        return build_site(tmp_path_factory.mktemp("site"))


def test_the_built_site_opens_each_fold_with_its_exercise_and_no_sooner(tmp_path_factory):
    folds = _site_folds()
    assert folds, "no page of the site folds anything away"
    exercises = {exercise for _, exercise, _ in folds}
    closed = _build(tmp_path_factory, {exercise: "failed" for exercise in exercises})
    opened = _build(tmp_path_factory, {exercise: "passed" for exercise in exercises})
    instructor = _build(tmp_path_factory, {}, switch="all")
    index = json.loads((closed / "search" / "search_index.json").read_text(encoding="utf-8"))
    for page, exercise, folded in folds:
        sample = _sample(page, folded)
        where = f"{page.name}, the fold after {exercise}: {sample!r}"
        assert sample in _built_page(opened, page), where
        assert sample in _built_page(instructor, page), where
        assert sample not in _built_page(closed, page), where
        location = page.relative_to(SITE).with_suffix("").as_posix() + "/"
        searched = [d.get("text", "") for d in index["docs"] if d["location"].startswith(location)]
        assert searched, where
        assert sample not in _text(" ".join(searched)), where
        assert _text(markdown.markdown(mkdocs_hooks.folded_sentence(exercise))) in _built_page(
            closed, page
        ), where
