"""The secured local broker's configuration and credentials (no JVM started; the
security integration test runs it)."""

from __future__ import annotations

import stat

from shared.ops.secured_broker import ADMIN_USER, APP_USER, local_secured_broker


def test_the_sasl_listener_scram_and_the_authorizer_are_configured(tmp_path):
    config = local_secured_broker(home=tmp_path).config
    properties = dict(line.split("=", 1) for line in config.server_properties().splitlines())

    assert properties["listeners"].endswith(",SASL_SSL://127.0.0.1:9192")
    assert properties["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert properties["authorizer.class.name"].endswith("StandardAuthorizer")
    assert properties["super.users"] == f"User:ANONYMOUS;User:{ADMIN_USER}"
    assert config.sasl_bootstrap_servers == "127.0.0.1:9192"
    # No password in the broker's own configuration file.
    assert not any(password in config.server_properties() for _, password in config.users)


def test_passwords_are_made_once_owner_only_and_kept(tmp_path):
    first = local_secured_broker(home=tmp_path).config.users
    again = local_secured_broker(home=tmp_path).config.users

    assert [name for name, _ in first] == [ADMIN_USER, APP_USER]
    assert first == again and first[0][1] != first[1][1]
    credentials = tmp_path / "credentials"
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o700
    for name, password in first:
        assert stat.S_IMODE((credentials / name).stat().st_mode) == 0o600
        assert len(password) >= 24
