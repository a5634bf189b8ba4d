"""Spark's error classes a learner of this course meets, and what each means here.

Spark names every error it raises with a class (``[STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE]``),
and its message says which rule was broken. :data:`TAUGHT` adds, for the classes this course
teaches, one sentence of what the rule means in the course's terms and the lab and section that
show it. :func:`explain` finds that sentence for any error: the grader adds it to a check's
message, and so does a notebook cell that raises (``%load_ext streamlab``).

``tests/test_spark_errors.py`` provokes every class listed here on real Spark, so an upgrade
that renames one fails the course's tests; ``site/spark-errors.md`` is the same table.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

from streamlab import exercise_stops


@dataclass(frozen=True)
class Taught:
    """An error class, what it means in this course, and where the course shows it."""

    condition: str
    meaning: str
    lab: str
    section: str
    #: The prediction whose answer this class tells (the class is its outcome): the site's
    #: table folds the row away until that exercise passes.
    settles: str = ""

    @property
    def where(self) -> str:
        number, _, title = self.section.partition(". ")
        return f"lab {self.lab}, section {number} ({title})"

    def sentence(self) -> str:
        return f"In this course: {self.meaning} See {self.where}."


TAUGHT: tuple[Taught, ...] = (
    Taught(
        "UNRESOLVED_COLUMN",
        "the DataFrame has no column of that name at this point of the query: a select or an "
        "aggregation keeps only the columns it names, and Spark lists the nearest names it has. "
        "Case does not count in a column's name (`MACHINE_NAME` finds `machine_name`) unless "
        "`spark.sql.caseSensitive` is set to true.",
        "01",
        "2. Parse the body",
    ),
    Taught(
        "WRITE_STREAM_NOT_ALLOWED",
        "`writeStream` starts a streaming query, so it needs a DataFrame read with "
        "`spark.readStream`; a DataFrame from `spark.read` or `createDataFrame` is written "
        "once with `.write`.",
        "00",
        "2. A first stream",
    ),
    Taught(
        "STREAMING_OUTPUT_MODE.INVALID",
        "a streaming query writes in one of three output modes, append, update or complete; "
        "any other name is refused.",
        "02",
        "4. Output modes",
    ),
    Taught(
        "STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION",
        "the output mode does not fit the query: append writes each row once, so an "
        "aggregation in append mode needs a watermark to know when a group is final, and "
        "complete rewrites the whole result, so it needs an aggregation to rewrite.",
        "02",
        "4. Output modes",
    ),
    Taught(
        "NON_TIME_WINDOW_NOT_SUPPORTED_IN_STREAMING",
        "a stream has no end to rank or number rows over, so window functions such as "
        "`row_number().over(...)` are refused; a stream groups rows by event-time windows "
        "(`F.window`), or keeps what it needs per key in state.",
        "02",
        "2. Windows",
    ),
    Taught(
        "STDS_COMMITTED_BATCH_UNAVAILABLE",
        "the state reader reads the state as of a committed batch, and the checkpoint has no "
        "commit for the batch asked (the query has not run that far, or the batch failed).",
        "05",
        "5. Reading the state store",
    ),
    Taught(
        "STDS_INVALID_OPTION_VALUE",
        "an option of the state reader (`batchId`, `operatorId`, `storeName`, `joinSide`, "
        "`stateVarName`) has a value it cannot use, such as a negative batch.",
        "05",
        "5. Reading the state store",
    ),
    Taught(
        "STDS_FAILED_TO_READ_STATE_SCHEMA",
        "the state reader found no state schema for the operator asked: the query at that "
        "checkpoint keeps no state there (a stateless query has nothing to read), or the "
        "`operatorId` is not one of its stateful operators.",
        "05",
        "5. Reading the state store",
    ),
    Taught(
        "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE",
        "the restarted query keeps a state value of a schema the checkpoint's state does not "
        "accept; Spark's message shows both schemas. Field names are not part of the check: an "
        "aggregation whose column is renamed (`beats` to `heartbeats`) restarts without an "
        "error and counts on from the old values.",
        "05",
        "8. What a checkpoint pins",
        settles="5.9",
    ),
    Taught(
        "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE",
        "the restarted query's grouping key has another number or type of fields than the state "
        "in its checkpoint. Names are not compared, so a regrouping by another column of the "
        'same type is not caught: `groupBy("site")` restarted on the checkpoint of '
        '`groupBy("machine_name")` runs without an error on the old state, its machine names '
        "read as sites. A new grouping needs a new checkpoint.",
        "05",
        "8. What a checkpoint pins",
    ),
    Taught(
        "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA",
        "the restarted query's stateful operators are not those its checkpoint's state "
        "metadata lists (Spark's message shows both lists): the state in a checkpoint is read "
        "only by the operators that wrote it.",
        "10",
        "1. What a checkpoint pins",
        settles="10.1",
    ),
    Taught(
        "STREAMING_QUERY_EVOLUTION_ERROR.UNNAMED_STREAMING_SOURCES_WITH_ENFORCEMENT",
        "with named sources switched on, every source of the query needs a name "
        "(`readStream.name(...)`), under which the checkpoint records its offsets.",
        "10",
        "1. What a checkpoint pins",
        settles="10.1",
    ),
    Taught(
        "STREAMING_QUERY_EVOLUTION_ERROR.CANNOT_ENABLE_ON_EXISTING_CHECKPOINT",
        "named sources are switched on when a checkpoint starts, not later: a checkpoint that "
        "began without them cannot take them.",
        "10",
        "1. What a checkpoint pins",
        settles="10.1",
    ),
    Taught(
        "STATE_STORE_INVALID_VALUE_SCHEMA_EVOLUTION",
        "under the Avro encoding, a restarted `transformWithState` query declares a state "
        "variable whose stored values cannot be read into its new schema by Avro's rules of "
        "schema resolution (the link in Spark's message), such as a `BIGINT` narrowed to `INT`.",
        "10",
        "3. State schema evolution",
        settles="5.9",
    ),
    Taught(
        "STATEFUL_PROCESSOR_INCORRECT_TIME_MODE_TO_ASSIGN_TTL",
        "a state variable with a TTL expires on the processing-time clock, so the query's "
        "`timeMode` must be ProcessingTime, not None.",
        "10",
        "2. ListState and TTL: the gaps between heartbeats",
    ),
    Taught(
        "ILLEGAL_STATE_STORE_VALUE.EMPTY_LIST_VALUE",
        "a ListState cannot hold an empty list: it is emptied with `clear()`, not by putting `[]`.",
        "10",
        "2. ListState and TTL: the gaps between heartbeats",
    ),
    Taught(
        "STATEFUL_PROCESSOR_CANNOT_PERFORM_OPERATION_WITH_INVALID_TIME_MODE",
        "timers run on a clock, so registering one needs `timeMode` ProcessingTime or "
        "EventTime; with None the processor has no clock.",
        "04",
        "3. A StatefulProcessor",
    ),
    Taught(
        "STATEFUL_PROCESSOR_CANNOT_PERFORM_OPERATION_WITH_INVALID_HANDLE_STATE",
        "a processor declares its state variables in `init`, once; the handle refuses a new "
        "state variable once rows are being handled.",
        "04",
        "3. A StatefulProcessor",
    ),
    Taught(
        "PYTHON_EXCEPTION",
        "your Python code raised inside a Spark task (a processor, a UDF, `foreachBatch`): "
        "the last Python error at the end of Spark's message is yours, with its line.",
        "04",
        "3. A StatefulProcessor",
    ),
    Taught(
        "STATE_REPARTITION_INVALID_CHECKPOINT",
        "offline repartitioning refuses a checkpoint it cannot work from: the subclass after "
        "the dot, and Spark's message, name the reason.",
        "10",
        "5. Repartitioning offline",
    ),
    Taught(
        "STATE_REPARTITION_INVALID_PARAMETER",
        "offline repartitioning needs a checkpoint folder and a partition count above zero.",
        "10",
        "5. Repartitioning offline",
    ),
    Taught(
        "STREAMING_REAL_TIME_MODE.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST",
        "a real-time trigger runs only the operators and sinks Spark lists for it; the query "
        "uses another, so it is refused before it starts.",
        "07",
        "5. Alerts at once",
    ),
    Taught(
        "FAILED_READ_FILE.FILE_NOT_EXIST",
        "a file a query had listed is gone: a static DataFrame read from files keeps the list "
        "taken when it was defined, so a table overwritten under a running query breaks it.",
        "09",
        "1. Which site? A table beside the stream",
    ),
)

#: Classes that only wrap another: the one inside says why.
WRAPPERS = frozenset({"STREAM_FAILED", "FOREACH_BATCH_USER_FUNCTION_ERROR"})

_CLASS = re.compile(r"\[([A-Z][A-Z0-9_]{4,}(?:\.[A-Z0-9_]+)*)\]")


def conditions(error: BaseException) -> list[str]:
    """The error classes named in ``error`` and its causes, outermost first."""
    found: list[str] = []
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        own = getattr(error, "getCondition", None)
        try:
            condition = own() if callable(own) else None
        except Exception:  # a half-built Spark error: its text still names the class
            condition = None
        for name in ([condition] if condition else []) + _CLASS.findall(str(error)):
            if name not in found:
                found.append(name)
        error = error.__cause__ or error.__context__
    return found


_BY_CONDITION = {t.condition: t for t in TAUGHT}


def taught(condition: str) -> Taught | None:
    """The entry for ``condition``: the class itself, else its parent (``A`` for ``A.B``)."""
    return _BY_CONDITION.get(condition) or _BY_CONDITION.get(condition.split(".")[0])


def taught_for(error: BaseException) -> Taught | None:
    """The entry for the innermost class the course teaches in ``error``, if any.

    Spark wraps a query's failure (``[STREAM_FAILED] ... [PYTHON_EXCEPTION] ... [CLASS]``):
    the innermost class says why, so it is looked up first.
    """
    for condition in reversed(conditions(error)):
        if condition not in WRAPPERS and (found := taught(condition)):
            return found
    return None


def explain(error: BaseException) -> str | None:
    """One sentence on what ``error`` means in this course and where it is shown, or None."""
    found = taught_for(error)
    return found.sentence() if found else None


def install(shell) -> None:
    """In a notebook, a cell that raises a Spark error the course teaches shows Spark's
    traceback as always, then the sentence of :func:`explain` under it; a stop at an exercise
    not written yet shows one sentence instead (:mod:`streamlab.exercise_stops`). Once per shell."""
    if getattr(shell, "_streamlab_explains", False):
        return
    shell._streamlab_explains = True

    def show(self, etype, value, tb, tb_offset=None):
        stopped = exercise_stops.sentence(value)
        if stopped:  # an exercise not written yet: one sentence, no traceback
            sys.stderr.write(stopped)
            sys.stderr.flush()
            return
        self.showtraceback((etype, value, tb), tb_offset=tb_offset)
        explained = explain(value)
        if explained:
            print(explained)

    shell.set_custom_exc((Exception,), show)


def markdown_table() -> str:
    """:data:`TAUGHT` as the site's table, in the order of the labs; the classes that tell a
    prediction's outcome follow in a table of their own per prediction, each in a fold
    (``<!-- after N.M -->``) that opens once it passes."""
    head = ["| error class | what it means in this course | where |", "|---|---|---|"]
    tables: dict[str, list[str]] = {}
    for t in sorted(TAUGHT, key=lambda t: (t.lab, t.section, t.condition)):
        meaning = t.meaning[0].upper() + t.meaning[1:]
        row = f"| `{t.condition}` | {meaning} | {t.where[0].upper()}{t.where[1:]} |"
        tables.setdefault(t.settles, list(head)).append(row)
    parts = ["\n".join(tables.pop("", head))]
    for exercise in sorted(tables, key=lambda e: tuple(int(n) for n in e.split("."))):
        parts.append(
            f"<!-- after {exercise} -->\nThe classes that are the outcome of exercise "
            f"{exercise}'s prediction:\n\n" + "\n".join(tables[exercise]) + "\n<!-- /after -->"
        )
    return "\n\n".join(parts) + "\n"


@dataclass(frozen=True)
class Cause:
    """The innermost reason of an error: its error class (``STATE_STORE_...``) or, when it has
    none, its exception's name (``TypeError``), and its first line."""

    name: str
    line: str

    def __str__(self) -> str:
        return self.line if self.line.startswith(self.name) else f"{self.name}: {self.line}"


