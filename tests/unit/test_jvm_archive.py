"""The driver JVM's class archive (shared/jvm_archive.py): which one, and when it is used."""

from pathlib import Path

from shared.jvm_archive import archive_key, archive_path, driver_java_options


def test_sessions_use_the_archive_only_once_it_exists(tmp_path: Path):
    assert driver_java_options(tmp_path) == ""
    path = archive_path(tmp_path)
    assert path.parent == tmp_path and archive_key() in path.name
    path.write_bytes(b"archive")
    assert driver_java_options(tmp_path) == f"-XX:SharedArchiveFile={path} -Xshare:auto"


def test_the_key_names_this_jdk_and_jar_set_and_stays_put():
    assert archive_key() == archive_key()
    assert len(archive_key()) == 16
