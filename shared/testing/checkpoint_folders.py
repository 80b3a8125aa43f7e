"""Checkpoint folders made by hand, shaped like the ones Spark 4.3 writes for a
transformWithState query on RocksDB with changelog checkpointing (see
shared/checkpoint/state_check.py), for tests of the checkpoint check without
Spark; and the damage the tests do to a checkpoint, crafted or real."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

SST = "000008-00000000-0000-0000-0000-000000000000.sst"
SCHEMA = "0_11111111-1111-1111-1111-111111111111"
LZ4_END = b"LZ4Block" + bytes([0x15]) + bytes(12)


def lz4_like(payload: bytes) -> bytes:
    """Framed like an lz4-java block stream (one raw block, then the end mark); the
    check looks at the frame only."""
    size = len(payload).to_bytes(4, "little")
    return b"LZ4Block" + bytes([0x10]) + size + size + bytes(4) + payload + LZ4_END


def snapshot_zip(sst_size: int) -> bytes:
    metadata = {"sstFiles": [{"localFileName": "000008.sst", "dfsSstFileName": SST,
                              "sizeBytes": sst_size}], "numKeys": 3}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("metadata", "v1\n" + json.dumps(metadata))
        archive.writestr("CURRENT", "MANIFEST-000005\n")
    return buffer.getvalue()


def write_checkpoint(root: Path, *, batches: int = 4, partitions: int = 2,
                     snapshot: int = 2, committed: int | None = None,
                     first_changelog: int = 1) -> Path:
    """Batches 0..batches-1 planned, 0..committed committed (default: all); per
    partition a snapshot at ``snapshot`` (0: none) and changelogs from
    ``first_changelog`` to the newest version."""
    committed = batches - 1 if committed is None else committed
    root.mkdir(parents=True)
    (root / "metadata").write_text(json.dumps({"id": "0b7c-query"}))
    for log_name, last, line in (
            ("offsets", batches - 1,
             {"batchWatermarkMs": 0, "batchTimestampMs": 1,
              "conf": {"spark.sql.shuffle.partitions": str(partitions)}}),
            ("commits", committed, {"nextBatchWatermarkMs": 0})):
        (root / log_name).mkdir()
        for batch in range(last + 1):
            source = json.dumps({"in": {"0": batch}})
            extra = f"\n{source}" if log_name == "offsets" else ""
            (root / log_name / str(batch)).write_text("v1\n" + json.dumps(line) + extra)
    op = root / "state" / "0"
    (op / "_metadata" / "v2").mkdir(parents=True)
    (op / "_stateSchema" / "default").mkdir(parents=True)
    (op / "_stateSchema" / "default" / SCHEMA).write_bytes(b"\x00\x00\x00\x02v3schema")
    store_info = {"storeName": "default", "numPartitions": partitions,
                  "stateSchemaFilePaths": [f"file:/elsewhere/state/0/_stateSchema/default/"
                                           f"{SCHEMA}"]}
    (op / "_metadata" / "v2" / "0").write_text(
        "v2\n" + json.dumps({"operatorInfo": {"operatorId": 0},
                             "stateStoreInfo": [store_info]}))
    for partition in range(partitions):
        store = op / str(partition)
        (store / "SSTs").mkdir(parents=True)
        for version in range(first_changelog, committed + 2):
            (store / f"{version}.changelog").write_bytes(lz4_like(b"changes %d" % version))
        if snapshot:
            (store / "SSTs" / SST).write_bytes(b"s" * 100)
            (store / f"{snapshot}.zip").write_bytes(snapshot_zip(100))
    return root


def flip_bytes(path: Path, start: int, stop: int) -> None:
    """Corrupt ``path`` in place between two offsets (negative: from the end)."""
    data = bytearray(path.read_bytes())
    for i in range(start % len(data), stop % len(data) if stop < 0 else stop):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))


def truncate(path: Path, keep: int) -> None:
    path.write_bytes(path.read_bytes()[:keep])
