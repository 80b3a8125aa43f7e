"""Fixtures come from the project's own harness module, so apps' tests share them."""

pytest_plugins = ["shared.testing.fixtures", "shared.testing.kafka_fixtures"]


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
