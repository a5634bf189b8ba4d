"""Answers open by passing: the fact that settles an exercise is read only once it passed.

DESIGN.md, "Ask before telling; answers open by passing". ``tests/test_ask_before_telling.py``
looks for an answer's *values* before its ``%check`` cell; this guard also looks for its
**crux**: the few phrases that settle a prediction, or a debug exercise's cause and the design
of its fix. Each predict and debug exercise names its crux in ``discussions.toml``
(``crux = ["regex", ...]``, case-insensitive regexes written to catch a paraphrase), and no
crux and no telling of an answer value (rendered as ``test_ask_before_telling`` renders them)
may be read before the exercise passes:

- (a) in the lab's notebook, ``solutions/`` and ``labs/``, anywhere (a learner scrolls), but for
  the cells tagged ``answer-N.M``, which open under ``%check N.M``'s verdict on a pass, and the
  solution regions (in ``labs/``, a stub). A recorded output counts with its cell. In ``labs/``
  an answer cell in markdown is a one-line placeholder, read like any other cell; an answer
  cell of code keeps its code behind a line that stops it until N.M was graded once;
- (b) on every page under ``site/``, but for the text inside ``<!-- after N.M -->`` ...
  ``<!-- /after -->``, which the site opens once N.M passed. Folds may nest;
- (c) on ``site/spark-errors.md`` (folds as in (b)), and in what ``streamlab/spark_errors.py``
  adds to an error's message, which a notebook prints whenever Spark raises;
- (d) in hint tiers 1 to 3 of any exercise of the same lab (``course.toml``): a hint leads,
  it does not settle. 9.6's hints come after its diagnosis, 9.5, and are left out for it;
- (e) in the hints the lab's checks carry (``hint=`` in ``checks/``), shown with a failure,
  before the exercise passes: every string such an argument can be, its names followed to
  where they are bound (the check, a helper's callers, the module) and a helper to what it
  returns. As in (d), 9.6's checks' hints are left out for 9.5.

What opens with N.M (its answer cells, its folds) may also hold the crux of an exercise before
it (3.4's explanation retells 3.3's run), and of an exercise of a later lab (5.9 teaches the
pinned settings that 10.1 applies); never that of a later exercise of its own lab (5.2's
explanation may not settle 5.3).

A place is one test function, so each says on its own whether it holds. A finding names the
exercise, the place (file and cell, line or hint tier), what matched and the text it is in.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from test_ask_before_telling import (
    _DRAWN,
    ASKED,
    DEBUG,
    DIAGNOSED_BY,
    PREDICT,
    _drawn_units,
    _outputs,
    answer_tellings,
    lab_of,
    notebook,
    units,
)

from streamlab import spark_errors
from streamlab.course import registry
from streamlab.course.notebooks import split_regions, tags
from streamlab.paths import REPO_ROOT

#: Every exercise that asks before it tells: a prediction, or a debug exercise's cause and fix.
CRUCIAL = PREDICT + DEBUG
SITE = REPO_ROOT / "site"
ERRORS_PAGE = SITE / "spark-errors.md"
#: Hint tiers a learner reads before the answer; a later tier, if any, is the bottom-out one.
LEADING_TIERS = 3


def answer_tag(exercise: str) -> str:
    return f"answer-{exercise}"


#: Every exercise's place in the course, in the order a learner meets them.
ORDER = {e.id: n for n, e in enumerate(e for lab in registry.labs() for e in lab.exercises)}


def _lab_number(exercise: str) -> int:
    return int(exercise.split(".")[0])


def opens_for(opened_by: Iterable[str], exercise: str) -> bool:
    """True when text that opens once the exercises ``opened_by`` passed may hold
    ``exercise``'s crux: one of them is the exercise itself, comes after it (a later answer may
    restate an earlier one), or belongs to an earlier lab (what a lab taught, a later lab builds
    on). Within a lab, an earlier answer may not settle a later exercise."""
    return any(
        y == exercise or ORDER[y] > ORDER[exercise] or _lab_number(y) < _lab_number(exercise)
        for y in opened_by
    )


def answers_of(cell) -> list[str]:
    """The exercises whose pass opens ``cell``: its ``answer-N.M`` tags."""
    return [t.removeprefix("answer-") for t in tags(cell) if t.startswith("answer-")]


# -- what settles an exercise --------------------------------------------------------------------


@cache
def cruxes() -> dict[str, tuple[str, ...]]:
    with open(REPO_ROOT / "discussions.toml", "rb") as handle:
        discussions = tomllib.load(handle)
    return {k: tuple(v["crux"]) for k, v in discussions.items() if "crux" in v}


@dataclass(frozen=True)
class Settler:
    """A crux of an exercise, or a telling of its answer's values."""

    what: str
    match: Callable[[str], str | None]  # a unit -> the text in it that settles, or None


