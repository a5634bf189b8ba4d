"""The authoring pipeline: solutions/ is the source, labs/ is generated from it."""

from __future__ import annotations

import os
import subprocess
import sys

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from streamlab.course import registry
from streamlab.paths import REPO_ROOT
from streamlab.tooling import authoring
from streamlab.tooling.authoring import AuthoringError, make_lab_notebook, stub_source

SOLVED = '''\
def double(x):
    """Twice x."""
    # BEGIN SOLUTION
    y = x * 2
    return y
    # END SOLUTION


class Machine:
    def status(self):
        # BEGIN SOLUTION
        return "Healthy"
        # END SOLUTION'''


def test_each_region_becomes_a_stub_at_its_indentation():
    stubbed = stub_source(SOLVED, "4.2", "Build the processor", "cell 3")
    assert "x * 2" not in stubbed and '"Healthy"' not in stubbed
    assert '    raise NotImplementedError("exercise 4.2 is not done yet")' in stubbed
    assert '        raise NotImplementedError("exercise 4.2 is not done yet")' in stubbed
    assert "    # TODO: exercise 4.2, build the processor." in stubbed
    # What is outside the regions is kept: the learner sees the signatures and docstrings.
    assert 'def double(x):\n    """Twice x."""' in stubbed
    compile(stubbed, "stub", "exec")


def test_stub_names_the_exercise_and_where_to_ask_for_a_hint():
    stubbed = stub_source(SOLVED, "1.1", "Declare the schema", "cell 2")
    first_stub = stubbed.split("raise NotImplementedError")[0]
    assert "    # TODO: exercise 1.1, declare the schema." in first_stub
    assert "    # Stuck? `nox -s hint -- 1.1` shows a hint, one more each time." in first_stub
    assert "Hint:" not in stubbed


def _hint_fragments(hint: str) -> list[str]:
    """Every run of six words of ``hint``: a comment that quotes a hint contains one."""
    words = hint.replace("`", "").split()
    return [" ".join(words[i : i + 6]) for i in range(max(1, len(words) - 5))]


def _comments(source: str) -> str:
    return " ".join(
        line.split("#", 1)[1].replace("`", "").strip()
        for line in source.splitlines()
        if "#" in line
    )


def test_no_stub_in_labs_carries_a_hint():
    for lab in registry.labs():
        notebook = nbformat.read(lab.notebook(REPO_ROOT / "labs"), as_version=4)
        sources = "\n".join(cell.source for cell in notebook.cells)
        comments = " ".join(
            " ".join(
                _comments(cell.source) for cell in notebook.cells if cell.cell_type == "code"
            ).split()
        )
        for exercise in lab.exercises:
            for tier, hint in enumerate(exercise.hints, 1):
                assert hint not in sources, f"{lab.name} shows hint {tier} of {exercise.id}"
                quoted = [f for f in _hint_fragments(hint) if f in comments]
                assert not quoted, f"{lab.name} quotes hint {tier} of {exercise.id}: {quoted[0]!r}"
        assert "# Hint" not in sources, lab.name


def test_the_stub_check_finds_a_hint_quoted_in_a_comment():
    hint = registry.lab("02").exercises[0].hints[1]
    stub = f"def f():\n    # {hint[:60]}\n    #   {hint[60:]}\n    raise NotImplementedError"
    assert any(f in " ".join(_comments(stub).split()) for f in _hint_fragments(hint))


def test_stubbed_function_raises_not_done():
    namespace: dict = {}
    exec(stub_source(SOLVED, "4.2", "Build it", "cell 1"), namespace)
    with pytest.raises(NotImplementedError, match=r"^exercise 4\.2 is not done yet$"):
        namespace["double"](2)


@pytest.mark.parametrize(
    "source, problem",
    [
        ("x = 1", "has no '# BEGIN SOLUTION'"),
        ("# BEGIN SOLUTION\nx = 1", "never closed"),
        ("x = 1\n# END SOLUTION", "without a BEGIN"),
    ],
)
def test_malformed_regions_are_reported_with_the_cell(source, problem):
    with pytest.raises(AuthoringError, match=problem) as error:
        stub_source(source, "0.1", "Title", "00-orientation cell 5")
    assert "00-orientation cell 5" in str(error.value)


