"""A savepoint's manifest: what was saved, from where, at which batch (no Spark).

A savepoint is a folder: ``manifest.json`` and one Parquet folder per state variable,
one row per key (``keys``, ``history``) or per control record (``control``), in the
portable layout of shared/keyed/bucketed/storage/portable.py. The manifest names the app, the
batch, the watermarks, every source partition's offset after that batch, each
variable's schema (and a version hash of it) and the app's settings, whose fingerprint a
restore compares, and the query id of the checkpoint it was taken from, whose sink
writers' markers tell a restore whether output after the batch exists
(shared/keyed/savepoint/output_check.py). Nothing in it depends on the bucket count or
the state partitions.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from shared.settings import PlatformSettings

FORMAT = "statewise-savepoint"
VERSION = 1
MANIFEST_FILE = "manifest.json"
# Settings a restore is meant to change: they shape the state's storage, not its content.
LAYOUT_SETTINGS = frozenset({"state_buckets"})


class SavepointError(RuntimeError):
    """A savepoint cannot be written or restored as asked."""


@dataclass(frozen=True)
class Manifest:
    app: str
    batch_id: int
    watermark_ms: int  # the savepoint batch's watermark
    next_watermark_ms: int  # the one its next batch runs at (Spark's commit log)
    offsets: dict[str, dict[str, int]]  # topic -> partition -> next offset to read
    variables: dict[str, list[list[str]]]  # variable -> [[column, arrow type], ...]
    settings: dict[str, str]  # the app's own settings, as text
    key_count: int
    written_with: dict[str, int]  # buckets and state partitions (for the record only)
    layer_layout: int  # the bucketed layer's stored layout version
    state_version: int = 1  # the app's state version (spec.state_version); 1 before it was kept
    # The source checkpoint's query id (its sink writers' names); None in a savepoint
    # written before it was kept, or from a checkpoint whose query metadata was gone.
    source_query_id: str | None = None

    @property
    def settings_fingerprint(self) -> str:
        return fingerprint(self.settings)

    def schema_versions(self) -> dict[str, str]:
        return {name: _digest(columns) for name, columns in self.variables.items()}

    def document(self) -> str:
        body = dataclasses.asdict(self)
        body.update(format=FORMAT, version=VERSION,
                    settings_fingerprint=self.settings_fingerprint,
                    schema_versions=self.schema_versions())
        return json.dumps(body, indent=2, sort_keys=True)

    @classmethod
    def parse(cls, text: str, where: str) -> Manifest:
        body = json.loads(text)
        if body.get("format") != FORMAT or body.get("version") != VERSION:
            raise SavepointError(f"{where} is not a {FORMAT} version {VERSION} manifest "
                                 f"(format {body.get('format')!r}, version "
                                 f"{body.get('version')!r})")
        names = {f.name for f in dataclasses.fields(cls)}
        manifest = cls(**{k: v for k, v in body.items() if k in names})
        if body.get("settings_fingerprint") != manifest.settings_fingerprint:
            raise SavepointError(f"{where}: its settings do not match their fingerprint "
                                 "(edited by hand?)")
        return manifest

    def starting_offsets(self, topics: list[str]) -> str:
        """Kafka's ``startingOffsets`` JSON for ``topics`` (every partition saved)."""
        missing = [t for t in topics if t not in self.offsets]
        if missing:
            raise SavepointError(f"the savepoint holds no offsets for {missing}; it has "
                                 f"{sorted(self.offsets)}")
        return json.dumps({t: self.offsets[t] for t in topics}, sort_keys=True)

    def settings_changes(self, settings: Any) -> list[str]:
        """The app settings that differ from the savepoint's, as 'name: saved -> now'."""
        now = app_settings(settings)
        return [f"{name}: {self.settings.get(name)} -> {now.get(name)}"
                for name in sorted(set(now) | set(self.settings))
                if now.get(name) != self.settings.get(name)]


def app_settings(settings: Any) -> dict[str, str]:
    """The app's own settings (not the platform's, not the storage layout's), as text."""
    platform = {f.name for f in dataclasses.fields(PlatformSettings)}
    return {f.name: str(getattr(settings, f.name)) for f in dataclasses.fields(settings)
            if f.name not in platform and f.name not in LAYOUT_SETTINGS}


def fingerprint(settings: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def columns_of(schema: pa.Schema) -> list[list[str]]:
    return [[f.name, str(f.type)] for f in schema]


def _digest(columns: list[list[str]]) -> str:
    return hashlib.sha256(json.dumps(columns).encode()).hexdigest()[:12]


def source_offsets(offset_log_lines: list[str]) -> dict[str, dict[str, int]]:
    """Topic -> partition -> offset from a batch's offset log entry (its end offsets):
    line 1 is the log version, line 2 the batch metadata, then one line per source."""
    offsets: dict[str, dict[str, int]] = {}
    for line in offset_log_lines[2:]:
        if line.startswith("{"):
            for topic, partitions in json.loads(line).items():
                offsets.setdefault(topic, {}).update(
                    {str(p): int(o) for p, o in partitions.items()})
    return offsets
