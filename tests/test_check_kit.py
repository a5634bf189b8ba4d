"""The checks use the kit: they import ``streamlab`` only through it, declare none of its names
again, and say expected against actual, never with a bare assert."""

from __future__ import annotations

import ast

import pytest
from pyspark.sql import functions as F

import streamlab.kit
from streamlab.grading import CheckFailed, expect_that, facts
from streamlab.kit import (
    START,
    Field,
    crash_before_commit,
    expect_answer,
    expect_spark_shows,
    is_int,
    list_of,
    window_bounds,
)
from streamlab.notebook_api import NOTEBOOK_API
from streamlab.paths import REPO_ROOT

#: The checks' own files.
CHECKS = sorted(p for p in (REPO_ROOT / "checks").rglob("*.py") if p.name != "conftest.py")
#: The checks, and the helpers they share that fail a check themselves.
CHECK_FILES = [*CHECKS, REPO_ROOT / "streamlab" / "kit" / "heartbeat.py"]
ON_THE_KIT = CHECKS


def outside_the_kit(tree: ast.AST) -> list[str]:
    """Each name a check takes from ``streamlab`` neither through the kit nor as a name the
    notebooks use (``NOTEBOOK_API``), which a check may exercise on purpose."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "streamlab"]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("streamlab"):
            if node.module == "streamlab.kit":
                continue
            names = [f"{node.module}.{a.name}" for a in node.names]
            found += [name for name in names if name not in NOTEBOOK_API]
    return found


def declared(tree: ast.Module) -> set[str]:
    """The names a module binds at its top level (assignments, functions, classes)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Name):
                    names.add(leaf.id)
    return names


