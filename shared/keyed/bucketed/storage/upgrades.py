"""State versions of stored key tables: written with every table, upgraded on read.

A processor whose per-key state gains a field declares ``state_version`` one higher
and a :class:`~shared.keyed.bucketed.api.spec.StateUpgrade` that fills the field for keys
stored before it (say a running mean from the running sum and count it kept). Each
stored key table carries the version it was written at in its Arrow schema metadata
(tables written before versions existed read as version 1); reading one applies the
upgrades after its version, once per segment (the worker caches the upgraded segment),
and the next write of the segment stores it at the new version. The bucket's Spark
state (header and segment blobs) keeps its schema, so no savepoint is needed.
docs/operations.md ("State upgrades") says which changes need one.
"""

from __future__ import annotations

import pyarrow as pa

from shared.keyed.bucketed.api.spec import BucketedSpec, BucketedSpecError
from shared.keyed.bucketed.storage.tables import conform, open_ipc

VERSION_KEY = b"statewise.state_version"


class StateVersionError(BucketedSpecError):
    """Stored state is of a newer version than this code reads."""


def versioned(table: pa.Table, spec: BucketedSpec) -> pa.Table:
    """``table`` labelled with the spec's state version (metadata only: no copy)."""
    return table.replace_schema_metadata({VERSION_KEY: str(spec.state_version).encode()})


def stored_version(schema: pa.Schema) -> int:
    return int((schema.metadata or {}).get(VERSION_KEY, b"1"))


def read_keys(blob: bytes, schema: pa.Schema, spec: BucketedSpec) -> pa.Table:
    """A stored key table at the spec's state version, conformed to ``schema``."""
    table = open_ipc(blob)
    version = stored_version(table.schema)
    if version > spec.state_version:
        raise StateVersionError(
            f"the state was written at state version {version}, newer than this code's "
            f"{spec.state_version}: run the newer code, or restore a savepoint taken with "
            "this version")
    return upgraded(table, schema, spec, version)


def upgraded(table: pa.Table, schema: pa.Schema, spec: BucketedSpec, version: int
             ) -> pa.Table:
    """``table``, written at state ``version``, conformed to ``schema`` with the spec's
    upgrades after that version applied (stored segments and savepoint rows alike)."""
    table = conform(table, schema)
    for upgrade in sorted(spec.upgrades, key=lambda u: u.version):
        if upgrade.version > version:
            table = conform(upgrade.fill(table), schema)
    return table
