"""The names the exactly-once sink's writers take on the broker: transactional ids and
marker consumer groups. One place, because a secured cluster grants them by prefix
(shared/ops/acls.py): a name built elsewhere could fall outside the grant.

A sink belongs to an *owner* (an app's micro-batch query, or ``<app>-realtime`` for its
Real-Time Mode dead letters) and is named ``<owner>.<query id>`` (the id kept in the
checkpoint, a UUID: no dot). Every transactional id and marker group of an owner's
sinks starts with :func:`owner_prefix`, whatever the query id.
"""

from __future__ import annotations

PREFIX = "statewise-sink."
REALTIME_SUFFIX = "-realtime"


def sink_id(owner: str, query_id: str) -> str:
    return f"{owner}.{query_id}"


def realtime_owner(app: str) -> str:
    """The owner of an app's Real-Time Mode dead-letter sink (its checkpoint's name too)."""
    return f"{app}{REALTIME_SUFFIX}"


def owner_prefix(owner: str) -> str:
    """What every transactional id and marker group of ``owner``'s sinks starts with."""
    return f"{PREFIX}{owner}."


def transactional_id(sink: str, partition: int) -> str:
    return f"{PREFIX}{sink}.p{partition}"


def marker_group(sink: str, partition: int) -> str:
    return f"{PREFIX}{sink}.p{partition}.marker"


def marker_writer(sink: str, group_id: str) -> int | None:
    """The writer whose marker group ``group_id`` is, in ``sink`` (None: not one of its)."""
    head, tail = f"{PREFIX}{sink}.p", ".marker"
    index = group_id[len(head):-len(tail)]
    if group_id.startswith(head) and group_id.endswith(tail) and index.isdigit():
        return int(index) if marker_group(sink, int(index)) == group_id else None
    return None


def owner_of(sink: str) -> str:
    """The owner part of a sink id (all of it for an id without a query id)."""
    return sink.rsplit(".", 1)[0]
