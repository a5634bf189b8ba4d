"""The course's own tooling, which a learner never imports from a notebook.

- :mod:`streamlab.course.registry`: the list of labs and exercises (``course.toml``).
- :mod:`streamlab.course.notebooks`: the notebook conventions (exercise tags, solution regions).
- :mod:`streamlab.tooling.authoring`: generates the learner's notebooks in ``labs/`` from
  ``solutions/`` (``nox -s author``).
- :mod:`streamlab.tooling.hints`: tiered hints (``nox -s hint``);
  :mod:`streamlab.tooling.hint_leaks` holds them to never giving the solution away.
- :mod:`streamlab.tooling.mutants`: do the checks catch wrong solutions (``nox -s mutants``).
- :mod:`streamlab.tooling.mkdocs_hooks`: the website's hooks (navigation, benchmark tables, an
  exercise's solution once it passed).
- :mod:`streamlab.tooling.lab_launcher`: the hub and JupyterLab on the labs (``nox -s lab``).
"""
