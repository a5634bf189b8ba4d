"""Grading: load a notebook's exercise cells into a fresh module and check them.

- :mod:`.loader` runs the graded cells of a notebook.
- :mod:`.plugin` is the pytest plugin the checks in ``checks/`` run under.
- :mod:`.child` runs the checks, and so the learner's code, in a process of its own;
  :mod:`.supervisor` keeps a hard time limit on it and blames what killed it;
  :mod:`.events` is what the two say to each other.
- :mod:`.expect` is what a check raises: a sentence, expected against actual, a hint.
- :mod:`.verdict` turns what a check raised into a status and a sentence.
- :mod:`.tries` keeps what the learner tried across gradings (graded once, first tries,
  reveals); its :func:`~.tries.require_graded` guards a notebook's answer cells.
  :mod:`.attempt` is what a check, in the child, made of the learner's answer;
  :mod:`.answers` reads an exercise's answer cells from ``solutions/`` for ``%check`` and
  ``build/answers/``; :mod:`.reveal` is ``nox -s reveal``.
- :mod:`.report` prints the table and writes ``build/grade.json``, which :mod:`.grade_file`
  reads and writes as records (refusing a file of another shape); :mod:`.unsaved` notices
  a notebook whose kernel ran newer code than its file holds.
"""

__all__ = [
    "CheckFailed",
    "LoadedNotebook",
    "exercise",
    "expect_dataframe",
    "expect_equal",
    "expect_keys",
    "expect_that",
    "answer_cell",
    "load_notebook",
    "require_graded",
]


def __getattr__(name: str):
    # Imported on first use: ``python -m streamlab.grading`` supervises and never needs
    # the loader (nbformat) or pytest itself.
    if name in ("LoadedNotebook", "load_notebook"):
        from streamlab.grading import loader

        return getattr(loader, name)
    if name in ("CheckFailed", "expect_dataframe", "expect_equal", "expect_keys", "expect_that"):
        from streamlab.grading import expect

        return getattr(expect, name)
    if name in ("require_graded", "answer_cell"):
        from streamlab.grading import tries

        return getattr(tries, name)
    if name == "exercise":
        from streamlab.grading.plugin import exercise

        return exercise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