@pytest.mark.parametrize("path", ON_THE_KIT, ids=lambda p: p.name)
def test_a_check_imports_streamlab_only_through_the_kit(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    assert outside_the_kit(tree) == [], (
        f"{path.name} imports these from streamlab besides the kit; take them from "
        "streamlab.kit (add them to its __all__ if a check needs them)"
    )


@pytest.mark.parametrize("path", ON_THE_KIT, ids=lambda p: p.name)
def test_a_check_declares_none_of_the_kit_names_again(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    again = sorted(declared(tree) & set(streamlab.kit.__all__))
    assert again == [], f"{path.name} declares the kit's {again} again: import them"


def test_the_rules_see_an_import_past_the_kit_and_a_name_declared_again():
    tree = ast.parse(
        "from streamlab.kit import START\n"
        "from streamlab.deadlines import finish\n"
        "from streamlab.grading.stories import START as T\n"
        "import streamlab.session\n"
        "NO_DATA_BATCHES = 'spark.sql.streaming.noDataMicroBatches.enabled'\n"
        "HEALTHY, X = 'Healthy', 1\n"
    )
    assert outside_the_kit(tree) == ["streamlab.grading.stories.START", "streamlab.session"]
    assert declared(tree) & set(streamlab.kit.__all__) == {"NO_DATA_BATCHES", "HEALTHY"}


def test_every_name_of_the_kit_is_there():
    missing = [name for name in streamlab.kit.__all__ if not hasattr(streamlab.kit, name)]
    assert missing == []


def test_an_answer_of_the_wrong_shape_is_named_with_its_key():
    fields = {
        "rows": Field(list_of(is_int), "a list of ints.", expected="a list of ints"),
        "batch": Field(is_int, "a batch id, an int"),
    }
    assert expect_answer({"rows": [1, 2], "batch": 3}, "DIAGNOSIS", fields) == {
        "rows": [1, 2],
        "batch": 3,
    }
    with pytest.raises(CheckFailed) as failed:
        expect_answer({"rows": [1, True], "batch": 3}, "DIAGNOSIS", fields)
    assert failed.value.message == "DIAGNOSIS['rows'] should be a list of ints."
    assert (failed.value.expected, failed.value.actual) == ("a list of ints", "[1, True]")
    assert not failed.value.of_shape
    with pytest.raises(CheckFailed) as failed:
        expect_answer({"rows": [], "batch": "3"}, "DIAGNOSIS", fields)
    assert failed.value.message == "DIAGNOSIS['batch'] should be a batch id, an int; it is '3'."
    with pytest.raises(CheckFailed) as failed:
        expect_answer({"rows": []}, "DIAGNOSIS", fields)
    assert failed.value.of_shape


def test_an_answer_is_held_against_what_spark_showed_once_per_machine(tmp_path, monkeypatch):
    monkeypatch.setattr(facts, "FACTS_DIR", tmp_path / "facts")
    check = tmp_path / "test_9_9.py"
    check.write_text("# a check file\n")
    runs = []

    def measure():
        runs.append(1)
        return {"batches": [0, 1]}

    expect_spark_shows(
        {"batches": [0, 1]}, "9.9 the run", measure, "DIAGNOSIS against the run.", check=str(check)
    )
    with pytest.raises(CheckFailed) as failed:
        expect_spark_shows(
            {"batches": [0]},
            "9.9 the run",
            measure,
            "DIAGNOSIS against the run.",
            check=str(check),
            hint="Read the progress reports.",
        )
    assert (failed.value.message, failed.value.hint) == (
        "DIAGNOSIS against the run.",
        "Read the progress reports.",
    )
    assert failed.value.values == ({"batches": [0, 1]}, {"batches": [0]})
    assert len(runs) == 1


def test_a_window_is_shown_by_its_bounds(spark):
    beats = spark.createDataFrame(
        [("m1", START.replace(second=3)), ("m1", START.replace(second=12))],
        "machine_name STRING, event_time TIMESTAMP",
    )
    windows = beats.groupBy(F.window("event_time", "10 seconds"), "machine_name").count()
    rows = windows.select(*window_bounds(), "machine_name").orderBy("window_start").collect()
    assert [tuple(r) for r in rows] == [
        (START.replace(tzinfo=None), START.replace(second=10, tzinfo=None), "m1"),
        (START.replace(second=10, tzinfo=None), START.replace(second=20, tzinfo=None), "m1"),
    ]


def test_a_crash_before_the_commit_leaves_the_newest_batch_unrecorded(tmp_path):
    commits = tmp_path / "checkpoint" / "commits"
    commits.mkdir(parents=True)
    for batch in (0, 1, 10):
        (commits / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
        (commits / f".{batch}.crc").write_bytes(b"crc")
    crash_before_commit(tmp_path / "checkpoint")
    assert sorted(p.name for p in commits.iterdir()) == [".0.crc", ".1.crc", "0", "1"]
    (commits / ".1.crc").unlink()  # a checkpoint without checksums
    crash_before_commit(str(tmp_path / "checkpoint"))
    assert sorted(p.name for p in commits.iterdir()) == [".0.crc", "0"]


def test_settings_put_back_what_they_found(spark):
    key, absent = "spark.sql.shuffle.partitions", "spark.streamlab.never.set"
    before = spark.conf.get(key)
    with streamlab.kit.session_conf(spark, {key: "7", absent: "x"}):
        assert (spark.conf.get(key), spark.conf.get(absent)) == ("7", "x")
    assert (spark.conf.get(key), spark.conf.get(absent, None)) == (before, None)


def test_settings_kept_come_back_whatever_the_block_did(spark):
    key, absent = "spark.sql.shuffle.partitions", "spark.streamlab.never.set"
    before = spark.conf.get(key)
    with pytest.raises(RuntimeError), streamlab.kit.settings_kept(spark, [key, absent]) as found:
        assert found == {key: before, absent: None}
        spark.conf.set(key, "9")
        spark.conf.set(absent, "y")
        raise RuntimeError("a learner's block that fails")
    assert (spark.conf.get(key), spark.conf.get(absent, None)) == (before, None)


@pytest.mark.parametrize("path", CHECK_FILES, ids=lambda p: p.name)
def test_a_check_file_holds_no_bare_assert(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lines = [node.lineno for node in ast.walk(tree) if _bare(node)]
    assert not lines, (
        f"{path.name} has a bare assert or AssertionError on line(s) {lines}: a learner would "
        "see its sentence without what was expected and what the code did. Use "
        "expect_equal(), expect_that() or CheckFailed(..., expected=, actual=)."
    )


def _bare(node: ast.AST) -> bool:
    if isinstance(node, ast.Assert):
        return True
    if isinstance(node, ast.Raise) and node.exc is not None:
        raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        return isinstance(raised, ast.Name) and raised.id == "AssertionError"
    return False


def test_expect_says_what_was_wanted_and_what_came():
    expect_that(True, "never shown", expected="a DataFrame", actual="a list")
    with pytest.raises(CheckFailed) as failed:
        expect_that(False, "plan() should return a Plan.", expected="a Plan", actual="tuple")
    assert failed.value.message == "plan() should return a Plan."
    assert (failed.value.expected, failed.value.actual) == ("a Plan", "tuple")


def test_expect_dataframe_names_the_function_and_what_it_returned(spark):
    from streamlab.grading import expect_dataframe

    frame = spark.range(1)
    assert expect_dataframe(frame, "windows", ["id"]) is frame
    with pytest.raises(CheckFailed) as failed:
        expect_dataframe([1], "windows")
    assert failed.value.message.startswith("windows() should return a DataFrame.")
    assert (failed.value.expected, failed.value.actual) == ("a DataFrame", "list")
    with pytest.raises(CheckFailed) as failed:
        expect_dataframe(frame, "windows", ["window", "n"])
    assert failed.value.expected == "['window', 'n']"


@pytest.mark.parametrize("path", CHECKS, ids=lambda p: p.name)
def test_a_check_leaves_sending_itself_to_the_workers_to_the_plugin(path):
    text = path.read_text(encoding="utf-8")
    assert "register_pickle_by_value" not in text, (
        f"{path.name} registers itself with cloudpickle; the grading plugin sends every module "
        "of a checks folder to Spark's workers by value"
    )


def test_the_plugin_sends_a_check_and_its_story_by_value(tmp_path, monkeypatch):
    """A function of a check file or of its story module reaches a process that cannot import
    either (as Spark's Python workers cannot)."""
    import subprocess
    import sys
    from types import SimpleNamespace

    from pyspark import cloudpickle

    from streamlab.grading.plugin import send_checks_by_value

    lab = tmp_path / "lab_99"
    lab.mkdir()
    (lab / "story_99.py").write_text("def twice(x):\n    return 2 * x\n")
    (lab / "test_99_1.py").write_text(
        "from story_99 import twice\n\ndef thrice_twice(x):\n    return 3 * twice(x)\n"
    )
    monkeypatch.syspath_prepend(str(lab))
    import test_99_1  # type: ignore[import-not-found]

    try:
        send_checks_by_value([SimpleNamespace(path=lab / "test_99_1.py")])  # type: ignore[list-item]
        payload = cloudpickle.dumps(test_99_1.thrice_twice)
    finally:
        for name in ("test_99_1", "story_99"):
            if name in sys.modules:
                cloudpickle.unregister_pickle_by_value(sys.modules[name])
                del sys.modules[name]
    elsewhere = subprocess.run(
        [
            sys.executable,
            "-c",
            "import pickle, sys; print(pickle.loads(sys.stdin.buffer.read())(7))",
        ],
        input=payload,
        capture_output=True,
        cwd=tmp_path,
        check=False,
    )
    assert elsewhere.stdout.decode().strip() == "42", elsewhere.stderr.decode()[-500:]