_CAUSED_BY = re.compile(r"^\s*Caused by: ([\w.$]+)(?:: (.*))?$")
_PYTHON_LINE = re.compile(r"^([A-Z]\w*(?:Error|Exception|Exit|Interrupt)): (.*)$")


def deepest_cause(error: BaseException) -> Cause:
    """The innermost reason of ``error``, through Python's chain of causes, PySpark's converted
    JVM causes (``_cause``) and the JVM's own ``Caused by:`` lines; wrapper classes
    (``STREAM_FAILED``) are passed through, and a Python worker's error is its last line."""
    found = [
        _cause_of(str(e), type(e).__name__, getattr(e, "getCondition", None)) for e in _chain(error)
    ]
    for e in _chain(error):
        for line in str(getattr(e, "_stackTrace", "") or "").splitlines():
            match = _CAUSED_BY.match(line)
            if match:
                found.append(_cause_of(match.group(2) or "", match.group(1).rsplit(".", 1)[-1]))
    named = [c for c in found if c.name.isupper() and c.name not in WRAPPERS]
    # Py4J's errors only carry the JVM's: never the cause themselves while another is known.
    own = [c for c in found if not c.name.startswith("Py4J")]
    return (named or own or found)[-1]


def _chain(error: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    stack: list[BaseException | None] = [error]
    while stack:
        current = stack.pop(0)
        if current is None or any(current is s for s in seen):
            continue
        seen.append(current)
        converted = getattr(current, "_cause", None)
        # `raise converted from None` (PySpark's) hides the Py4J error it replaced: so here.
        hidden = current.__suppress_context__ and current.__cause__ is None
        stack += [current.__cause__ or (None if hidden else current.__context__)]
        stack += [converted] if isinstance(converted, BaseException) else []
    return seen


def _cause_of(text: str, exception: str, condition=None) -> Cause:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    python = [m for m in map(_PYTHON_LINE.match, lines) if m and not m.group(1).startswith("Py4J")]
    classes = [c for c in _CLASS.findall(text) if c not in WRAPPERS]
    if "PYTHON_EXCEPTION" in classes and python:
        return Cause(python[-1].group(1), python[-1].group(2)[:300])
    try:
        own = condition() if callable(condition) else None
    except Exception:  # a half-built Spark error: its text still names the class
        own = None
    name = classes[-1] if classes else (own if own and own not in WRAPPERS else exception)
    first = next((line for line in lines if name in line), lines[0] if lines else "")
    return Cause(name, first[:300])