def _crux_settler(pattern: str) -> Settler:
    compiled = re.compile(pattern, re.I)

    def match(unit: str) -> str | None:
        found = compiled.search(unit)
        return found.group(0) if found else None

    return Settler(f"crux /{pattern[:60]}{'...' if len(pattern) > 60 else ''}/", match)


def _telling_settler(telling) -> Settler:
    return Settler(f"answer {telling.what}", lambda unit: unit if telling.found_in(unit) else None)


@cache
def settlers(exercise: str) -> tuple[Settler, ...]:
    found = [_crux_settler(p) for p in cruxes().get(exercise, ())]
    if exercise in ASKED:
        found += [_telling_settler(t) for t in answer_tellings(exercise)]
    return tuple(found)


def findings(exercise: str, where_units: Iterable[tuple[str, str]]) -> list[str]:
    said = settlers(exercise)
    found = []
    for where, unit in where_units:
        for settler in said:
            text = settler.match(unit)
            if text:
                shown = unit if len(unit) <= 200 else unit[:200] + "..."
                found.append(f"{exercise}, {where}: {settler.what} matches {text!r} in {shown!r}")
    return found


def report(exercise: str, place: str, found: list[str]) -> str:
    head = f"exercise {exercise}: {len(found)} finding(s) {place}, before it passes:\n"
    return head + "\n".join(found[:40]) + ("\n..." if len(found) > 40 else "")


# -- (a) the notebook ----------------------------------------------------------------------------


def _code_units(text: str) -> Iterator[str]:
    """A code cell read as a learner reads it: each line, and its comments joined as prose."""
    comments: list[str] = []
    for line in [*text.splitlines(), ""]:
        stripped = line.strip()
        if stripped.startswith("#"):
            comments.append(stripped.lstrip("#").strip())
            continue
        if comments:
            yield from units("\n".join(comments))
            comments = []
        if stripped:
            yield stripped


def notebook_units(exercise: str, root: str) -> Iterator[tuple[str, str]]:
    """(where, unit) for every cell of the exercise's notebook a learner reads before a pass."""
    lab = lab_of(exercise)
    path = lab.notebook(REPO_ROOT / root).relative_to(REPO_ROOT)
    for i, cell in enumerate(notebook(lab, root).cells):
        placeholder = root == "labs" and cell.cell_type == "markdown"
        if opens_for(answers_of(cell), exercise) and not placeholder:
            continue
        if cell.cell_type == "markdown":
            for unit in units(cell.source):
                yield f"{path} cell {i}", unit
        elif cell.cell_type == "code":
            for kind, lines in split_regions(cell.source):
                if kind == "code":
                    for unit in _code_units("\n".join(lines)):
                        yield f"{path} cell {i}", unit
            for line in _outputs(cell).splitlines():
                if line.strip():
                    yield f"{path} cell {i} output", line.strip()


# -- (b), (c) the site ---------------------------------------------------------------------------

_FOLD = re.compile(r"<!--\s*(?:after\s+(\d+\.\d+)|(/)after)\s*-->")


