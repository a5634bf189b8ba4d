"""The course model, below the grader and the tooling, which both read it.

- :mod:`streamlab.course.registry`: the list of labs and exercises (``course.toml``).
- :mod:`streamlab.course.notebooks`: the notebook conventions (exercise tags, solution regions).

It imports nothing of ``streamlab`` but :mod:`streamlab.paths` (``tests/test_import_direction.py``
holds it).
"""
