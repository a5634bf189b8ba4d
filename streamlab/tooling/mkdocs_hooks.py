"""mkdocs hooks: the site's navigation and each lab's exercises come from the course itself.

- The navigation lists the labs in ``course.toml`` order, so a new lab appears without
  editing ``mkdocs.yml``.
- On the home page, the line ``<!-- labs -->`` becomes a table of the labs.
- On a lab page, the line ``<!-- exercises -->`` becomes one section per exercise: the task
  as the solution notebook states it, each tier of its hints from ``course.toml`` (collapsed),
  then its solution code from the notebook and its discussion from ``discussions.toml``
  (collapsed), once ``build/grade.json`` says the exercise passed or was revealed. Before
  that, the page holds neither, only the sentence saying how to open them: the learner commits
  to an answer before reading one. ``STREAMLAB_SITE_SOLUTIONS=all`` builds the instructor's site, every solution
  and discussion in it. Nothing is pasted, so the page cannot drift from the lab.
- On any page, ``<!-- after N.M -->`` ... ``<!-- /after -->`` folds away text that tells
  exercise N.M's answer (a trace of its story, the fact that settles it): the page holds one
  line saying it opens when N.M passes, until the grade says N.M passed (or was revealed), as
  the solutions do. An unknown exercise or a fold left open stops the build with a sentence.
- ``<!-- benchmarks -->`` becomes every published benchmark result (``site/benchmarks/``,
  written by ``nox -s bench``) as a table of targets and its charts; ``<!-- benchmark NAME -->``
  becomes one of them.
- Short inline code (a command, a name) is marked so that it never breaks across lines
  (``nox -s check -- 04`` would otherwise break at a hyphen); long inline code still wraps.
"""

from __future__ import annotations

import logging
import os
import posixpath
import re
import textwrap
import tomllib
from collections.abc import Collection, Mapping
from pathlib import Path

import nbformat
from mkdocs.exceptions import PluginError

from streamlab import benchmarks
from streamlab.course import registry
from streamlab.course.notebooks import exercise_id, without_markers
from streamlab.grading.grade_file import GradeFileInvalid
from streamlab.grading.grade_file import read as read_grade
from streamlab.paths import BUILD_DIR, REPO_ROOT

