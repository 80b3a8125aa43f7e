"""Fixtures come from the project's own harness module, so apps' tests share them."""

import os
import sys

pytest_plugins = ["shared.testing.fixtures", "shared.testing.kafka_fixtures"]

# In a pytest-xdist worker the main module is execnet's, with neither a file nor a spec:
# pyspark.sql.connect then takes the run for its own doctests and calls sys.exit(0) when
# grpc is absent (pyspark/sql/connect/utils.check_dependencies), which great-expectations
# imports. Naming the worker's main module's file restores the ImportError it catches.
if os.environ.get("PYTEST_XDIST_WORKER") and not hasattr(sys.modules["__main__"], "__file__"):
    sys.modules["__main__"].__file__ = __file__


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true",
                     help="also run tests marked slow (make test-slow): minutes each")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--slow"):
        return
    import pytest

    skip = pytest.mark.skip(reason="slow: run with --slow (make test-slow)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
