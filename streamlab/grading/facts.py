"""What Spark did with the course's own code, computed once per machine.

A prediction is graded against what Spark does when it runs the course's reference code: the
learner's answer is a constant, and running those queries again at every grading costs
seconds and says nothing new. ``spark_facts(name, compute, check=__file__)`` runs ``compute()``
the first time and keeps what it returned in ``build/facts/``, under a key made of all that
could change it: the check file that asks, every module of the course's package (where the
reference processors live), any other file it reads, the PySpark version and the session the checks run in. A change to
any of them computes the facts again; so does a kept file that cannot be read.

Only facts that do not depend on the learner's code belong here: whatever runs a learner's
function runs at every grading.
"""

from __future__ import annotations

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
    name: str, compute: Callable[[], T], *, check: str, inputs: Sequence[Path] = ()
) -> T:
    """``compute()``'s result, from ``build/facts/`` when this machine computed it before.

    ``name`` tells the facts of one check file apart (``"5.3 lives"``); ``check`` is that
    file's ``__file__``; ``inputs`` are other files ``compute`` reads (a solution notebook
    whose code it runs). The result must pickle (rows, tuples, dicts, dates do).
    """
    key = hashlib.sha256(f"{name}\0{_source_key()}".encode())
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


@functools.cache
def _source_key() -> str:
    """The course's package, the PySpark version and the checks' session, as one digest."""
    import pyspark

    from streamlab.session import CHECKS_SESSION, DEFAULT_CONF

    digest = hashlib.sha256()
    digest.update(pyspark.__version__.encode())
    digest.update(json.dumps([CHECKS_SESSION, DEFAULT_CONF], sort_keys=True).encode())
    package = REPO_ROOT / "streamlab"
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name).strip("-")
