"""Reading a Spark checkpoint's own logs, through Hadoop's filesystem API so that the
same code works on a local folder, HDFS or an object store."""

from __future__ import annotations

import json

from pyspark.sql import SparkSession

from shared.checkpoint.owner_only import FILE_MODE


def read_text(spark: SparkSession, path: str) -> str | None:
    """The whole text of a (small) file, or None when it does not exist."""
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not fs.exists(hadoop_path):
        return None
    stream = fs.open(hadoop_path)
    try:
        reader = jvm.java.io.BufferedReader(jvm.java.io.InputStreamReader(stream, "UTF-8"))
        lines = []
        while (line := reader.readLine()) is not None:
            lines.append(line)
        return "\n".join(lines)
    finally:
        stream.close()


def offset_log_metadata(spark: SparkSession, checkpoint: str, batch_id: int) -> dict | None:
    """Batch ``batch_id``'s entry in the offset log: ``batchWatermarkMs``,
    ``batchTimestampMs`` and the SQL settings fixed in the checkpoint."""
    text = read_text(spark, f"{checkpoint}/offsets/{batch_id}")
    if text is None:
        return None
    # Line 1 is the log version ("v1"), line 2 the metadata, then one line per source.
    return json.loads(text.splitlines()[1])


def query_id(spark: SparkSession, checkpoint: str) -> str:
    """The query id Spark keeps in the checkpoint for its whole life."""
    text = read_text(spark, f"{checkpoint}/metadata")
    if text is None:
        raise FileNotFoundError(f"no query metadata in {checkpoint}: has the query started?")
    return json.loads(text)["id"]


def write_text(spark: SparkSession, path: str, text: str) -> None:
    """Write a (small) file whole, replacing it; on a local filesystem its owner's only
    (Hadoop makes it 0o644; shared/checkpoint/owner_only.py)."""
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    stream = fs.create(hadoop_path, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()
    if fs.getScheme() == "file":
        fs.setPermission(hadoop_path, jvm.org.apache.hadoop.fs.permission.FsPermission(FILE_MODE))


def has_started(spark: SparkSession, checkpoint: str) -> bool:
    """Whether a query has planned a batch in this checkpoint (its offset log holds one)."""
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(f"{checkpoint.rstrip('/')}/offsets")
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return fs.exists(path) and any(
        status.getPath().getName().isdigit() for status in fs.listStatus(path))


def replace_file(spark: SparkSession, source: str, target: str) -> None:
    """Move ``source`` over ``target`` (a whole file written beside it first: a crash
    never leaves ``target`` torn, at worst missing with ``source`` complete)."""
    hadoop_path = spark.sparkContext._jvm.org.apache.hadoop.fs.Path
    source_path, target_path = hadoop_path(source), hadoop_path(target)
    fs = target_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    fs.delete(target_path, False)
    if not fs.rename(source_path, target_path):
        raise OSError(f"could not move {source} to {target}")
