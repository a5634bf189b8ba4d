"""Facts Spark gave about the course's own code are computed once per machine, and again
whenever anything that could change them changed."""

from __future__ import annotations

import pytest

from streamlab.grading import facts


@pytest.fixture
def kept(tmp_path, monkeypatch):
    monkeypatch.setattr(facts, "FACTS_DIR", tmp_path / "facts")
    check = tmp_path / "test_99_check.py"
    check.write_text("# a check file\n")
    calls = []

    def compute():
        calls.append(1)
        return {"batch": len(calls)}

    return check, calls, compute


def test_facts_are_computed_once(kept):
    check, calls, compute = kept
    assert facts.spark_facts("9.9 story", compute, check=str(check)) == {"batch": 1}
    assert facts.spark_facts("9.9 story", compute, check=str(check)) == {"batch": 1}
    assert len(calls) == 1
    # Another name is other facts.
    assert facts.spark_facts("9.9 other", compute, check=str(check)) == {"batch": 2}


def test_a_changed_check_or_input_computes_them_again(kept, tmp_path):
    check, calls, compute = kept
    notebook = tmp_path / "solution.ipynb"
    notebook.write_text("{}")
    facts.spark_facts("9.9 story", compute, check=str(check), inputs=[notebook])
    check.write_text("# a check file, changed\n")
    assert facts.spark_facts("9.9 story", compute, check=str(check), inputs=[notebook]) == {
        "batch": 2
    }
    notebook.write_text('{"cells": []}')
    assert facts.spark_facts("9.9 story", compute, check=str(check), inputs=[notebook]) == {
        "batch": 3
    }
    assert len(calls) == 3


def test_a_kept_file_that_cannot_be_read_is_computed_again(kept):
    check, calls, compute = kept
    facts.spark_facts("9.9 story", compute, check=str(check))
    (kept_file,) = facts.FACTS_DIR.glob("9-9-story-*.pickle")
    kept_file.write_bytes(b"not a pickle")
    assert facts.spark_facts("9.9 story", compute, check=str(check)) == {"batch": 2}
    assert facts.spark_facts("9.9 story", compute, check=str(check)) == {"batch": 2}


def test_facts_are_kept_per_value_given(kept):
    """A story or a delay the notebook gives is part of the key: other values, other facts;
    the same values, the facts kept."""
    check, calls, compute = kept
    story = [("m1", 10), ("m2", 12)]
    first = facts.spark_facts("9.9 story", compute, check=str(check), given=(story, "10 seconds"))
    assert first == {"batch": 1}
    again = facts.spark_facts("9.9 story", compute, check=str(check), given=(story, "10 seconds"))
    assert again == {"batch": 1}
    other = facts.spark_facts("9.9 story", compute, check=str(check), given=(story, "20 seconds"))
    assert other == {"batch": 2}
    changed = facts.spark_facts(
        "9.9 story", compute, check=str(check), given=([("m1", 10)], "10 seconds")
    )
    assert changed == {"batch": 3}
    assert len(calls) == 3


def test_a_value_given_must_have_a_stable_repr(kept):
    check, _, compute = kept
    with pytest.raises(TypeError, match="object"):
        facts.spark_facts("9.9 story", compute, check=str(check), given=object())


def test_a_changed_solution_notebook_changes_the_key(tmp_path):
    """The reference processors are loaded from the solution notebooks: facts computed with
    an older solution are not kept."""
    course = tmp_path / "course"
    (course / "streamlab").mkdir(parents=True)
    (course / "streamlab" / "reference.py").write_text("TIMEOUT_MS = 5_000\n")
    notebook = course / "solutions" / "04-lab" / "04-lab.ipynb"
    notebook.parent.mkdir(parents=True)
    notebook.write_text('{"cells": []}')
    before = facts._course_key.__wrapped__(course)
    assert facts._course_key.__wrapped__(course) == before
    notebook.write_text('{"cells": [{"source": "class LeanHeartbeatProcessor: ..."}]}')
    assert facts._course_key.__wrapped__(course) != before
