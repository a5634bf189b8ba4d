"""Benchmark results: the table, publishing to the site, and the published figures themselves."""

from __future__ import annotations

import ast
import json
import re

import pytest

from streamlab import benchmarks
from streamlab.benchmarks import charts
from streamlab.paths import REPO_ROOT
from streamlab.tooling import mkdocs_hooks


def _result(name: str, *targets: dict, charts: tuple[str, ...] = ()) -> dict:
    return {
        "name": name,
        "script": name,
        "title": f"The {name} benchmark",
        "measured_at": "2026-11-23 10:00 UTC",
        "machine": {
            "cores": 2,
            "memory_gib": 23.4,
            "python": "3.11.7",
            "pyspark": "4.3.0",
            "azure-eventhub": "5.15.1",
            "java": 'openjdk version "17.0.15"',
        },
        "settings": {},
        "figures": {},
        "targets": list(targets),
        "charts": list(charts),
    }


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
    assert [r["name"] for r in benchmarks.load(tmp_path)] == [
        "latency",
        "learner_loop",
        "zzz_extra",
    ]


def test_a_file_that_is_not_a_result_is_refused_with_its_name(tmp_path):
    (tmp_path / "notes.json").write_text('{"hello": 1}')
    with pytest.raises(
        benchmarks.BenchmarkError, match="notes.json has no .*not a benchmark result"
    ):
        benchmarks.load(tmp_path)
    (tmp_path / "notes.json").write_text("{oops")
    with pytest.raises(benchmarks.BenchmarkError, match="notes.json is not JSON"):
        benchmarks.load(tmp_path)


def test_the_table_says_met_missed_or_reported_and_counts_the_targets():
    table = benchmarks.text_table(
        [
            _result(
                "latency",
                _target("latency p50", 412, "<= 500", True),
                _target("latency p99", 1_250, "<= 1000", False),
                _target("batch median", 230.5, "report", None),
            )
        ]
    )
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
    _write(
        tmp_path,
        _result(
            "latency", _target("latency p99", 1_250, "<= 1000", False), charts=("latency.svg",)
        ),
    )
    _write(tmp_path, _result("changelog", _target("ratio", 3.5, "report", None)))
    everything = mkdocs_hooks.benchmark_sections("", "benchmarks.md", tmp_path)
    assert "### The latency benchmark" in everything and "### The changelog benchmark" in everything
    assert "| latency p99 | 1,250 ms | <= 1000 | **MISSED** |" in everything
    assert "![The latency benchmark](benchmarks/latency.svg)" in everything
    assert "`nox -s bench -- latency`" in everything and "2 cores" in everything
    one = mkdocs_hooks.benchmark_sections("latency", "labs/06-rocksdb-under-the-hood.md", tmp_path)
    assert "(../benchmarks/latency.svg)" in one and "changelog" not in one
    assert "Not measured yet" in mkdocs_hooks.benchmark_sections("state_machine", "x.md", tmp_path)


def test_a_notebook_shows_results_and_says_what_is_missing(tmp_path):
    _write(
        tmp_path,
        _result("latency", _target("latency p50", 412, "<= 500", True), charts=("latency.svg",)),
    )
    table, chart, missing = benchmarks.displays("latency", "changelog", folder=tmp_path)
    assert "| latency p50 | 412 ms | <= 500 | met |" in table.data and "![" not in table.data
    assert "<svg" in chart.data
    assert "changelog" in missing.data and "not measured yet" in missing.data


