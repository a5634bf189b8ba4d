"""Benchmark results: the table, publishing to the site, and the published figures themselves."""

from __future__ import annotations

import ast
import json

import pytest

from streamlab import benchmarks, website
from streamlab.paths import REPO_ROOT


def _result(name: str, *targets: dict, charts: tuple[str, ...] = ()) -> dict:
    return {"name": name, "script": name, "title": f"The {name} benchmark",
            "measured_at": "2026-11-23 10:00 UTC",
            "machine": {"cores": 2, "memory_gib": 23.4, "python": "3.11.7", "pyspark": "4.3.0",
                        "azure-eventhub": "5.15.1", "java": 'openjdk version "17.0.15"'},
            "settings": {}, "figures": {}, "targets": list(targets), "charts": list(charts)}


def _target(figure: str, value, goal: str, met) -> dict:
    return {"figure": figure, "value": value, "unit": "ms", "target": goal, "met": met, "note": ""}


def _write(folder, result: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{result['name']}.json").write_text(json.dumps(result))
    for chart in result["charts"]:
        (folder / chart).write_text("<svg/>")


def test_results_load_in_the_course_order(tmp_path):
    for name in ("zzz_extra", "learner_loop", "latency"):
        _write(tmp_path, _result(name))
    assert [r["name"] for r in benchmarks.load(tmp_path)] == ["latency", "learner_loop", "zzz_extra"]


def test_a_file_that_is_not_a_result_is_refused_with_its_name(tmp_path):
    (tmp_path / "notes.json").write_text('{"hello": 1}')
    with pytest.raises(benchmarks.BenchmarkError, match="notes.json has no .*not a benchmark result"):
        benchmarks.load(tmp_path)
    (tmp_path / "notes.json").write_text("{oops")
    with pytest.raises(benchmarks.BenchmarkError, match="notes.json is not JSON"):
        benchmarks.load(tmp_path)


def test_the_table_says_met_missed_or_reported_and_counts_the_targets():
    table = benchmarks.text_table([_result(
        "latency", _target("latency p50", 412, "<= 500", True),
        _target("latency p99", 1_250, "<= 1000", False),
        _target("batch median", 230.5, "report", None))])
    lines = table.splitlines()
    assert "latency p50" in lines[1] and lines[1].endswith("met")
    assert "1,250" in lines[2] and lines[2].endswith("MISSED")
    assert lines[3].endswith("reported")
    assert lines[-1] == "1 of 2 targets met; missed: latency p99"


def test_publishing_copies_results_and_charts(tmp_path):
    source, target = tmp_path / "build", tmp_path / "site"
    _write(source, _result("latency", _target("p50", 1, "<= 500", True), charts=("latency.svg",)))
    copied = benchmarks.publish(source, target)
    assert sorted(p.name for p in copied) == ["latency.json", "latency.svg"]
    assert json.loads((target / "latency.json").read_text())["name"] == "latency"


def test_a_page_gets_each_result_as_a_table_with_charts_relative_to_it(tmp_path):
    _write(tmp_path, _result("latency", _target("latency p99", 1_250, "<= 1000", False),
                             charts=("latency.svg",)))
    _write(tmp_path, _result("changelog", _target("ratio", 3.5, "report", None)))
    everything = website.benchmark_sections("", "benchmarks.md", tmp_path)
    assert "### The latency benchmark" in everything and "### The changelog benchmark" in everything
    assert "| latency p99 | 1,250 ms | <= 1000 | **MISSED** |" in everything
    assert "![The latency benchmark](benchmarks/latency.svg)" in everything
    assert "`nox -s bench -- latency`" in everything and "2 cores" in everything
    one = website.benchmark_sections("latency", "labs/06-rocksdb-under-the-hood.md", tmp_path)
    assert "(../benchmarks/latency.svg)" in one and "changelog" not in one
    assert "Not measured yet" in website.benchmark_sections("state_machine", "x.md", tmp_path)


def test_a_notebook_shows_results_and_says_what_is_missing(tmp_path):
    _write(tmp_path, _result("latency", _target("latency p50", 412, "<= 500", True),
                             charts=("latency.svg",)))
    table, chart, missing = benchmarks.displays("latency", "changelog", folder=tmp_path)
    assert "| latency p50 | 412 ms | <= 500 | met |" in table.data and "![" not in table.data
    assert "<svg" in chart.data
    assert "changelog" in missing.data and "not measured yet" in missing.data


def test_the_bench_session_runs_every_benchmark_script():
    tree = ast.parse((REPO_ROOT / "noxfile.py").read_text())
    listed = next(ast.literal_eval(node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Assign)
                  and any(getattr(t, "id", None) == "BENCHMARKS" for t in node.targets))
    scripts = {p.stem for p in (REPO_ROOT / "bench").glob("*.py") if not p.stem.startswith("_")}
    assert sorted(listed) == sorted(scripts)


def test_every_benchmark_is_published_for_the_site():
    published = {r["name"]: r for r in benchmarks.load(benchmarks.PUBLISHED_DIR)}
    assert set(benchmarks.ORDER) <= set(published), sorted(set(benchmarks.ORDER) - set(published))
    for result in published.values():
        assert result["machine"]["cores"] and result["targets"], result["name"]
        for chart in result["charts"]:
            assert (benchmarks.PUBLISHED_DIR / chart).exists(), chart