def _notebook(*cells):
    notebook = new_notebook()
    notebook.cells = list(cells)
    return notebook


def _tagged(source, *tags):
    cell = new_code_cell(source)
    cell.metadata["tags"] = list(tags)
    return cell


def test_lab_notebook_keeps_ungraded_cells_and_strips_outputs():
    lab = registry.lab("00")
    demo = new_code_cell("print('hi')")
    demo.outputs = [nbformat.v4.new_output("stream", text="hi\n")]
    demo.execution_count = 3
    cells = [new_markdown_cell("# Title"), demo]
    cells += [
        _tagged(
            f"def f{i}():\n    # BEGIN SOLUTION\n    return {i}\n    # END SOLUTION",
            f"exercise-{e.id}",
        )
        for i, e in enumerate(lab.exercises)
    ]
    generated = make_lab_notebook(_notebook(*cells), lab)
    assert generated.cells[0].source == "# Title"
    assert generated.cells[1].source == "print('hi')"
    assert generated.cells[1].outputs == [] and generated.cells[1].execution_count is None
    assert all("not done yet" in c.source for c in generated.cells[2:])


def test_an_exercise_without_a_cell_is_an_authoring_error():
    lab = registry.lab("00")
    first = lab.exercises[0]
    only_one = _notebook(_tagged("# BEGIN SOLUTION\nx = 1\n# END SOLUTION", f"exercise-{first.id}"))
    with pytest.raises(AuthoringError, match="no cell is tagged"):
        make_lab_notebook(only_one, lab)


def test_labs_folder_is_generated_from_solutions():
    stale = authoring.sync(check=True)
    assert stale == [], "Run `nox -s author`: " + "; ".join(stale)


def test_committed_notebooks_carry_no_outputs():
    for folder in ("solutions", "labs"):
        for path in (REPO_ROOT / folder).rglob("*.ipynb"):
            notebook = nbformat.read(path, as_version=4)
            ran = [
                i
                for i, c in enumerate(notebook.cells, 1)
                if c.cell_type == "code"
                and (c.outputs or c.execution_count)
                # A solution's proof cells keep their recorded output, for nbval to compare.
                and not (folder == "solutions" and authoring.is_proof(c))
            ]
            assert not ran, f"{path.relative_to(REPO_ROOT)} has outputs in cells {ran}"


def test_every_lab_in_the_registry_has_notebooks_checks_and_a_page():
    for lab in registry.labs():
        assert lab.notebook(REPO_ROOT / "solutions").exists(), lab.name
        assert lab.check_dir.is_dir(), lab.check_dir
        assert (REPO_ROOT / "site" / lab.site_page).exists(), lab.site_page


def test_a_lab_without_its_solution_notebook_is_an_error(tmp_path):
    (tmp_path / "course.toml").write_text(
        'format_version = 1\n[[labs]]\nid = "09"\nslug = "ghost"\ntitle = "Ghost"\n'
        '[[labs.exercises]]\nid = "9.1"\ntitle = "T"\nhints = ["H", "I"]\n'
    )
    out = subprocess.run(
        [sys.executable, "-m", "streamlab.tooling.authoring"],
        capture_output=True,
        text=True,
        env={**os.environ, "STREAMLAB_ROOT": str(tmp_path)},
    )
    assert out.returncode == 2
    assert "solutions/09-ghost/09-ghost.ipynb does not exist" in out.stderr


@pytest.mark.parametrize("lab", registry.labs(), ids=lambda lab: lab.id)
def test_every_lab_loads_check_before_its_first_exercise_and_says_how_to_use_it(lab):
    notebook = nbformat.read(lab.notebook(REPO_ROOT / "labs"), as_version=4)
    sources = ["".join(cell.source) for cell in notebook.cells]
    first_exercise = next(i for i, cell in enumerate(notebook.cells) if authoring.exercise_id(cell))
    loads = [i for i, source in enumerate(sources) if "%load_ext streamlab" in source]
    assert loads and loads[0] < first_exercise, (
        f"{lab.name}: `%load_ext streamlab` must run before the first exercise cell, "
        "or `%check` is unknown where the learner first needs it"
    )
    intro = sources[0]
    first = lab.exercises[0].id
    for told in (
        f"%check {first}",
        f"nox -s check -- {lab.id}",
        f"nox -s hint -- {first}",
        f"nox -s watch -- {lab.id}",
        "Run All stops",
    ):
        assert told in intro, f"{lab.name}: the introduction does not mention {told!r}"


