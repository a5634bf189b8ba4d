"""Grading: load a notebook's exercise cells into a fresh module and check them.

- :mod:`.loader` runs the graded cells of a notebook.
- :mod:`.plugin` is the pytest plugin the checks in ``checks/`` run under.
- :mod:`.verdict` turns what a check raised into a status and a sentence.
- :mod:`.report` prints the table and writes ``build/grade.json``.
"""

from streamlab.grading.loader import LoadedNotebook, load_notebook
from streamlab.grading.plugin import exercise

__all__ = ["LoadedNotebook", "exercise", "load_notebook"]
