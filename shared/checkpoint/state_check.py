"""The state part of the checkpoint check: the files each store loads on restart.

RocksDB with changelog checkpointing rebuilds version V of a store (one per operator
and state partition, ``state/<op>/<partition>``) from its newest snapshot at or below V
(``<S>.zip``, naming SST files kept in ``SSTs/``) and the changelogs after it
(``<S+1>.changelog`` .. ``<V>.changelog``); with no snapshot, from every changelog from
version 1. Checkpoint format version 2 adds a unique id (``<v>_<id>.zip``): the version
is read before it. transformWithState keeps its operator metadata in
``state/<op>/_metadata/v2/<batch>`` and the state schemas it names in
``state/<op>/_stateSchema/<store>/``.

What is cheap to see is checked: a snapshot is read whole when small (its zip CRCs, its
SST list against ``SSTs/``), a changelog only at its end (lz4 streams end with an end
mark; a cut file does not). Damage inside a changelog is found by Spark when it replays
it (check.damage_in).
"""

from __future__ import annotations

import io
import json
import re
import zipfile
import zlib

from shared.checkpoint.damage import damaged, read_log
from shared.checkpoint.files import CheckpointFiles, Entry, UnreadableFile

_VERSIONED = re.compile(r"^(\d+)(?:_[0-9A-Za-z-]+)?\.(zip|changelog)$")
_OWN_FOLDERS = {"SSTs", "_metadata", "_stateSchema"}
# An lz4-java block stream (Spark's default state codec) ends with an empty block: the
# magic, a token byte, then compressed length, length and checksum, all zero.
_LZ4_MAGIC = b"LZ4Block"
_LZ4_END = 21
SNAPSHOT_READ_LIMIT = 64 << 20  # bigger snapshots: only their end is checked
_ZIP_END = b"PK\x05\x06"


def check_state(files: CheckpointFiles, version: int, deep: bool = False) -> int:
    """Check every store's files for ``version``; returns how many stores were checked.
    ``deep``: also decompress every changelog read (after Spark failed to load state)."""
    operators = files.listing("state") or {}
    checked = 0
    for op in sorted((n for n, e in operators.items() if n.isdigit() and e.is_dir), key=int):
        partitions = _operator_partitions(files, f"state/{op}")
        if version == 0:
            continue  # batch 0 starts from empty state
        for partition in _partition_ids(files, f"state/{op}", partitions):
            for store in _stores(files, f"state/{op}/{partition}"):
                check_store(files, store, version, deep)
                checked += 1
    return checked


def _partition_ids(files: CheckpointFiles, op: str, partitions: int | None) -> list[int]:
    """The operator's state partitions: as many as its metadata says (an aggregation
    without keys has one, whatever the shuffle partitions), else the folders found."""
    listing = files.listing(op) or {}
    found = sorted(int(n) for n, e in listing.items() if n.isdigit() and e.is_dir)
    expected = list(range(partitions)) if partitions else found
    for partition in expected:
        if partition not in found:
            raise damaged(files, f"{op}/{partition}",
                          "missing: the state partition's folder is gone")
    return expected


def _stores(files: CheckpointFiles, partition: str) -> list[str]:
    """The partition's store folders: itself (one store), or one per store name (a
    stream-stream join keeps several)."""
    listing = files.listing(partition) or {}
    if any(_VERSIONED.match(n) for n in listing) or not listing:
        return [partition]
    return [f"{partition}/{n}" for n, e in sorted(listing.items())
            if e.is_dir and n not in _OWN_FOLDERS]


def check_store(files: CheckpointFiles, store: str, version: int, deep: bool = False
                ) -> None:
    listing = files.listing(store) or {}
    snapshots: dict[int, Entry] = {}
    changelogs: dict[int, Entry] = {}
    for name, entry in listing.items():
        match = _VERSIONED.match(name)
        if match and not entry.is_dir:
            kind = snapshots if match.group(2) == "zip" else changelogs
            kind[int(match.group(1))] = entry
    base = max((v for v in snapshots if v <= version), default=0)
    missing = [v for v in range(base + 1, version + 1) if v not in changelogs]
    if missing:
        _missing(files, store, version, max(missing), snapshots.get(base), changelogs)
    if base:
        _check_snapshot(files, store, snapshots[base])
    for v in range(base + 1, version + 1):
        _check_changelog(files, f"{store}/{changelogs[v].name}", changelogs[v], deep)


def _missing(files: CheckpointFiles, store: str, version: int, gone: int,
             base: Entry | None, changelogs: dict[int, Entry]) -> None:
    """Version ``gone`` breaks the chain down from ``version``: its changelog is missing
    and no snapshot from it on replaces it. When no changelog at or below it is left
    either, retention deleted them after a snapshot at ``gone`` was made: that is lost."""
    start = f"snapshot {base.name}" if base else "empty state"
    if gone > 0 and not any(v <= gone for v in changelogs):
        raise damaged(files, f"{store}/{gone}.zip",
                      f"missing: version {version} of this store needs it (its changelogs "
                      f"start at {gone + 1}; the newest snapshot left is {start})")
    first = (0 if base is None else _version(base)) + 1
    raise damaged(files, f"{store}/{gone}.changelog",
                  f"missing, and no snapshot {gone}.zip (or later, up to {version}) "
                  f"replaces it: version {version} of this store is {start} plus the "
                  f"changelogs {first} to {version}")


