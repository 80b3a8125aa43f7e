"""docs/reference/: one reference per app, generated from its code (shared/cli/reference.py).
A committed reference that the code no longer writes is stale: regenerate it with
``statewise reference --write``."""

from __future__ import annotations

import dataclasses

import pytest

from shared.app.loader import registered_apps
from shared.cli.reference import REFERENCE_DIR, app_reference, references

APPS = registered_apps()


@pytest.mark.parametrize("name", sorted(references(APPS.values())))
def test_the_committed_reference_is_what_the_code_writes(name):
    committed = REFERENCE_DIR / f"{name}.md"
    assert committed.is_file(), f"{committed} is missing: run statewise reference --write"
    assert committed.read_text() == references(APPS.values())[name], \
        f"{committed} is stale: run statewise reference --write"


@pytest.mark.parametrize("app", APPS.values(), ids=lambda app: app.name)
def test_an_apps_reference_names_every_topic_field_and_own_setting(app):
    text = app_reference(app)
    for spec in app.topics.all():
        assert f"`{spec.name}`" in text
        for field in spec.schema.struct.fields if spec.schema else ():
            assert f"| `{field.name}` |" in text, (spec.name, field.name)
    for field in dataclasses.fields(app.settings_type):
        assert f"`{field.metadata['env']}`" in text or field.metadata["env"].startswith(
            "STATEWISE_"), field.name


def test_the_reference_gives_units_and_no_path_of_this_machine():
    fraud = app_reference(APPS["fraud"])
    assert ("| `--card-idle-expiry-h` | `FRAUD_CARD_IDLE_EXPIRY_H` | hours, a number above 0 "
            "| `24.0` |") in fraud
    assert "| `--allowed-lateness` | `FRAUD_ALLOWED_LATENESS` | duration | `30 seconds` |" \
        in fraud
    platform = references(APPS.values())["platform"]
    assert "| `STATEWISE_HOME/var/checkpoints` |" in platform
