"""The few file operations the checkpoint check needs, on a checkpoint folder.

``HadoopFiles`` goes through the JVM's Hadoop FileSystem, as Spark does, so one code
path serves a local folder, HDFS and object stores; on a local folder it also verifies
the ``.crc`` files Hadoop writes beside each file, for the bytes it reads. ``LocalFiles``
reads a local folder with no JVM (unit tests, tools without Spark). Paths are relative
to the checkpoint and joined with "/".
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

CODEC_CONF = "spark.sql.streaming.stateStore.compression.codec"


@dataclass(frozen=True)
class Entry:
    name: str
    size: int
    is_dir: bool


class UnreadableFile(OSError):
    """A file that is listed but cannot be read (a checksum mismatch, an I/O error)."""


class CheckpointFiles(Protocol):
    root: str

    def listing(self, folder: str) -> dict[str, Entry] | None:
        """The folder's entries by name, hidden ones (".x.crc") left out; None if absent."""

    def read(self, path: str, count: int | None = None) -> bytes:
        """The file's first ``count`` bytes (None: all). Raises UnreadableFile."""

    def tail(self, path: str, size: int, count: int) -> bytes:
        """The last ``count`` bytes of a file of ``size`` bytes. Raises UnreadableFile."""

    def decompress(self, path: str) -> bool:
        """Read a compressed state file whole with Spark's own codec: raises
        UnreadableFile when it cannot; False when this reader has no codec."""


def full_path(files: CheckpointFiles, path: str) -> str:
    return f"{files.root.rstrip('/')}/{path}"


class LocalFiles:
    def __init__(self, root: str | Path) -> None:
        self.root = str(root)

    def listing(self, folder: str) -> dict[str, Entry] | None:
        path = Path(full_path(self, folder))
        if not path.is_dir():
            return None
        return {e.name: Entry(e.name, e.stat().st_size, e.is_dir())
                for e in os.scandir(path) if not e.name.startswith(".")}

    def read(self, path: str, count: int | None = None) -> bytes:
        try:
            with open(full_path(self, path), "rb") as stream:
                return stream.read(-1 if count is None else count)
        except OSError as error:
            raise UnreadableFile(str(error)) from error

    def tail(self, path: str, size: int, count: int) -> bytes:
        try:
            with open(full_path(self, path), "rb") as stream:
                stream.seek(max(0, size - count))
                return stream.read(count)
        except OSError as error:
            raise UnreadableFile(str(error)) from error


    def decompress(self, path: str) -> bool:
        return False  # Spark's codecs live in the JVM


class HadoopFiles:
    def __init__(self, spark, root: str) -> None:
        self.root = root
        self._spark = spark
        self._jvm = spark.sparkContext._jvm
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()

    def _path(self, path: str):
        return self._jvm.org.apache.hadoop.fs.Path(full_path(self, path))

    def _fs(self, hadoop_path):
        return hadoop_path.getFileSystem(self._conf)

    def listing(self, folder: str) -> dict[str, Entry] | None:
        path = self._path(folder)
        fs = self._fs(path)
        if not fs.exists(path) or not fs.getFileStatus(path).isDirectory():
            return None
        entries = {}
        for status in fs.listStatus(path):
            name = status.getPath().getName()
            if not name.startswith("."):
                entries[name] = Entry(name, status.getLen(), status.isDirectory())
        return entries

    def read(self, path: str, count: int | None = None) -> bytes:
        return self._read(path, offset=0, count=count)

    def tail(self, path: str, size: int, count: int) -> bytes:
        return self._read(path, offset=max(0, size - count), count=min(size, count))

    def decompress(self, path: str) -> bool:
        from py4j.protocol import Py4JJavaError

        hadoop_path = self._path(path)
        spark_conf = self._spark.sparkContext._jsc.sc().conf()
        name = self._spark.conf.get(CODEC_CONF, "lz4")
        try:
            codec = self._jvm.org.apache.spark.io.CompressionCodec.createCodec(spark_conf, name)
            stream = codec.compressedInputStream(self._fs(hadoop_path).open(hadoop_path))
            try:
                self._jvm.org.apache.commons.io.IOUtils.consume(stream)
            finally:
                stream.close()
        except Py4JJavaError as error:
            raise UnreadableFile(error.java_exception.toString()) from None
        return True

    def _read(self, path: str, offset: int, count: int | None) -> bytes:
        from py4j.protocol import Py4JJavaError

        hadoop_path = self._path(path)
        io_utils = self._jvm.org.apache.commons.io.IOUtils
        try:
            stream = self._fs(hadoop_path).open(hadoop_path)
            try:
                if offset:
                    stream.seek(offset)
                data = (io_utils.toByteArray(stream) if count is None
                        else io_utils.toByteArray(stream, count))
            finally:
                stream.close()
        except Py4JJavaError as error:
            # ChecksumException on a local folder whose .crc disagrees, EOFException...
            raise UnreadableFile(error.java_exception.toString()) from None
        return bytes(data)