@pytest.mark.parametrize("lab", registry.labs(), ids=lambda lab: lab.id)
def test_every_exercise_has_its_check_cell_right_after_it(lab):
    # Build exercises as predict ones: the learner never has to add (and keep) a cell of their own.
    notebook = nbformat.read(lab.notebook(REPO_ROOT / "labs"), as_version=4)
    cells = notebook.cells
    for exercise in lab.exercises:
        last = max(i for i, cell in enumerate(cells) if authoring.exercise_id(cell) == exercise.id)
        after = cells[last + 1] if last + 1 < len(cells) else None
        assert after is not None and after.cell_type == "code", f"{exercise.id}: no cell after it"
        lines = [line.strip() for line in "".join(after.source).splitlines()]
        assert f"%check {exercise.id}" in lines, (
            f"{exercise.id}: the cell after it: {after.source!r}"
        )
        assert "nbval-skip" in after.metadata.get("tags", []), exercise.id


def test_lab00_starts_spark_above_its_first_exercise():
    # Run All stops at exercise 0.1, under its cell: Spark has started by then, and the
    # learner's first %check 0.2 finds it running.
    lab = next(lab for lab in registry.labs() if lab.id == "00")
    cells = nbformat.read(lab.notebook(REPO_ROOT / "labs"), as_version=4).cells
    session = next(i for i, c in enumerate(cells) if "spark_session(" in "".join(c.source))
    first = next(i for i, c in enumerate(cells) if authoring.exercise_id(c))
    assert session < first, "lab 00 starts Spark below exercise 0.1, where Run All stops"
    above = "".join("".join(c.source) for c in cells[:first] if c.cell_type == "code")
    assert "effective_settings(" not in above


# -- proof cells: a claim about Spark, its output recorded and compared by nbval -------------

PROOF = "# NBVAL_CHECK_OUTPUT\nprint(sum(range(5)))"


def _proof_notebook(output_text: str | None) -> nbformat.NotebookNode:
    proof = new_code_cell(PROOF)
    if output_text is not None:
        proof.outputs = [nbformat.v4.new_output("stream", name="stdout", text=output_text)]
    other = new_code_cell("print('not a proof')")
    other.outputs = [nbformat.v4.new_output("stream", name="stdout", text="not a proof\n")]
    notebook = new_notebook()
    notebook.cells = [new_markdown_cell("# Lab"), proof, other]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    return notebook


def test_solutions_keep_proof_outputs_and_labs_keep_none():
    notebook = _proof_notebook("10\n")
    kept = authoring.strip_outputs(notebook, keep_proofs=True)
    assert [len(cell.get("outputs", [])) for cell in kept.cells] == [0, 1, 0]
    assert authoring.strip_outputs(notebook).cells[1].outputs == []
    assert authoring.is_proof(notebook.cells[1]) and not authoring.is_proof(notebook.cells[2])
    assert authoring.unrecorded_proofs(notebook) == []
    assert authoring.unrecorded_proofs(_proof_notebook(None)) == [2]


@pytest.mark.parametrize("recorded, passes", [("10\n", True), ("11\n", False)])
def test_nbval_compares_a_proof_cell_with_its_recorded_output(tmp_path, recorded, passes):
    # The project's pytest settings (--nbval-lax) compare exactly the proof cells.
    path = tmp_path / "proof.ipynb"
    nbformat.write(authoring.strip_outputs(_proof_notebook(recorded), keep_proofs=True), path)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax", str(path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert (out.returncode == 0) is passes, out.stdout + out.stderr


def test_record_runs_the_notebook_and_keeps_only_proof_outputs(tmp_path):
    path = tmp_path / "proof.ipynb"
    nbformat.write(_proof_notebook(None), path)
    assert authoring.record(path, echo=lambda line: None) == 1
    recorded = nbformat.read(path, as_version=4)
    assert [cell.get("outputs") for cell in recorded.cells[1:]] == [
        [{"name": "stdout", "output_type": "stream", "text": "10\n"}],
        [],
    ]


def test_every_proof_cell_of_the_course_has_a_recorded_output():
    assert authoring.unrecorded() == []