MARKER = "<!-- exercises -->"
#: A fold: what it wraps opens with exercise N.M's solution. Folds wrap whole blocks
#: (paragraphs, lists, tables, diagrams), each marker on a line of its own.
FOLD = re.compile(r"^<!-- (after (?P<id>\S+)|/after) -->[ \t]*$", re.MULTILINE)
#: A fenced code block: a fold marker inside one is an example, shown as written.
FENCE = re.compile(r"^(`{3,}|~{3,}).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
LABS_MARKER = "<!-- labs -->"
BENCHMARKS_MARKER = re.compile(r"<!-- benchmarks? ?([a-z_]*) -->")
#: Inline code up to this many characters is kept on one line (styled in course.css).
WHOLE_CODE_CHARS = 40
_PLAIN_CODE = re.compile(rf"<code>([^<]{{1,{WHOLE_CODE_CHARS}}})</code>")

#: ``STREAMLAB_SITE_SOLUTIONS=all`` opens every solution and discussion (the instructor's
#: build); unset (or ``passed``), only those of the exercises ``build/grade.json`` says passed.
SOLUTIONS_SWITCH = "STREAMLAB_SITE_SOLUTIONS"
#: The grade that opens solutions: the one ``nox -s check`` writes.
GRADE_FILE = BUILD_DIR / "grade.json"
#: The statuses of a graded exercise that open its solution, discussion and folds: a
#: revealed exercise is not passed, but its answer is no longer to be found.
OPENING = ("passed", "revealed")
#: A short discussion of each exercise's solution: ``["4.3"] text = """..."""``.
DISCUSSIONS_FILE = REPO_ROOT / "discussions.toml"

log = logging.getLogger("mkdocs.hooks.streamlab")
#: What this build opens (set by ``on_config``): the exercises (None: every one) and the
#: discussions.
_build: dict = {"opened": frozenset(), "discussions": {}}

_PAGES = [
    ("Home", "index.md"),
    ("Setup", "setup.md"),
    ("Grading yourself", "grading.md"),
]
_AFTER_LABS = [
    ("Architecture", "architecture.md"),
    ("Run it for real", "run-it-for-real.md"),
    ("Spark's errors, explained", "spark-errors.md"),
    ("Benchmarks", "benchmarks.md"),
    ("For instructors", "authoring.md"),
]


def navigation() -> list:
    """The nav tree: the fixed pages around one entry per lab."""
    labs = [{f"{lab.id} · {lab.title}": lab.site_page} for lab in registry.labs()]
    return (
        [{title: page} for title, page in _PAGES]
        + [{"Labs": labs}]
        + [{title: page} for title, page in _AFTER_LABS]
    )


def on_config(config, **kwargs):
    config["nav"] = navigation()
    _build["opened"] = opened_exercises()
    _build["discussions"] = read_discussions()
    known = {e.id for lab in registry.labs() for e in lab.exercises}
    for unknown in sorted(set(_build["discussions"]) - known):
        log.warning(
            f"{DISCUSSIONS_FILE.name} discusses exercise {unknown}, which course.toml has not"
        )
    return config


def on_serve(server, config, builder, **kwargs):
    """``nox -s serve`` builds again when a grade is written (or the discussions change)."""
    GRADE_FILE.parent.mkdir(parents=True, exist_ok=True)
    server.watch(str(GRADE_FILE.parent), recursive=False)
    server.watch(str(DISCUSSIONS_FILE.parent), recursive=False)
    return server


def _indent(text: str) -> str:
    return textwrap.indent(text, "    ")


def _task_text(markdown: str, exercise: registry.Exercise) -> str:
    """The exercise's own part of the markdown cell before it: from its heading on.

    A cell may open a notebook section ("## 4. Stop, restart, replay") before the exercise;
    that heading belongs to the notebook, not to the page's list of exercises.
    """
    lines = markdown.strip().splitlines()
    own = re.compile(rf"#+ .*Exercise {re.escape(exercise.id)}\b")
    for number, line in enumerate(lines):
        if own.match(line):
            return "\n".join(lines[number:]).strip()
    text = "\n".join(line for line in lines if not re.match(r"#{1,6} ", line)).strip()
    return f"### Exercise {exercise.id} · {exercise.title}\n\n{text}".strip()


def exercise_sections(
    lab: registry.Lab,
    opened: Collection[str] | None = None,
    discussions: Mapping[str, str] | None = None,
) -> str:
    """Markdown for every exercise of ``lab``: task, collapsed hints, then the solution.

    The solution code and its discussion (from ``discussions``) are there, collapsed, for the
    exercises in ``opened``; any other exercise has only a sentence saying how to open them.
    ``opened`` None opens every exercise, as the instructor's build does.
    """
    notebook = nbformat.read(lab.notebook(REPO_ROOT / "solutions"), as_version=4)
    tasks: dict[str, str] = {}
    code: dict[str, list[str]] = {}
    previous_markdown = ""
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            previous_markdown = cell.source
            continue
        exercise = exercise_id(cell)
        if exercise:
            tasks.setdefault(exercise, previous_markdown)
            code.setdefault(exercise, []).append(without_markers(cell.source))
        previous_markdown = ""
    discussions = discussions or {}
    parts = []
    for exercise in lab.exercises:
        task = _task_text(tasks.get(exercise.id, ""), exercise)
        discussion = discussions.get(exercise.id, "")
        if opened is None or exercise.id in opened:
            solution = "\n\n".join(code.get(exercise.id, []))
            after = [_solution_admonition(solution)]
            if discussion:
                after.append(f'??? note "Discussion"\n\n{_indent(discussion)}')
        else:
            after = [_locked_admonition(lab, exercise, bool(discussion))]
        parts.append("\n\n".join([task, *_hint_admonitions(exercise), *after]))
    return "\n\n".join(parts)


def _solution_admonition(solution: str) -> str:
    fenced = f"```python\n{solution}\n```"
    return f'??? success "Solution"\n\n{_indent(fenced)}'


def locked_sentence(lab: registry.Lab, exercise: registry.Exercise, discussed: bool) -> str:
    """What a learner reads in place of a solution they have not opened yet."""
    what = "its solution and a discussion of it" if discussed else "its solution"
    return (
        f"Pass exercise {exercise.id} (`nox -s check -- {lab.id}`) and build the site again "
        f"(`nox -s serve` does it on its own) to see {what}."
    )


def _locked_admonition(lab: registry.Lab, exercise: registry.Exercise, discussed: bool) -> str:
    title = "Solution and discussion" if discussed else "Solution"
    return f'!!! info locked "{title}"\n\n{_indent(locked_sentence(lab, exercise, discussed))}'


def _hint_admonitions(exercise: registry.Exercise) -> list[str]:
    """One collapsed admonition per hint tier, in order; backticks in a hint become code."""
    return [
        f'??? tip "Hint {tier}"\n\n{_indent(hint)}' for tier, hint in enumerate(exercise.hints, 1)
    ]


def read_discussions(path: Path = DISCUSSIONS_FILE) -> dict[str, str]:
    """Each exercise's discussion by id, from ``discussions.toml`` (none when it is missing)."""
    if not path.exists():
        return {}
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except tomllib.TOMLDecodeError as error:
        raise PluginError(f"{path.name} is not valid TOML: {error}") from None
    found = {}
    for key, entry in data.items():
        text = entry.get("text") if isinstance(entry, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise PluginError(
                f"{path.name}: entry {key!r} should be a table with a text, "
                f'["{key}"] text = """..."""'
            )
        found[key] = textwrap.dedent(text).strip()
    return found


def passed_exercises(grade_file: Path = GRADE_FILE) -> frozenset[str]:
    """The exercises ``grade_file`` says passed or revealed (``nox -s reveal``): their
    solutions, discussions and folds open; none when the file is missing, and none, said in a
    warning, when it is not a grade.

    Every lab of the grade counts, those an earlier run graded (``earlier_labs``) and an
    exercise graded on cells the notebook has changed since (``earlier_exercises``): it passed
    once. A grade of the course's own ``solutions/`` opens nothing.
    """
    try:
        grade = read_grade(grade_file)
    except GradeFileInvalid as refused:
        log.warning(f"{refused}: no exercise's solution opens; grade again (nox -s check).")
        return frozenset()
    if grade is None or grade.status != "graded":
        return frozenset()
    graded = grade.as_json()
    if _is_course_solutions(graded.get("notebooks")):
        return frozenset()
    passed = set()
    for lab in _entries(graded.get("labs")) + _entries(graded.get("earlier_labs")):
        for row in _entries(lab.get("exercises")) + _entries(lab.get("earlier_exercises")):
            if row.get("status") in OPENING and isinstance(row.get("id"), str):
                passed.add(row["id"])
    return frozenset(passed)


def _entries(value: object) -> list[dict]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _is_course_solutions(notebooks: object) -> bool:
    if not isinstance(notebooks, str) or not notebooks:
        return False
    folder = Path(notebooks)
    folder = folder if folder.is_absolute() else REPO_ROOT / folder
    try:
        return folder.resolve() == (REPO_ROOT / "solutions").resolve()
    except (OSError, ValueError):  # not a path this system can resolve
        return False


def opened_exercises(
    environ: Mapping[str, str] = os.environ, grade_file: Path = GRADE_FILE
) -> frozenset[str] | None:
    """The exercises whose solution the site shows: None for every one, by the switch."""
    switch = environ.get(SOLUTIONS_SWITCH, "").strip().lower()
    if switch == "all":
        return None
    if switch not in ("", "passed"):
        raise PluginError(
            f"{SOLUTIONS_SWITCH}={environ[SOLUTIONS_SWITCH]!r}: use `all` (the instructor's "
            "build, every solution) or leave it unset (the solutions of the exercises passed)"
        )
    return passed_exercises(grade_file)


def folded_sentence(exercise: str) -> str:
    """The one line a closed fold leaves on its page."""
    lab = next(lab.id for lab in registry.labs() if any(e.id == exercise for e in lab.exercises))
    return (
        f"*This part opens once exercise {exercise} passes or is revealed (`nox -s check -- "
        f"{lab}`, `nox -s reveal -- {exercise}`; then build the site again, which `nox -s serve` "
        "does on its own): it tells that exercise's answer.*"
    )


def unfold(markdown: str, opened: Collection[str] | None, page: str = "the page") -> str:
    """``markdown`` with each ``<!-- after N.M -->`` fold open or closed.

    A fold of an exercise in ``opened`` (or any fold, when ``opened`` is None: the
    instructor's build) keeps its text without the markers; any other becomes
    :func:`folded_sentence`. A fold inside another opens only when both do. A fold that names
    no exercise of the course, one left open and a stray ``<!-- /after -->`` each stop the
    build with a sentence. Markers inside a fenced code block are an example, left as written.
    """
    known = {e.id for lab in registry.labs() for e in lab.exercises}
    fenced = [fence.span() for fence in FENCE.finditer(markdown)]
    levels: list[list[str]] = [[]]  # the text of each fold being read, the page's first
    folds: list[tuple[str, int]] = []  # the folds being read: exercise and line
    position = 0
    for match in FOLD.finditer(markdown):
        if any(start <= match.start() < end for start, end in fenced):
            continue
        line = markdown.count("\n", 0, match.start()) + 1
        levels[-1].append(markdown[position : match.start()])
        position = match.end()
        exercise = match.group("id")
        if exercise is not None:
            if exercise not in known:
                raise PluginError(
                    f"{page}: the fold on line {line} opens with exercise {exercise}, which "
                    "course.toml does not have; name one, as in `<!-- after 2.4 -->`."
                )
            folds.append((exercise, line))
            levels.append([])
            continue
        if not folds:
            raise PluginError(f"{page}: `<!-- /after -->` on line {line} closes no fold.")
        exercise, _ = folds.pop()
        text = "".join(levels.pop()).strip("\n")
        shown = opened is None or exercise in opened
        levels[-1].append(f"\n{text if shown else folded_sentence(exercise)}\n")
    if folds:
        exercise, line = folds[-1]
        raise PluginError(
            f"{page}: the fold `<!-- after {exercise} -->` on line {line} is never closed: end "
            "it with `<!-- /after -->` on a line of its own."
        )
    return "".join(levels[0]) + markdown[position:]


def lab_table() -> str:
    """A table of every lab with its summary, linked to its page."""
    rows = [
        f"| [{lab.id} · {lab.title}]({lab.site_page}) | {lab.summary} |" for lab in registry.labs()
    ]
    return "\n".join(["| lab | you learn |", "|---|---|", *rows])


def benchmark_sections(name: str, page_uri: str, folder=None) -> str:
    """The published result ``name`` (every result when empty) as markdown for ``page_uri``."""
    folder = folder or benchmarks.PUBLISHED_DIR
    results = benchmarks.load(folder)
    chosen = [r for r in results if not name or r["name"] == name]
    if not chosen:
        wanted = f"the {name} benchmark" if name else "any benchmark"
        return (
            f'!!! note "Not measured yet"\n\n    No published results for {wanted}: '
            "run `nox -s bench` to measure them on your machine."
        )
    prefix = posixpath.relpath("benchmarks", posixpath.dirname(page_uri) or ".") + "/"
    return "\n\n".join(benchmarks.markdown_section(r, prefix) for r in chosen)


def on_page_markdown(markdown: str, page, config, files, **kwargs) -> str:
    markdown = unfold(markdown, _build["opened"], f"site/{page.file.src_uri}")
    markdown = markdown.replace(LABS_MARKER, lab_table())
    markdown = BENCHMARKS_MARKER.sub(
        lambda match: benchmark_sections(match.group(1), page.file.src_uri), markdown
    )
    if MARKER not in markdown:
        return markdown
    for lab in registry.labs():
        if page.file.src_uri == lab.site_page:
            sections = exercise_sections(lab, _build["opened"], _build["discussions"])
            return markdown.replace(MARKER, sections)
    return markdown


def keep_short_code_whole(html: str) -> str:
    """Mark inline ``<code>`` of at most :data:`WHOLE_CODE_CHARS` characters as unbreakable."""
    return _PLAIN_CODE.sub(r'<code class="whole">\1</code>', html)


def on_page_content(html: str, page, config, files, **kwargs) -> str:
    return keep_short_code_whole(html)
