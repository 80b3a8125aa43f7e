"""What a Spark session needs on top of session_conf when the master is a cluster.

In ``local[N]`` the executors live in the driver's JVM, on the driver's machine,
and import ``shared`` and ``apps`` from this repository. On a cluster (``spark://``,
``yarn``, ``k8s://``) they are separate processes, possibly on other machines, so:

- the project's Python code is zipped and shipped with the application
  (``spark.files`` makes the JVM serve it, ``spark.submit.pyFiles`` puts it first
  on every Python worker's ``sys.path``);
- the executors' Python interpreter must be a path valid *on the workers*: the
  driver's ``sys.executable`` exists only where the driver runs. With a packed
  environment (``STATEWISE_PYTHON_ENV_ARCHIVE``, see deploy/cluster/README.md) Spark
  unpacks it next to each executor and the workers run ``./statewise-env/bin/python``;
- a cluster on this machine's loopback gets a driver that listens on loopback too.

Executors start the interpreter named by the driver's ``PYSPARK_PYTHON`` environment
variable when the SparkContext starts (pyspark's context.py); the
``spark.pyspark.python`` setting is only read by ``spark-submit``. So
:func:`executor_python` is meant for both.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import py_compile
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from urllib.parse import urlparse

from shared.settings import HOME, REPO_ROOT, PlatformSettings

CODE_PACKAGES = ("shared", "apps")
CODE_ARCHIVE_DIR = HOME / "var" / "code-archives"
PYTHON_ENV_ARCHIVE_VAR = "STATEWISE_PYTHON_ENV_ARCHIVE"
PYTHON_ENV_ALIAS = "statewise-env"  # the folder Spark unpacks the archive into
LOOPBACK_HOSTS = {"127.0.0.1", "localhost"}


def is_local(master: str) -> bool:
    """True for ``local``, ``local[N]``, ``local[*]``, ``local[N,F]``."""
    return master == "local" or master.startswith("local[")


def master_on_loopback(master: str) -> bool:
    """True for a standalone master on this machine's loopback (spark://127.0.0.1:7077)."""
    parsed = urlparse(master)
    return parsed.scheme == "spark" and parsed.hostname in LOOPBACK_HOSTS


def _package_files(root: Path, packages: tuple[str, ...]) -> Iterator[Path]:
    for package in packages:
        for path in sorted((root / package).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                yield path


def code_archive(root: Path = REPO_ROOT, packages: tuple[str, ...] = CODE_PACKAGES,
                 out_dir: Path = CODE_ARCHIVE_DIR) -> Path:
    """A zip of the project's packages, named by a hash of their content and of this
    interpreter's bytecode version.

    The same code gives the same file, so restarts reuse it and two apps starting
    at once never overwrite each other's archive while the driver serves it. Each
    module's bytecode goes beside its source (:func:`_bytecode`): zipimport cannot
    write bytecode, so without it every executor's Python compiles the project again.
    """
    files = list(_package_files(root, packages))
    digest = hashlib.sha256(importlib.util.MAGIC_NUMBER)
    for path in files:
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    archive = out_dir / f"statewise-code-{digest.hexdigest()[:16]}.zip"
    if archive.exists():
        return archive
    out_dir.mkdir(parents=True, exist_ok=True)
    partial = archive.with_suffix(f".{os.getpid()}.partial")
    with (zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zipped,
          tempfile.TemporaryDirectory() as scratch):
        compiled = Path(scratch) / "module.pyc"  # one scratch file, rewritten per module
        for path in files:
            name = path.relative_to(root)
            zipped.write(path, name)
            if path.suffix == ".py":
                zipped.writestr(str(name.with_suffix(".pyc")),
                                _bytecode(path, name, compiled))
    os.replace(partial, archive)  # atomic: a reader never sees half a zip
    return archive


def _bytecode(source: Path, name: Path, compiled: Path) -> bytes:
    """``source`` compiled as a checked-hash .pyc (PEP 552), where zipimport looks for it
    (``mod.pyc`` beside ``mod.py``). A hash, not a timestamp: zip entries keep local time
    in 2-second steps, which an executor in another time zone would read as a changed
    source. An executor on another Python version finds a bad magic number and compiles
    the source instead, as it would have without the .pyc. ``compiled``: the scratch
    file py_compile writes."""
    py_compile.compile(str(source), cfile=str(compiled), dfile=str(name), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
    return compiled.read_bytes()


def python_env_archive(environ: Mapping[str, str] = os.environ) -> str | None:
    """The packed Python environment to ship to executors, if one is configured."""
    return environ.get(PYTHON_ENV_ARCHIVE_VAR) or None


def executor_python(settings: PlatformSettings, environ: Mapping[str, str] = os.environ) -> str:
    """The interpreter executors run, as a path that exists on the workers."""
    if not is_local(settings.spark_master) and python_env_archive(environ):
        return f"./{PYTHON_ENV_ALIAS}/bin/python"
    # An explicit PYSPARK_PYTHON wins (Spark's own convention); otherwise the
    # driver's interpreter, which is right in local mode and on a one-machine cluster.
    return environ.get("PYSPARK_PYTHON") or sys.executable


def cluster_conf(settings: PlatformSettings,
                 environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Spark settings to add to session_conf for a cluster master; empty for local[N]."""
    if is_local(settings.spark_master):
        return {}
    code = str(code_archive())
    conf = {
        "spark.files": code,
        "spark.submit.pyFiles": code,
        "spark.pyspark.python": executor_python(settings, environ),
    }
    env_archive = python_env_archive(environ)
    if env_archive:
        conf["spark.archives"] = f"{env_archive}#{PYTHON_ENV_ALIAS}"
    if master_on_loopback(settings.spark_master):
        # Executors on this machine call the driver back: keep that on loopback too.
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    return conf
