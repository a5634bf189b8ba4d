"""The course website: built strictly, navigation and exercises from the course, seen in Chromium."""

from __future__ import annotations

from pathlib import Path

import pytest
from jupyter_support import build_site, serving

from streamlab.course import registry
from streamlab.paths import BUILD_DIR
from streamlab.tooling import mkdocs_hooks

ARTIFACTS = BUILD_DIR / "artifacts"


@pytest.fixture(scope="module")
def built_site(tmp_path_factory) -> Path:
    """The instructor's build: every solution and discussion, whatever ``build/grade.json`` says
    (the learner's build is in test_site_solutions.py)."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("STREAMLAB_SITE_SOLUTIONS", "all")
        return build_site(tmp_path_factory.mktemp("site"))


def test_every_lab_has_a_page_in_the_navigation(built_site):
    home = (built_site / "index.html").read_text()
    for lab in registry.labs():
        assert (built_site / "labs" / lab.name / "index.html").exists()
        assert f"{lab.id} · {lab.title}" in home


def test_lab_pages_carry_each_exercise_hint_solution_and_discussion(built_site):
    for lab in registry.labs():
        page = (built_site / "labs" / lab.name / "index.html").read_text()
        for exercise in lab.exercises:
            assert f"Exercise {exercise.id}" in page, (lab.id, exercise.id)
        assert page.count('<details class="tip"') == sum(len(e.hints) for e in lab.exercises)
        assert page.count('<details class="success"') == len(lab.exercises)
        discussed = [e for e in lab.exercises if e.id in mkdocs_hooks.read_discussions()]
        assert page.count('<details class="note"') == len(discussed), lab.id
        assert "Pass exercise" not in page
        assert "BEGIN SOLUTION" not in page and "NotImplementedError" not in page


def test_every_page_draws_its_diagrams_with_the_sites_own_mermaid(built_site):
    script = built_site / "javascripts" / "mermaid-11.17.2" / "mermaid.min.js"
    assert script.stat().st_size > 1_000_000
    pages = list(built_site.rglob("*.html"))
    with_diagrams = [p for p in pages if 'class="mermaid"' in p.read_text()]
    assert len(with_diagrams) >= 9
    for page in with_diagrams:
        assert "mermaid-11.17.2/mermaid.min.js" in page.read_text(), page
    for page in pages:  # nothing fetched from outside: no web fonts
        assert "fonts.googleapis.com" not in page.read_text(), page


def test_a_labs_exercises_hold_no_heading_of_the_notebook():
    for lab in registry.labs():
        headings = [
            line
            for line in mkdocs_hooks.exercise_sections(lab).splitlines()
            if line.startswith("#")
        ]
        assert [h.split(" · ")[0] for h in headings] == [
            f"### Exercise {e.id}" for e in lab.exercises
        ], (lab.id, headings)


def test_short_inline_code_is_kept_on_one_line_and_long_code_wraps():
    html = "<p>Type <code>nox -s check -- 04</code>, body <code>" + "x " * 30 + "</code></p>"
    marked = mkdocs_hooks.keep_short_code_whole(html)
    assert '<code class="whole">nox -s check -- 04</code>' in marked
    assert marked.count('class="whole"') == 1


@pytest.fixture(scope="module")
def served_site(built_site):
    with serving(built_site) as url:
        yield url


def test_a_reader_opens_a_solution_on_the_lab_page(browser, served_site):
    lab = registry.labs()[0]
    page = browser.new_page()
    page.goto(f"{served_site}/labs/{lab.name}/")
    solution = page.locator("details.success").first
    assert not solution.evaluate("el => el.open")
    solution.locator("summary").click()
    assert solution.evaluate("el => el.open")
    code = solution.locator("code").inner_text()
    assert "def " in code and "BEGIN SOLUTION" not in code
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"site-{lab.name}.png"), full_page=True)
    page.close()


def test_a_reader_follows_the_lab_table_from_the_home_page(browser, served_site):
    lab = registry.labs()[0]
    page = browser.new_page()
    page.goto(f"{served_site}/")
    page.locator("article table a", has_text=f"{lab.id} · {lab.title}").click()
    page.wait_for_url(f"**/labs/{lab.name}/")
    assert page.locator("h1").first.inner_text().startswith(f"Lab {lab.id}")
    page.close()
