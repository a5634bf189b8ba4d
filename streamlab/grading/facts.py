"""What Spark did with the course's own code, computed once per machine.

A prediction is graded against what Spark does when it runs the course's reference code: the
learner's answer is a constant, and running those queries again at every grading costs
seconds and says nothing new. ``spark_facts(name, compute, check=__file__)`` runs ``compute()``
the first time and keeps what it returned in ``build/facts/``, under a key made of all that
could change it: the check file that asks, every module of the course's package and every
solution notebook (where the reference processors live), any other file it reads, any value
it is given (a story or a delay the notebook sets), the PySpark version and the session the
checks run in. A change to any of them computes the facts again; so does a kept file that
cannot be read.

Only facts that do not depend on the learner's code belong here: whatever runs a learner's
function runs at every grading.
"""

from __future__ import annotations

import datetime
import decimal
import functools
import hashlib
import json
import os
import pickle
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from streamlab.paths import BUILD_DIR, REPO_ROOT

T = TypeVar("T")

#: Where the facts are kept, one file per name and key.
FACTS_DIR = BUILD_DIR / "facts"


def spark_facts(
    name: str,
    compute: Callable[[], T],
    *,
    check: str,
    inputs: Sequence[Path] = (),
    given: object = None,
) -> T:
    """``compute()``'s result, from ``build/facts/`` when this machine computed it before.

    ``name`` tells the facts of one check file apart (``"5.3 lives"``); ``check`` is that
    file's ``__file__``; ``inputs`` are other files ``compute`` reads (a solution notebook
    whose code it runs); ``given`` holds the values ``compute`` takes from the notebook (its
    story, its delays): plain data only (numbers, strings, bytes, dates, and lists, tuples,
    dicts and sets of them), whose ``repr`` says all they hold. The result must pickle (rows,
    tuples, dicts, dates do).
    """
    key = hashlib.sha256(f"{name}\0{_course_key(REPO_ROOT)}\0{_plain(given)}".encode())
    for path in (Path(check), *inputs):
        key.update(Path(path).read_bytes())
    path = FACTS_DIR / f"{_slug(name)}-{key.hexdigest()[:20]}.pickle"
    try:
        with path.open("rb") as kept:
            return pickle.load(kept)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError):
        pass
    result = compute()
    FACTS_DIR.mkdir(parents=True, exist_ok=True)
    # Written aside and moved in place: two gradings at once never read half a file.
    handle, scratch = tempfile.mkstemp(dir=FACTS_DIR, suffix=".part")
    with os.fdopen(handle, "wb") as out:
        pickle.dump(result, out)
    os.replace(scratch, path)
    return result


#: The types whose ``repr`` says all a value holds.
_PLAIN: tuple[type, ...] = (type(None), bool, int, float, str, bytes, decimal.Decimal)
_PLAIN += (datetime.datetime, datetime.date, datetime.time, datetime.timedelta)


def _plain(value: object) -> str:
    """``repr(value)`` for plain data, which says all it holds; a ``TypeError`` otherwise."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_plain(k)}: {_plain(v)}" for k, v in value.items()) + "}"
    if isinstance(value, set | frozenset):
        return "{" + ", ".join(sorted(_plain(v) for v in value)) + "}"
    if isinstance(value, list | tuple):
        # A Row is a tuple; its fields' names are part of what it holds.
        names = getattr(value, "__fields__", None)
        inner = ", ".join(_plain(v) for v in value)
        return f"{type(value).__name__}({names!r}: {inner})" if names else f"[{inner}]"
    if isinstance(value, _PLAIN):
        return repr(value)
    raise TypeError(
        f"spark_facts(given=...) takes plain data, not a {type(value).__name__} object: its "
        "repr may not say all it holds (a course bug)"
    )


@functools.cache
def _course_key(root: Path) -> str:
    """The course's package, the solution notebooks that its reference code is loaded from
    (``streamlab.solutions``), the PySpark version and the checks' session, as one digest."""
    import pyspark

    from streamlab.session import CHECKS_SESSION, DEFAULT_CONF

    digest = hashlib.sha256()
    digest.update(pyspark.__version__.encode())
    digest.update(json.dumps([CHECKS_SESSION, DEFAULT_CONF], sort_keys=True).encode())
    solutions = sorted((root / "solutions").glob("*/*.ipynb"))
    for path in [*sorted((root / "streamlab").rglob("*.py")), *solutions]:
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name).strip("-")
