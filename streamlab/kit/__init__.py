"""The check kit: what ``checks/`` may import from ``streamlab``.

- :mod:`streamlab.kit.heartbeat`: the course's reference heartbeat processor, a processor's
  story on a ``TwsTester``, the sentence for a handler that returns instead of yielding.

The kit sits above the grader and the solutions it loads; the grader never imports it
(``tests/test_import_direction.py``).
"""