def folded(text: str) -> Iterator[tuple[int, tuple[str, ...], str]]:
    """``text`` as (first line, enclosing folds, paragraph), fold markers removed."""
    stack: list[str] = []
    at = 0
    pieces: list[tuple[int, tuple[str, ...], str]] = []
    for marker in [*_FOLD.finditer(text), None]:
        end = marker.start() if marker else len(text)
        pieces.append((text.count("\n", 0, at) + 1, tuple(stack), text[at:end]))
        if marker and marker.group(1):
            stack.append(marker.group(1))
        elif marker and stack:
            stack.pop()
        at = marker.end() if marker else end
    for line, folds, piece in pieces:
        offset = 0
        for block in re.split(r"(\n\s*\n)", piece):
            if block.strip() and not re.fullmatch(r"\n\s*\n", block):
                lead = len(block) - len(block.lstrip("\n"))
                yield line + piece.count("\n", 0, offset) + lead, folds, block
            offset += len(block)


def page_units(page: Path, exercise: str) -> Iterator[tuple[str, str]]:
    """(where, unit) for what a page shows before ``exercise`` passes."""
    where = str(page.relative_to(REPO_ROOT))
    for line, folds, block in folded(page.read_text()):
        if opens_for(folds, exercise):
            continue
        for drawing in _DRAWN.findall(block):
            for unit in _drawn_units(drawing):
                yield f"{where} l. {line} (the time view's still)", unit
        for unit in units(_DRAWN.sub("", block)):
            yield f"{where} l. {line}", unit


def site_pages() -> list[Path]:
    return sorted(p for p in SITE.rglob("*.md") if p != ERRORS_PAGE)


def error_messages() -> Iterator[tuple[str, str]]:
    for taught in spark_errors.TAUGHT:
        for unit in units(f"{taught.condition}: {taught.sentence()}"):
            yield f"streamlab/spark_errors.py ({taught.condition})", unit


# -- (d) the hints -------------------------------------------------------------------------------


def leading_hint_units(exercise: str) -> Iterator[tuple[str, str]]:
    for other in lab_of(exercise).exercises:
        if DIAGNOSED_BY.get(other.id) == exercise:
            continue
        for tier, hint in enumerate(other.hints[:LEADING_TIERS], 1):
            for unit in units(hint):
                yield f"course.toml, {other.id}'s hint {tier}", unit


# -- (e) the checks' hints ----------------------------------------------------------------------

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ListComp, ast.SetComp)
_SCOPES += (ast.DictComp, ast.GeneratorExp)


