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


def test_where_things_live_names_every_part_of_the_package():
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme.split("## Where things live", 1)[1]
    package = REPO_ROOT / "streamlab"
    parts = [
        f"streamlab/{p.name}/" if p.is_dir() else f"streamlab/{p.name}"
        for p in sorted(package.iterdir())
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()
    ]
    missing = [
        part
        for part in parts
        if f"`{part}`" not in section and f"`{part.rstrip('/')}`" not in section
    ]
    assert not missing, missing
