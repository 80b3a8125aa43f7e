"""Every module an executor imports needs only the packages of
``deploy/cluster/requirements-executor.lock`` (and pyspark's Python side, which the
cluster's Spark provides): a packed executor environment built from that lock is
complete.

A child interpreter with the project's venv on its path refuses, at import, every
top-level module that belongs to an installed distribution outside that set, then
imports what executors load: the workers' base modules, each app's worker modules and
the exactly-once sink's writer. Modules of no distribution (the standard library) pass.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
from pathlib import Path

from shared.runtime.runner import SINK_WRITER_MODULE, worker_modules
from shared.runtime.worker_daemon import BASE_MODULES
from shared.testing.apps import apps_under_test

REPO = Path(__file__).resolve().parents[2]
EXECUTOR_LOCK = REPO / "deploy" / "cluster" / "requirements-executor.lock"
# The cluster's Spark ships pyspark and py4j (python/lib); the project comes in the code zip.
PROVIDED = {"pyspark", "py4j", "statewise"}

GUARD = """
import importlib.abc, json, sys
refused = json.loads(sys.argv[1])
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in refused:
            raise ImportError(f"{name}: from {refused[top]}, not in the executor lock")
        return None
sys.meta_path.insert(0, Refuse())
for module in json.loads(sys.argv[2]):
    __import__(module)
"""


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_distributions() -> set[str]:
    names = re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", EXECUTOR_LOCK.read_text(), re.M)
    return {normalized(name) for name in names}


def refused_modules() -> dict[str, str]:
    """Top-level module -> its distribution, for every installed one the executors lack."""
    allowed = locked_distributions() | PROVIDED
    installed = importlib.metadata.packages_distributions()
    return {module: dists[0] for module, dists in installed.items()
            if not {normalized(d) for d in dists} & allowed}


def executor_modules() -> list[str]:
    app_modules = [m for app in apps_under_test().values() for m in worker_modules(app)]
    return list(dict.fromkeys([*BASE_MODULES, *app_modules]))


def import_refusing(refused: dict[str, str], modules: list[str]) -> subprocess.CompletedProcess:
    """Import ``modules`` in a child interpreter that refuses ``refused``'s modules."""
    return subprocess.run([sys.executable, "-c", GUARD, json.dumps(refused), json.dumps(modules)],
                          capture_output=True, text=True, cwd=REPO)


def test_the_executor_lock_names_the_workers_packages():
    assert {"numpy", "pandas", "pyarrow", "protobuf", "confluent-kafka", "orjson"} \
        <= locked_distributions()


def test_the_guard_refuses_a_driver_only_package():
    refused = refused_modules()
    assert refused.get("great_expectations") == "great_expectations"
    child = import_refusing(refused, ["great_expectations"])
    assert child.returncode != 0 and "not in the executor lock" in child.stderr


def test_executor_modules_import_with_the_executor_lock_only():
    modules = executor_modules()
    assert SINK_WRITER_MODULE in modules and any(m.startswith("apps.") for m in modules)
    child = import_refusing(refused_modules(), modules)
    assert child.returncode == 0, child.stderr[-3000:]
