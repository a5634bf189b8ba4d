"""Run All in a lab stops at the first exercise not written yet, under that exercise's own cell,
with one sentence and no traceback; a call to a stub from another cell says the same."""

from __future__ import annotations

import os

import pytest

from streamlab.course.notebooks import exercise_id, read_cells
from streamlab.paths import REPO_ROOT

LAB = "00-orientation"


def _stub(exercise: str) -> str:
    cells = read_cells(REPO_ROOT / "labs" / LAB / f"{LAB}.ipynb")
    return next(c["source"] for c in cells if exercise_id(c) == exercise)


@pytest.fixture(scope="module")
def kernel():
    from jupyter_client.manager import start_new_kernel

    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    manager, client = start_new_kernel(kernel_name="python3", env=env)
    yield client
    client.stop_channels()
    manager.shutdown_kernel(now=True)


def _run(client, code: str) -> tuple[str, list[dict]]:
    """The reply's status and every output message (type and content) of running ``code``."""
    outputs: list[dict] = []

    def keep(message):
        if message["msg_type"] in ("stream", "error", "display_data", "execute_result"):
            outputs.append({"type": message["msg_type"], **message["content"]})

    reply = client.execute_interactive(code, timeout=60, output_hook=keep)
    return reply["content"]["status"], outputs


def test_an_unwritten_exercise_stops_run_all_at_its_own_cell_in_one_sentence(kernel):
    assert _run(kernel, "%load_ext streamlab")[0] == "ok"
    setup = "import json\nfrom pathlib import Path\n"
    assert _run(kernel, setup)[0] == "ok"
    status, outputs = _run(kernel, _stub("0.1"))
    assert status == "error"  # Run All stops here
    assert [o["type"] for o in outputs] == ["stream"], outputs  # no traceback
    [said] = outputs
    assert said["text"].count("\n") == 1 and "Exercise 0.1 is not done yet" in said["text"]
    assert "this cell" in said["text"] and "Traceback" not in said["text"]
    assert _run(kernel, "effective_settings")[0] == "ok"  # the cell's definitions did run

    status, outputs = _run(kernel, "effective_settings({}, '/nowhere')")
    assert status == "error"
    assert [o["type"] for o in outputs] == ["stream"], outputs
    assert "the cell tagged exercise-0.1" in outputs[0]["text"]


def test_a_written_exercise_and_a_top_level_stub(kernel):
    _run(kernel, "%load_ext streamlab")
    assert _run(kernel, "def f():\n    return 1\nf()")[0] == "ok"
    status, outputs = _run(kernel, _stub("0.3"))  # a prediction: its answer is top level
    assert status == "error"
    assert [o["type"] for o in outputs] == ["stream"], outputs
    assert "Exercise 0.3 is not done yet" in outputs[0]["text"]
    status, outputs = _run(kernel, "raise NotImplementedError('something else')")
    assert status == "error" and outputs[0]["type"] == "error"  # other errors keep their traceback
