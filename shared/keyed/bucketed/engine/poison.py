"""Records that make the app's own logic throw go to the dead-letter topic, the rest of the
call goes on (issue 15: "a record that makes the app's own logic throw").

Without this, one such record fails its task; Spark retries the task, the query fails,
and every restart meets the same record again: a crash loop. When a call with rows
raises, the call's rows are run again, in the order the processor sees them, to find the
shortest prefix that raises; its last row is set aside with the exception as its reason,
and the call runs again without it, until it passes. Each record set aside costs about
log2(rows) runs of the call; both the search and its outcome are deterministic, so a
replay of the batch sets the same records aside.

Not set aside (the exception propagates, as before):
- an error of the layer's contract (BucketedSpecError): the app's code is wrong for
  every record, and its message says how;
- a call that raises without any row (its timer, or its stored state alone): no record
  to blame;
- more than :data:`MAX_PER_CALL` records in one call: a fault of the logic, not of a few
  records, which a dead-letter topic filling up would only hide.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pandas as pd

from shared.keyed.bucketed.api.spec import REJECT_COLUMN, BucketedSpec, BucketedSpecError
from shared.keyed.bucketed.engine.core import sort_rows

MAX_PER_CALL = 16
T = TypeVar("T")


def reason(error: BaseException) -> str:
    """The dead-letter reason of a record the app's logic raised on."""
    text = str(error).strip().splitlines()[0][:300] if str(error).strip() else ""
    return f"the app's logic raised {type(error).__name__}" + (f": {text}" if text else "")


def run_setting_aside(run: Callable[[pd.DataFrame | None], T], rows: pd.DataFrame | None,
                      spec: BucketedSpec) -> tuple[T, pd.DataFrame | None, pd.DataFrame | None]:
    """(``run``'s result, the rows it ran on, the rows set aside with their reason in
    ``REJECT_COLUMN``, or None). ``run(rows)`` is the call on those rows; it must not
    change anything it is given (the layer's calls work on what they gather)."""
    try:
        return run(rows), rows, None
    except BucketedSpecError:
        raise
    except Exception as error:
        if rows is None or not len(rows):
            raise
        first_error = error
    kept = sort_rows(rows, spec)
    aside: list[pd.DataFrame] = []
    error = first_error
    while True:
        if len(aside) == MAX_PER_CALL:
            raise RuntimeError(
                f"the app's logic raised on {MAX_PER_CALL} records of one call; not "
                "setting more aside (a fault of the logic, not of a few records)") from error
        length, raised = _shortest_raising_prefix(run, kept, error)
        poisoned = kept.iloc[[length - 1]].copy()
        poisoned[REJECT_COLUMN] = reason(raised)
        aside.append(poisoned)
        kept = kept.drop(index=kept.index[length - 1]).reset_index(drop=True)
        remaining = kept if len(kept) else None
        try:
            return run(remaining), remaining, pd.concat(aside, ignore_index=True)
        except BucketedSpecError:
            raise
        except Exception as again:  # another record of the call raises too
            if remaining is None:
                raise
            error = again


def _shortest_raising_prefix(run: Callable, rows: pd.DataFrame, error: Exception
                             ) -> tuple[int, Exception]:
    """(the length of the shortest prefix of ``rows`` whose call raises, what it raised);
    the call on all of them raised ``error``. Re-raises ``error`` when the call raises
    even without rows: the state, not a record, is at fault."""
    if _raised(run, None) is not None:
        raise error
    low, high, raised = 1, len(rows), error  # the call on rows[:high] raises `raised`
    while low < high:
        middle = (low + high) // 2
        found = _raised(run, rows.iloc[:middle])
        if found is not None:
            high, raised = middle, found
        else:
            low = middle + 1
    return high, raised


def _raised(run: Callable, rows: pd.DataFrame | None) -> Exception | None:
    try:
        run(rows if rows is None or len(rows) else None)
    except BucketedSpecError:
        raise
    except Exception as error:
        return error
    return None
