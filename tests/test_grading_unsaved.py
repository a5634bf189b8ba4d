"""'Did you save?': the grader notices a kernel that ran newer code than the saved notebook.

A real JupyterLab on a copy of lab 00, a real kernel started through its REST API, a real
run of a cell in that kernel (recorded in IPython's history as JupyterLab's kernels record
it), then the real grader.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

from grader_runs import run_grader
from jupyter_client import BlockingKernelClient
from jupyter_support import TOKEN, running_jupyterlab

from streamlab.course import registry
from streamlab.paths import REPO_ROOT

LAB = registry.lab("00")
SOLVED = """def summarise_progress(progress: dict) -> str:
    return f"batch {progress['batchId']}"
"""


def _api(base: str, path: str, body: dict | None = None) -> dict:
    request = urllib.request.Request(
        f"{base}{path}",
        data=json.dumps(body).encode() if body is not None else None,
        method="POST" if body is not None else "GET",
        headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.load(answer)


def test_a_stub_graded_while_the_kernel_ran_a_solution_asks_did_you_save(tmp_path):
    notebooks = tmp_path / "labs"
    target = LAB.notebook(notebooks)
    target.parent.mkdir(parents=True)
    target.write_bytes(LAB.notebook(REPO_ROOT / "labs").read_bytes())
    env = {
        "IPYTHONDIR": str(tmp_path / "ipython"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
    }
    grade_json = tmp_path / "grade.json"
    with running_jupyterlab(tmp_path, f"--notebook-dir={notebooks}", env=env, hub=False) as lab:
        relative = target.relative_to(notebooks).as_posix()
        session = _api(
            lab.base,
            "/api/sessions",
            {"path": relative, "type": "notebook", "kernel": {"name": "python3"}},
        )
        connection = Path(env["JUPYTER_RUNTIME_DIR"]) / f"kernel-{session['kernel']['id']}.json"
        deadline = time.monotonic() + 60
        while not connection.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        client = BlockingKernelClient(connection_file=str(connection))
        client.load_connection_file()
        client.start_channels()
        try:
            client.wait_for_ready(timeout=60)
            # The learner solves 0.3 in the open notebook and does not save.
            reply = client.execute_interactive(SOLVED, timeout=60)
            assert reply["content"]["status"] == "ok"
        finally:
            client.stop_channels()
        out = run_grader(notebooks, "00", json_path=grade_json, timeout=300, env=env)
    graded = json.loads(grade_json.read_text())
    assert out.returncode == 0, out.stdout + out.stderr
    assert [w["exercise"] for w in graded["unsaved"]] == ["0.3"], graded["unsaved"]
    assert "Did you save?" in " ".join(out.stdout.split())
    assert "Exercise 0.3: the code you last ran in its cell" in " ".join(out.stdout.split())
    # The exercises the kernel did not touch are not mentioned.
    assert "Exercise 0.1:" not in out.stdout and "Exercise 0.2:" not in out.stdout
