"""The README's two lines stay true: CI runs the test line word for word."""

from __future__ import annotations

import re

from streamlab.paths import REPO_ROOT


def _commands() -> list[str]:
    readme = (REPO_ROOT / "README.md").read_text()
    return re.findall(r"```bash\n(python3\.11 .+?)\n```", readme)


def test_readme_has_a_start_line_and_a_test_line():
    start, test = _commands()[:2]
    assert start.endswith("nox -s lab") and test.endswith("nox -s test")
    assert start.startswith("python3.11 -m venv .venv && ") and test.startswith(
        "python3.11 -m venv .venv && "
    )


def test_ci_runs_the_readmes_test_line():
    test = _commands()[1]
    assert test in (REPO_ROOT / ".ci" / "run").read_text().splitlines()
