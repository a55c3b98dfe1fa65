"""``kompakt serve`` checks each SASL listener's mechanisms and JAAS config before it binds."""

from __future__ import annotations

from pathlib import Path

import pytest

from kompakt.cli.serve import UsageError, build_settings


def test_kafkas_gssapi_default_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(
        UsageError, match=r"GSSAPI \(Kafka's default, Kerberos, which kompakt does not implement\)"
    ):
        build_settings(tmp_path / "d", None, 0, None, ["listeners=SASL_PLAINTEXT://127.0.0.1:0"])


def test_a_per_listener_mechanism_list_and_a_bad_jaas_config(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="Invalid control flag 'mandatory'"):
        build_settings(
            tmp_path / "d",
            None,
            0,
            None,
            [
                "listeners=SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms=PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config=a.B mandatory;",
            ],
        )
    with pytest.raises(
        UsageError, match=r"GSSAPI .* in listener.name.b.sasl.enabled.mechanisms .* listener B:"
    ):
        build_settings(
            tmp_path / "d",
            None,
            0,
            None,
            [
                "listeners=A://127.0.0.1:0,B://127.0.0.1:0",
                "listener.security.protocol.map=A:SASL_PLAINTEXT,B:SASL_PLAINTEXT",
                "sasl.enabled.mechanisms=PLAIN",
                "listener.name.b.sasl.enabled.mechanisms=GSSAPI",
            ],
        )


def test_a_sasl_listener_makes_the_admin_endpoint_require_its_token(tmp_path: Path) -> None:
    """Issue 27: the admin endpoint must not be a way around the listeners' authentication."""
    overrides = ["listeners=SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms=SCRAM-SHA-512"]
    with pytest.raises(UsageError, match="needs a bearer token: the Kafka listeners require authentication"):
        build_settings(tmp_path / "d", None, 0, None, overrides)
    settings = build_settings(tmp_path / "d", None, 0, None, [*overrides, "admin.auth.token=s3cret-token"])
    assert settings.listeners_require_auth
    assert not build_settings(tmp_path / "d", None, 0, None, []).listeners_require_auth
