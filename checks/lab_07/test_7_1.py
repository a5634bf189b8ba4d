"""Checks of exercise 7.1 · The scheduler's pools.

The allocation file the learner writes, parsed here as XML: pure Python, no Spark.
"""

import xml.etree.ElementTree as ET

from streamlab.kit import (
    CheckFailed,
    exercise,
    expect_equal,
    expect_that,
)


def _parse(text: str) -> ET.Element:
    try:
        return ET.fromstring(text.strip())
    except ET.ParseError as error:
        raise CheckFailed(
            f"fair_scheduler_xml() returned text that is not XML ({error}).",
            expected="an <allocations> XML document",
            actual=text[:200],
        ) from None


@exercise("7.1")
def test_one_pool_element_per_pool(nb):
    root = _parse(
        nb.fair_scheduler_xml(
            {"alerts": nb.Pool(weight=2, min_share=1), "windows": nb.Pool(3, 0, "FAIR")}
        )
    )
    expect_equal(root.tag, "allocations", "The root element should be <allocations>.")
    pools = root.findall("pool")
    names = [p.get("name") for p in pools]
    expect_equal(
        names, ["alerts", "windows"], "Expected one <pool name=...> per pool, in the dict's order."
    )
    got = {p.get("name"): {child.tag: (child.text or "").strip() for child in p} for p in pools}
    expected = {
        "alerts": {"schedulingMode": "FIFO", "weight": "2", "minShare": "1"},
        "windows": {"schedulingMode": "FAIR", "weight": "3", "minShare": "0"},
    }
    expect_equal(
        got, expected, "Each pool holds exactly <schedulingMode>, <weight> and <minShare>."
    )


@exercise("7.1")
def test_pool_names_come_out_exactly(nb):
    name = 'R&D <"night"> shift'
    root = _parse(nb.fair_scheduler_xml({name: nb.Pool()}))
    got = [p.get("name") for p in root.findall("pool")]
    expect_equal(
        got,
        [name],
        f"A pool named {name!r} should come back with that exact name when the file is read. "
        "Let xml.etree.ElementTree write the attribute: it escapes &, < and quotes.",
    )


@exercise("7.1")
def test_no_pools_is_an_empty_file(nb):
    root = _parse(nb.fair_scheduler_xml({}))
    expect_that(
        root.tag == "allocations" and len(root) == 0,
        "With no pools, the file is an empty <allocations/> element.",
        expected="<allocations />",
        actual=ET.tostring(root, encoding="unicode")[:200],
    )


@exercise("7.1")
def test_the_mode_is_read_in_any_case_and_written_in_upper_case(nb):
    root = _parse(nb.fair_scheduler_xml({"alerts": nb.Pool(scheduling_mode="fair")}))
    modes = [(p.findtext("schedulingMode") or "").strip() for p in root.findall("pool")]
    expect_equal(
        modes,
        ["FAIR"],
        "Spark reads the scheduling mode in any letter case: a pool given 'fair' is a FAIR "
        "pool, written in upper case.",
    )


@exercise("7.1")
def test_bad_pools_raise_value_error(nb):
    cases = [
        ("an empty name", {"": nb.Pool()}),
        ("a blank name (only spaces)", {"  ": nb.Pool()}),
        ("weight 0", {"a": nb.Pool(weight=0)}),
        ("scheduling mode 'ROUND_ROBIN'", {"a": nb.Pool(scheduling_mode="ROUND_ROBIN")}),
        ("a good pool followed by weight 0", {"a": nb.Pool(), "b": nb.Pool(weight=0)}),
    ]
    for what, pools in cases:
        try:
            text = nb.fair_scheduler_xml(pools)
        except ValueError:
            continue
        raise CheckFailed(
            f"fair_scheduler_xml() should raise ValueError for a pool with {what}.",
            expected="ValueError raised",
            actual=f"returned {text[:120] if isinstance(text, str) else text!r}",
        )
