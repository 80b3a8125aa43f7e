"""Decoded segments kept in the Python worker between batches, addressed by content.

Spark reuses its Python workers across tasks, so a worker that served a bucket in one
batch usually serves it again. A segment is stored with the hash of its blob, and the
bucket's small header names the hashes of its current segments: when the worker holds a
segment with that hash it needs neither the blob (a state call moving it from RocksDB)
nor its decoding. Entries are immutable and named by what they hold, so a stale entry
can only go unused, never be read as the current state: a replayed batch, another
checkpoint or another worker simply miss.
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from typing import Any

_BUDGET_VAR = "STATEWISE_STATE_CACHE_MB"
_DEFAULT_BUDGET_MB = 1024


def content_id(*blobs: bytes | None) -> int:
    """A 63-bit id of the blobs' bytes (fits a Spark long)."""
    digest = hashlib.blake2b(digest_size=8)
    for blob in blobs:
        digest.update(b"\x00" if blob is None else len(blob).to_bytes(8, "little") + blob)
    return int.from_bytes(digest.digest(), "little") >> 1


class SegmentCache:
    """Least recently used entries up to a byte budget (``STATEWISE_STATE_CACHE_MB``)."""

    def __init__(self, budget_bytes: int | None = None) -> None:
        if budget_bytes is None:
            budget_bytes = int(os.environ.get(_BUDGET_VAR, _DEFAULT_BUDGET_MB)) * 1024 * 1024
        self.budget_bytes = budget_bytes
        # (kind, content id) -> (decoded segment, its weight, its blob's stored bytes)
        self._entries: OrderedDict[tuple[str, int], tuple[Any, int, int | None]] = OrderedDict()
        self._bytes = 0
        self.hits = self.misses = 0

    def get(self, kind: str, ident: int) -> Any | None:
        entry = self._entries.get((kind, ident))
        if entry is None:
            self.misses += 1
            return None
        self._entries.move_to_end((kind, ident))
        self.hits += 1
        return entry[0]

    def put(self, kind: str, ident: int, value: Any, size_bytes: int,
            blob_bytes: int | None = None) -> None:
        key = (kind, ident)
        if key in self._entries:
            self._entries.move_to_end(key)
            return
        self._entries[key] = (value, size_bytes, blob_bytes)
        self._bytes += size_bytes
        while self._bytes > self.budget_bytes and len(self._entries) > 1:
            _, (_, dropped, _) = self._entries.popitem(last=False)
            self._bytes -= dropped

    def blob_bytes(self, kind: str, ident: int) -> int | None:
        """The stored size of a cached segment's blob (None: not cached or not known)."""
        entry = self._entries.get((kind, ident))
        return None if entry is None else entry[2]

    def clear(self) -> None:
        self._entries.clear()
        self._bytes = 0


SEGMENTS = SegmentCache()  # one per Python worker process
