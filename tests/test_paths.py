"""Where the course keeps its scratch files, and how a second run of the course gets its own."""

import os
import subprocess
import sys

from streamlab.paths import REPO_ROOT


def _paths(env: dict[str, str], *lines: str) -> list[str]:
    """What ``lines`` print in a fresh Python process with ``env``."""
    code = "; ".join(["from streamlab import paths", *lines])
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return result.stdout.splitlines()


def test_scratch_files_go_to_build_by_default(monkeypatch):
    monkeypatch.delenv("STREAMLAB_BUILD_DIR", raising=False)
    assert _paths(dict(os.environ), "print(paths.BUILD_DIR)") == [str(REPO_ROOT / "build")]


def test_a_second_run_of_the_course_gets_a_scratch_folder_of_its_own(tmp_path):
    env = {**os.environ, "STREAMLAB_BUILD_DIR": str(tmp_path / "nbval")}
    shown = _paths(env, "print(paths.BUILD_DIR)", "print(paths.work_dir('lab'))")
    assert shown == [str(tmp_path / "nbval"), str(tmp_path / "nbval" / "work" / "lab")]
    assert (tmp_path / "nbval" / "work" / "lab").is_dir()


def test_a_file_written_atomically_is_whole_or_as_it_was(tmp_path):
    from streamlab.paths import write_atomically

    path = tmp_path / "grade.json"
    write_atomically(path, lambda out: out.write("first\n"))
    assert path.read_text() == "first\n"

    def breaks_halfway(out):
        out.write("half of the sec")
        raise KeyboardInterrupt  # the learner presses Ctrl-C while the grade is written

    try:
        write_atomically(path, breaks_halfway)
    except KeyboardInterrupt:
        pass
    assert path.read_text() == "first\n"
    assert [p.name for p in tmp_path.iterdir()] == ["grade.json"]  # no temporary file left