def _names_in(target: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


class HintReader:
    """The texts a check file's ``hint=`` arguments can be: as (line, text), every string the
    expression may evaluate to. A name is followed to what binds it in its scope (an
    assignment, a loop's iterable, a parameter's arguments at every call of its function) or
    at the module's top; a call of the module's function to what it returns; an f-string reads
    ``{}`` for what it fills in. It reads more than one failure shows, never less."""

    def __init__(self, source: str):
        self.tree = ast.parse(source)
        self.parent = {c: n for n in ast.walk(self.tree) for c in ast.iter_child_nodes(n)}
        self.functions = {
            n.name: n
            for n in self.tree.body
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        }

    def hints(self) -> Iterator[tuple[ast.Call, ast.expr]]:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call):
                yield from ((node, k.value) for k in node.keywords if k.arg == "hint")

    def exercise_of(self, call: ast.Call) -> str | None:
        """The exercise whose check shows the hint, when the file says it."""
        node: ast.AST = call
        while node in self.parent and not (
            isinstance(node, ast.Call) and getattr(node.func, "id", None) == "exercise"
        ):
            if node in self.functions.values():
                marks = [d for d in node.decorator_list if isinstance(d, ast.Call)]  # type: ignore[attr-defined]
                marks = [d for d in marks if getattr(d.func, "id", None) == "exercise"]
                return marks[0].args[0].value if marks else None  # type: ignore[attr-defined]
            node = self.parent[node]
        return node.args[0].value if isinstance(node, ast.Call) and node.args else None  # type: ignore[attr-defined]

    def texts(self, node: ast.AST, seen: frozenset = frozenset()) -> Iterator[tuple[int, str]]:
        """What ``node`` can be when it is a string: its parts that make the string, not what
        picks one (a condition, a key, a helper's other arguments)."""
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str) and node.value.strip():
                yield node.lineno, node.value
            return
        if isinstance(node, ast.JoinedStr):
            pieces = [v.value if isinstance(v, ast.Constant) else "{}" for v in node.values]
            yield node.lineno, "".join(map(str, pieces))
            return
        if isinstance(node, ast.Name):
            for bound in self.bindings(node, seen):
                yield from self.texts(bound, seen | {(node.id, self.scope_of(bound))})
            return
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in self.functions:
            name = node.func.id  # type: ignore[attr-defined]
            if name not in seen:
                for back in ast.walk(self.functions[name]):
                    if isinstance(back, ast.Return) and back.value is not None:
                        yield from self.texts(back.value, seen | {name})
            return
        for part in self.parts(node):
            yield from self.texts(part, seen)

    @staticmethod
    def parts(node: ast.AST) -> list[ast.AST]:
        """The subexpressions whose strings ``node``'s string is made of."""
        if isinstance(node, ast.Call):  # a method: "".join(...), a table's get(...)
            return [node.func.value, *node.args] if isinstance(node.func, ast.Attribute) else []
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp):
            return [node.elt]
        kinds = {
            ast.IfExp: lambda n: [n.body, n.orelse],
            ast.BoolOp: lambda n: n.values,
            ast.BinOp: lambda n: [n.left, n.right],
            ast.Subscript: lambda n: [n.value],
            ast.Dict: lambda n: n.values,
            ast.DictComp: lambda n: [n.value],
            ast.List: lambda n: n.elts,
            ast.Tuple: lambda n: n.elts,
            ast.Set: lambda n: n.elts,
            ast.Starred: lambda n: [n.value],
        }
        return [p for p in kinds.get(type(node), lambda n: [])(node) if p is not None]

    def scope_of(self, node: ast.AST) -> ast.AST:
        while node in self.parent and not isinstance(node, _SCOPES):
            node = self.parent[node]
        return node

    def bindings(self, name: ast.Name, seen: frozenset) -> list[ast.AST]:
        scope: ast.AST = name
        while scope in self.parent:
            scope = self.scope_of(self.parent[scope])
            if (name.id, scope) in seen:
                return []
            found = self.bound_in(scope, name.id)
            if found:
                return found
        return []

    def bound_in(self, scope: ast.AST, name: str) -> list[ast.AST]:
        if isinstance(scope, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
            return [g.iter for g in scope.generators if name in _names_in(g.target)]
        body = scope.body if isinstance(scope, ast.Module) else [scope]  # type: ignore[attr-defined]
        found: list[ast.AST] = []
        for statement in body:
            nodes = ast.walk(statement) if not isinstance(scope, ast.Module) else [statement]
            for node in nodes:
                if isinstance(node, ast.Assign) and any(name in _names_in(t) for t in node.targets):
                    found.append(node.value)
                elif isinstance(node, ast.AnnAssign | ast.AugAssign) and node.value is not None:
                    found += [node.value] if name in _names_in(node.target) else []
                elif isinstance(node, ast.For | ast.comprehension) and name in _names_in(
                    node.target
                ):
                    found.append(node.iter)
        if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
            found += self.arguments(scope, name)
        return found

    def arguments(self, function: ast.FunctionDef | ast.AsyncFunctionDef, name: str):
        """What the module's calls of ``function`` pass as its parameter ``name``."""
        params = [a.arg for a in function.args.posonlyargs + function.args.args]
        if name not in params + [a.arg for a in function.args.kwonlyargs]:
            return []
        at = params.index(name) if name in params else None
        passed: list[ast.AST] = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == function.name:
                passed += [k.value for k in node.keywords if k.arg == name]
                if at is not None and at < len(node.args):
                    passed.append(node.args[at])
        return passed


@cache
def check_hints(path: Path) -> tuple[tuple[int, str | None, str], ...]:
    """(line, exercise, text) for every hint the checks in ``path`` can show."""
    reader = HintReader(path.read_text())
    found = {
        (line, reader.exercise_of(call), text)
        for call, hint in reader.hints()
        for line, text in reader.texts(hint)
    }
    return tuple(sorted(found, key=lambda f: (f[0], f[1] or "", f[2])))


def check_hint_units(exercise: str) -> Iterator[tuple[str, str]]:
    lab = lab_of(exercise)
    story = lab.check_dir / f"story_{lab.id}.py"
    for path in [*lab.check_files, *([story] if story.exists() else [])]:
        for line, shown_by, text in check_hints(path):
            if shown_by and DIAGNOSED_BY.get(shown_by) == exercise:
                continue
            for unit in units(text):
                where = (
                    f"{path.relative_to(REPO_ROOT)} l. {line}, a hint of {shown_by or 'a'} check"
                )
                yield where, unit


# -- the rules -----------------------------------------------------------------------------------


def test_every_predict_and_debug_exercise_names_its_crux():
    missing = [e for e in CRUCIAL if not cruxes().get(e)]
    assert not missing, f"no `crux = [...]` in discussions.toml for {missing}"
    unknown = sorted(set(cruxes()) - set(CRUCIAL))
    assert not unknown, f"a crux for an exercise that is neither predict nor debug: {unknown}"


@pytest.mark.parametrize("exercise", CRUCIAL)
def test_a_crux_is_a_regex_and_one_settles_the_exercise_in_its_discussion(exercise):
    # A crux list none of which matches the exercise's own explanation would guard something
    # else; the others may name a wording a page or a hint once used.
    for pattern in cruxes()[exercise]:
        re.compile(pattern, re.I)
    with open(REPO_ROOT / "discussions.toml", "rb") as handle:
        explained = units(tomllib.load(handle)[exercise]["text"])
    assert any(re.search(p, u, re.I) for p in cruxes()[exercise] for u in explained), (
        f"{exercise}: no crux matches its discussion"
    )


@pytest.mark.parametrize("root", ["solutions", "labs"])
@pytest.mark.parametrize("exercise", CRUCIAL)
def test_the_notebook_tells_an_answer_only_in_its_answer_cells(exercise, root):
    found = findings(exercise, notebook_units(exercise, root))
    assert not found, report(exercise, f"in {root}/ outside `{answer_tag(exercise)}` cells", found)


@pytest.mark.parametrize("exercise", CRUCIAL)
def test_the_site_pages_tell_an_answer_only_in_its_fold(exercise):
    where = (u for page in site_pages() for u in page_units(page, exercise))
    found = findings(exercise, where)
    assert not found, report(exercise, f"on site/ outside `<!-- after {exercise} -->`", found)


@pytest.mark.parametrize("exercise", CRUCIAL)
def test_the_errors_page_and_error_messages_do_not_tell_an_answer(exercise):
    found = findings(exercise, [*page_units(ERRORS_PAGE, exercise), *error_messages()])
    assert not found, report(exercise, "in Spark's errors explained", found)


@pytest.mark.parametrize("exercise", CRUCIAL)
def test_hints_1_to_3_do_not_settle_an_exercise(exercise):
    found = findings(exercise, leading_hint_units(exercise))
    assert not found, report(
        exercise, f"in hints 1-{LEADING_TIERS} of lab {lab_of(exercise).id}", found
    )


@pytest.mark.parametrize("exercise", CRUCIAL)
def test_the_checks_hints_do_not_settle_an_exercise(exercise):
    found = findings(exercise, check_hint_units(exercise))
    assert not found, report(exercise, f"in the hints of lab {lab_of(exercise).id}'s checks", found)


# -- the guard's own parts -----------------------------------------------------------------------


def test_a_fold_hides_a_crux_from_the_guard_until_its_exercise_passes():
    text = (
        "Watermarks, taught on other data.\n\n"
        "<!-- after 2.4 -->\nProducer 1's 10:00:03 is dropped.\n<!-- /after -->\n\n"
        "Then 10:00:22 joins a window still open.\n\n"
        "<!-- after 2.2 -->\nOne more: 10:00:28 counts.\n<!-- /after -->\n"
    )
    shown = [(line, b.strip()) for line, folds, b in folded(text) if not opens_for(folds, "2.4")]
    assert shown == [
        (1, "Watermarks, taught on other data."),
        (7, "Then 10:00:22 joins a window still open."),
        (
            10,
            "One more: 10:00:28 counts.",
        ),  # a fold after an earlier exercise of its lab does not hide it
    ]
    found = findings("2.4", [(f"l. {line}", unit) for line, b in shown for unit in units(b)])
    assert {f.split(": ")[0] for f in found} == {"2.4, l. 7", "2.4, l. 10"}, found
    # Folds nest. A fold opened by an earlier lab, or by a later exercise, covers a crux; one
    # opened by an earlier exercise of the same lab does not.
    nested = "<!-- after 5.9 -->a<!-- after 10.1 -->b<!-- /after -->c<!-- /after -->d"
    assert [(folds, b) for _, folds, b in folded(nested)] == [
        (("5.9",), "a"),
        (("5.9", "10.1"), "b"),
        (("5.9",), "c"),
        ((), "d"),
    ]
    assert opens_for(("5.9",), "10.1") and opens_for(("3.4",), "3.3")
    assert not opens_for(("5.2",), "5.3")


def test_a_crux_catches_a_paraphrase_and_not_the_question():
    said = [(s.what, s.match) for s in settlers("5.3") if s.what.startswith("crux")]
    paraphrase = "The file that came during the crash, c.json, is not part of the replay."
    question = "Predict what the output holds after each of the three lives."
    assert any(match(paraphrase) for _, match in said)
    assert not any(match(question) for _, match in said)
    said = [s.match for s in settlers("2.6") if s.what.startswith("crux")]
    assert any(m("a retry lands in the hub again, with a later `enqueuedTime`") for m in said)


def test_the_hint_reader_follows_a_hint_to_every_text_it_can_be():
    source = """
FIX_HINT = "A module's constant."
PARTS = {"middle": "A helper's table."}


def _hint_for(wrong):
    return PARTS.get(wrong, "") if wrong else f"An f-string about {wrong}."


def _shape(answer, hint):
    expect_keys(answer, "X", ["a"], hint=hint)


@exercise("7.5", part="fix", hint=FIX_HINT)
def test_fix(nb):
    hint = "A local one."
    if nb.X:
        hint = "Another " "local one."
    expect_equal(1, 2, "sentence", hint=hint)
    expect_equal(1, 2, "sentence", hint=_hint_for(nb.X) or "")
    _shape(nb.Y, "A caller's argument.")


BROKEN = [(1, "Its mistake.", "A parameter's hint.")]


@pytest.mark.parametrize("c, m", [pytest.param(c, m, marks=exercise("4.4", hint=h)) for c, m, h in BROKEN])
def test_broken(nb, c, m):
    expect_that(False, "sentence", hint="The check's own " + "pieces.")
"""
    reader = HintReader(source)
    got = {
        (reader.exercise_of(call), text)
        for call, hint in reader.hints()
        for _, text in reader.texts(hint)
    }
    assert got == {
        ("7.5", "A module's constant."),
        ("7.5", "A local one."),
        ("7.5", "Another local one."),
        ("7.5", "A helper's table."),
        ("7.5", "An f-string about {}."),
        (None, "A caller's argument."),
        ("4.4", "Its mistake."),
        ("4.4", "A parameter's hint."),
        (None, "The check's own "),
        (None, "pieces."),
    }, got
