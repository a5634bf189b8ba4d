"""Exercise 0.1 of lab 00, wrong and solved, for the tests that grade a learner's edit of it.

0.1 needs no Spark, so a test of the grader's plumbing (``%check``, the watch, JupyterLab) runs
in seconds. The solved source is read from ``solutions/``, so it follows the solution.
"""

from streamlab.course.notebooks import exercise_id, read_cells, without_markers
from streamlab.paths import REPO_ROOT

LAB = "00-orientation"
WRONG_0_1 = "def effective_settings(conf, checkpoint_dir):\n    return {}\n"


def solved(exercise: str = "0.1") -> str:
    """The solution cell of ``exercise`` as a learner who solved it would have it."""
    cells = read_cells(REPO_ROOT / "solutions" / LAB / f"{LAB}.ipynb")
    return without_markers(next(c["source"] for c in cells if exercise_id(c) == exercise)) + "\n"


SOLVED_0_1 = solved()
