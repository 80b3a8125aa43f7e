"""Fixtures come from the project's own harness module, so apps' tests share them."""

pytest_plugins = ["shared.testing.fixtures", "shared.testing.kafka_fixtures"]