def test_the_bench_session_runs_every_benchmark_script():
    tree = ast.parse((REPO_ROOT / "noxfile.py").read_text())
    listed = next(
        ast.literal_eval(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and any(getattr(t, "id", None) == "BENCHMARKS" for t in node.targets)
    )
    scripts = {p.stem for p in (REPO_ROOT / "bench").glob("*.py") if not p.stem.startswith("_")}
    assert sorted(listed) == sorted(scripts)


def test_every_benchmark_is_published_for_the_site():
    published = {r["name"]: r for r in benchmarks.load(benchmarks.PUBLISHED_DIR)}
    assert set(benchmarks.ORDER) <= set(published), sorted(set(benchmarks.ORDER) - set(published))
    for result in published.values():
        assert result["machine"]["cores"] and result["targets"], result["name"]
        for chart in result["charts"]:
            assert (benchmarks.PUBLISHED_DIR / chart).exists(), chart


def test_a_batch_splits_into_the_parts_of_its_progress_report():
    progress = {
        "durationMs": {
            "triggerExecution": 500,
            "latestOffset": 40,
            "getBatch": 1,
            "queryPlanning": 30,
            "walCommit": 20,
            "addBatch": 350,
            "commitOffsets": 25,
        },
        "stateOperators": [
            {"commitTimeMs": 60, "allUpdatesTimeMs": 12, "allRemovalsTimeMs": 0},
            {"commitTimeMs": 5, "allUpdatesTimeMs": 3},
        ],
    }
    parts = benchmarks.batch_parts(progress)
    assert list(parts) == [*benchmarks.BATCH_PARTS, "other"]
    assert parts["addBatch"] == 350 and parts["other"] == 34
    assert sum(parts.values()) == 500
    assert benchmarks.state_times(progress) == {
        "commitTimeMs": 65,
        "allUpdatesTimeMs": 15,
        "allRemovalsTimeMs": 0,
    }


def test_a_batch_part_the_report_lacks_is_zero_and_an_unknown_one_is_kept():
    # A no-data batch has no getBatch or queryPlanning; overlapping parts never make other < 0.
    parts = benchmarks.batch_parts(
        {"durationMs": {"triggerExecution": 10, "latestOffset": 8, "commitBatch": 7}}
    )
    assert parts["getBatch"] == 0 and parts["commitBatch"] == 7 and parts["other"] == 0
    assert benchmarks.state_times({"durationMs": {}}) == {
        "commitTimeMs": 0,
        "allUpdatesTimeMs": 0,
        "allRemovalsTimeMs": 0,
    }


def _svg(path):
    import xml.etree.ElementTree as ET

    return ET.parse(path).getroot()


SVG = "{http://www.w3.org/2000/svg}"


def _texts(root) -> list[str]:
    return [" ".join(" ".join(t.itertext()).split()) for t in root.iter(f"{SVG}text")]


def _segment_widths_and_fills(root) -> dict[str, tuple[float, str]]:
    """Each bar segment's width and colour, by its id (``bar-I-part-K``)."""
    found = {}
    for group in root.iter(f"{SVG}g"):
        if group.get("id", "").startswith("bar-"):
            path = group.find(f"{SVG}path")
            xs = [float(n) for n in re.findall(r"[ML] ([\d.]+) [\d.]+", path.get("d"))]
            fill = re.search(r"fill: (#[0-9a-f]{6})", path.get("style")).group(1)
            found[group.get("id")] = (max(xs) - min(xs), fill)
    return found


def test_a_stacked_chart_draws_each_part_in_one_colour_and_names_it_once(tmp_path):
    chart = charts.stacked(
        "Where a batch's milliseconds go",
        [
            (
                "before: trigger 500 ms, two shuffle partitions, parquet sink",
                [("latestOffset", 40.0), ("addBatch", 350.0), ("other", 10.0)],
            ),
            ("after", [("latestOffset", 20.0), ("addBatch", 150.0), ("other", 10.0)]),
        ],
        "ms",
        reference=("target 500 ms", 500),
        note="medians of every batch",
    )
    root = _svg(charts.draw(chart, tmp_path / "parts.svg"))
    texts = _texts(root)
    assert "400 ms" in texts and "180 ms" in texts and "target 500 ms" in texts
    assert "Where a batch's milliseconds go" in texts and "medians of every batch" in texts
    for part in ("latestOffset", "addBatch", "other"):
        assert texts.count(part) == 1, part  # in the legend, once
    # A long label wraps onto lines of their own, none of them lost.
    assert " ".join(t for t in texts if t.startswith("before") or "partitions" in t).startswith(
        "before: trigger 500 ms, two shuffle partitions, parquet sink"
    )
    segments = _segment_widths_and_fills(root)
    assert sorted(segments) == [f"bar-{i}-part-{k}" for i in (0, 1) for k in (0, 1, 2)]
    for k in (0, 1, 2):
        assert segments[f"bar-0-part-{k}"][1] == segments[f"bar-1-part-{k}"][1]
    assert len({fill for _, fill in segments.values()}) == 3
    assert segments["bar-0-part-1"][0] / segments["bar-0-part-0"][0] == pytest.approx(350 / 40)


def test_a_plain_chart_gives_each_bar_a_colour_and_its_value(tmp_path):
    chart = charts.bar("Latency", [("p50", 412.0), ("p99", 1250.0), ("max", 9.5)], "ms")
    root = _svg(charts.draw(chart, tmp_path / "latency.svg"))
    assert [t for t in _texts(root) if t.endswith(" ms")] == ["412 ms", "1,250 ms", "9.50 ms"]
    segments = _segment_widths_and_fills(root)
    assert [segments[f"bar-{i}-part-0"][1] for i in range(3)] == charts.PALETTE[:3]


def test_redrawing_draws_every_chart_from_its_results_data(tmp_path):
    chart = charts.bar("bars", [("one", 3.0)], "ms")
    result = _result("x", _target("p50", 1, "<= 500", True), charts=("b.svg",))
    _write(tmp_path, {**result, "chart_data": {"b.svg": chart}})
    assert (tmp_path / "b.svg").read_text() == "<svg/>"
    assert charts.redraw(tmp_path) == [tmp_path / "b.svg"]
    assert "bars" in _texts(_svg(tmp_path / "b.svg"))


def test_every_published_chart_is_what_its_data_draws(tmp_path):
    for result in benchmarks.load(benchmarks.PUBLISHED_DIR):
        assert set(result["chart_data"]) == set(result["charts"]), result["name"]
        for name, chart in result["chart_data"].items():
            drawn = charts.draw(chart, tmp_path / name).read_text()
            assert drawn == (benchmarks.PUBLISHED_DIR / name).read_text(), name
