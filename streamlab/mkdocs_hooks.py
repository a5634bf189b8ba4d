"""mkdocs hooks: the site's navigation and each lab's exercises come from the course itself.

- The navigation lists the labs in ``course.toml`` order, so a new lab appears without
  editing ``mkdocs.yml``.
- On the home page, the line ``<!-- labs -->`` becomes a table of the labs.
- On a lab page, the line ``<!-- exercises -->`` becomes one section per exercise: the task
  as the solution notebook states it, each tier of its hints from ``course.toml`` and the
  solution code from the notebook, all collapsed. Nothing is pasted, so the page cannot
  drift from the lab.
- ``<!-- benchmarks -->`` becomes every published benchmark result (``site/benchmarks/``,
  written by ``nox -s bench``) as a table of targets and its charts; ``<!-- benchmark NAME -->``
  becomes one of them.
- Short inline code (a command, a name) is marked so that it never breaks across lines
  (``nox -s check -- 04`` would otherwise break at a hyphen); long inline code still wraps.
"""

from __future__ import annotations

import posixpath
import re
import textwrap

import nbformat

from streamlab import benchmarks, registry
from streamlab.notebooks import exercise_id, without_markers
from streamlab.paths import REPO_ROOT

MARKER = "<!-- exercises -->"
LABS_MARKER = "<!-- labs -->"
BENCHMARKS_MARKER = re.compile(r"<!-- benchmarks? ?([a-z_]*) -->")
#: Inline code up to this many characters is kept on one line (styled in course.css).
WHOLE_CODE_CHARS = 40
_PLAIN_CODE = re.compile(rf"<code>([^<]{{1,{WHOLE_CODE_CHARS}}})</code>")

_PAGES = [
    ("Home", "index.md"),
    ("Setup", "setup.md"),
    ("Grading yourself", "grading.md"),
]
_AFTER_LABS = [
    ("Architecture", "architecture.md"),
    ("Run it for real", "run-it-for-real.md"),
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
    return config


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


def exercise_sections(lab: registry.Lab) -> str:
    """Markdown for every exercise of ``lab``: task, collapsed hints, collapsed solution."""
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
    parts = []
    for exercise in lab.exercises:
        task = _task_text(tasks.get(exercise.id, ""), exercise)
        solution = "\n\n".join(code.get(exercise.id, []))
        parts.append(
            "\n\n".join(
                [
                    task,
                    *_hint_admonitions(exercise),
                    f'??? success "Solution"\n\n{_indent(f"```python{chr(10)}{solution}{chr(10)}```")}',
                ]
            )
        )
    return "\n\n".join(parts)


def _hint_admonitions(exercise: registry.Exercise) -> list[str]:
    """One collapsed admonition per hint tier, in order; backticks in a hint become code."""
    return [
        f'??? tip "Hint {tier}"\n\n{_indent(hint)}' for tier, hint in enumerate(exercise.hints, 1)
    ]


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
    markdown = markdown.replace(LABS_MARKER, lab_table())
    markdown = BENCHMARKS_MARKER.sub(
        lambda match: benchmark_sections(match.group(1), page.file.src_uri), markdown
    )
    if MARKER not in markdown:
        return markdown
    for lab in registry.labs():
        if page.file.src_uri == lab.site_page:
            return markdown.replace(MARKER, exercise_sections(lab))
    return markdown


def keep_short_code_whole(html: str) -> str:
    """Mark inline ``<code>`` of at most :data:`WHOLE_CODE_CHARS` characters as unbreakable."""
    return _PLAIN_CODE.sub(r'<code class="whole">\1</code>', html)


def on_page_content(html: str, page, config, files, **kwargs) -> str:
    return keep_short_code_whole(html)