def _version(entry: Entry) -> int:
    return int(entry.name.split(".")[0].split("_")[0])


def _check_changelog(files: CheckpointFiles, path: str, entry: Entry, deep: bool) -> None:
    if entry.size == 0:
        raise damaged(files, path, "is empty: truncated")
    if deep:
        try:
            files.decompress(path)
        except UnreadableFile as error:
            raise damaged(files, path, f"its content cannot be decompressed ({error}): "
                                       "corrupt") from None
    end = _read_tail(files, path, entry, _LZ4_END)
    if end[:8] == _LZ4_MAGIC and end[9:] == bytes(12):
        return
    try:
        head = files.read(path, count=min(entry.size, len(_LZ4_MAGIC)))
    except UnreadableFile as error:
        raise damaged(files, path, f"cannot be read ({error})") from None
    if head == _LZ4_MAGIC:  # another codec's stream has no end mark to look for
        raise damaged(files, path, "does not end with its lz4 end mark: truncated")


def _read_tail(files: CheckpointFiles, path: str, entry: Entry, count: int) -> bytes:
    try:
        return files.tail(path, entry.size, count)
    except UnreadableFile as error:
        raise damaged(files, path, f"cannot be read ({error})") from None


def _check_snapshot(files: CheckpointFiles, store: str, entry: Entry) -> None:
    path = f"{store}/{entry.name}"
    if entry.size < len(_ZIP_END):
        raise damaged(files, path, "is empty or cut short: truncated")
    if entry.size > SNAPSHOT_READ_LIMIT:
        if _ZIP_END not in _read_tail(files, path, entry, 22):
            raise damaged(files, path, "does not end like a zip file: truncated")
        return
    try:
        archive = zipfile.ZipFile(io.BytesIO(files.read(path)))
        bad = archive.testzip()
        text = archive.read("metadata").decode("utf-8")
    except UnreadableFile as error:
        raise damaged(files, path, f"cannot be read ({error})") from None
    except (zipfile.BadZipFile, zlib.error, KeyError, ValueError, EOFError,
            NotImplementedError) as error:
        raise damaged(files, path, f"is not a readable snapshot ({error}): corrupt") \
            from None
    if bad is not None:
        raise damaged(files, path, f"its entry {bad} fails its CRC: corrupt")
    _check_ssts(files, store, path, text)


def _check_ssts(files: CheckpointFiles, store: str, path: str, text: str) -> None:
    lines = text.split("\n", 1)
    try:
        metadata = json.loads(lines[1]) if len(lines) == 2 else None
    except ValueError:
        metadata = None
    if not isinstance(metadata, dict):
        raise damaged(files, path, "its metadata entry is not JSON: corrupt")
    ssts = files.listing(f"{store}/SSTs") or {}
    for sst in metadata.get("sstFiles", []):
        name, size = sst.get("dfsSstFileName"), sst.get("sizeBytes")
        if name not in ssts:
            raise damaged(files, f"{store}/SSTs/{name}", f"missing: {path} needs it")
        if size is not None and ssts[name].size != size:
            raise damaged(files, f"{store}/SSTs/{name}",
                          f"has {ssts[name].size} bytes, {path} says {size}: truncated")


def _operator_partitions(files: CheckpointFiles, op: str) -> int | None:
    """The operator's metadata parses (transformWithState's newest ``_metadata/v2/<batch>``
    or other operators' ``_metadata/metadata``) and the state schema files it names are
    there (looked up by name: the paths in it are absolute). Returns its partition count,
    None when it keeps no metadata."""
    versions = files.listing(f"{op}/_metadata/v2") or {}
    ids = [int(n) for n, e in versions.items() if n.isdigit() and not e.is_dir]
    if ids:
        path = f"{op}/_metadata/v2/{max(ids)}"
        metadata = read_log(files, path)[0]
        _check_schemas(files, op, path, metadata)
    elif "metadata" in (files.listing(f"{op}/_metadata") or {}):
        metadata = read_log(files, f"{op}/_metadata/metadata")[0]
    else:
        return None
    counts = [s.get("numPartitions") for s in metadata.get("stateStoreInfo", [])]
    return max((c for c in counts if isinstance(c, int)), default=None)


def _check_schemas(files: CheckpointFiles, op: str, path: str, metadata: dict) -> None:
    for store in metadata.get("stateStoreInfo", []):
        folder = f"{op}/_stateSchema/{store.get('storeName', 'default')}"
        schemas = files.listing(folder) or {}
        for schema_path in store.get("stateSchemaFilePaths", []):
            name = schema_path.rstrip("/").rsplit("/", 1)[-1]
            if name not in schemas or schemas[name].size == 0:
                raise damaged(files, f"{folder}/{name}",
                              f"{'empty' if name in schemas else 'missing'}: {path} "
                              "names it as the state's schema")
