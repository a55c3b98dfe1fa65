"""``kompakt kafka-acls``: Kafka's flags and output lines against a broker with an authorizer.

The broker's ``super.users`` names ``User:ANONYMOUS`` (the principal of a PLAINTEXT client), so
the tool, connecting in plaintext, may manage ACLs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from kompakt.cli.app import app, register_commands
from kompakt.testing.broker import InProcessBroker

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture
def bootstrap(tmp_path: Path):  # type: ignore[no-untyped-def]
    overrides = {"authorizer.class.name": STANDARD, "super.users": "User:ANONYMOUS"}
    with InProcessBroker(tmp_path / "data", overrides=overrides) as broker:
        yield broker.bootstrap_servers


def acls(bootstrap: str, *argv: str) -> tuple[int, str]:
    register_commands()
    result = CliRunner().invoke(app, ["kafka-acls", "--bootstrap-server", bootstrap, *argv])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout


def test_add_list_and_remove_print_kafkas_lines(bootstrap: str) -> None:
    code, out = acls(
        bootstrap,
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--operation",
        "Write",
        "--topic",
        "orders",
    )
    assert code == 0, out
    pattern = "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)"
    read = "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
    write = "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)"
    assert out.startswith(f"Adding ACLs for resource `{pattern}`: \n \t{read}\n\t{write} \n")
    assert f"Current ACLs for resource `{pattern}`: \n" in out
    code, out = acls(
        bootstrap,
        "--add",
        "--deny-principal",
        "User:bob",
        "--deny-host",
        "10.0.0.9",
        "--operation",
        "Describe",
        "--group",
        "app-",
        "--resource-pattern-type",
        "prefixed",
    )
    assert code == 0, out
    code, listed = acls(bootstrap, "--list")
    assert code == 0
    assert read in listed and write in listed
    assert "ResourcePattern(resourceType=GROUP, name=app-, patternType=PREFIXED)" in listed
    assert "(principal=User:bob, host=10.0.0.9, operation=DESCRIBE, permissionType=DENY)" in listed
    code, out = acls(
        bootstrap,
        "--remove",
        "--force",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--topic",
        "orders",
    )
    assert code == 0, out
    code, listed = acls(bootstrap, "--list", "--topic", "orders")
    assert write in listed and read not in listed


def test_producer_and_consumer_conveniences(bootstrap: str) -> None:
    code, out = acls(
        bootstrap,
        "--add",
        "--allow-principal",
        "User:app",
        "--producer",
        "--consumer",
        "--topic",
        "events",
        "--group",
        "g",
        "--transactional-id",
        "tx",
        "--idempotent",
    )
    assert code == 0, out
    code, listed = acls(bootstrap, "--list")
    for line in (
        "(principal=User:app, host=*, operation=CREATE, permissionType=ALLOW)",
        "(principal=User:app, host=*, operation=READ, permissionType=ALLOW)",
        "(principal=User:app, host=*, operation=IDEMPOTENT_WRITE, permissionType=ALLOW)",
        "ResourcePattern(resourceType=TRANSACTIONAL_ID, name=tx, patternType=LITERAL)",
        "ResourcePattern(resourceType=GROUP, name=g, patternType=LITERAL)",
    ):
        assert line in listed


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--add", "--list", "--topic", "t"], "exactly one of --add, --remove, --list"),
        (["--add", "--topic", "t", "--operation", "Read"], "You must specify one of: --allow-principal"),
        (["--add", "--allow-principal", "alice", "--topic", "t"], "must be TYPE:NAME"),
        (
            ["--add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"],
            "unknown --operation",
        ),
        (["--add", "--allow-principal", "User:a", "--consumer", "--topic", "t"], "--consumer needs --group"),
        (
            ["--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"],
            "LITERAL",
        ),
    ],
)
def test_usage_errors(argv: list[str], message: str) -> None:
    from kompakt.cli import kafka_acls
    from kompakt.cli.output import CliUsageError

    with pytest.raises(CliUsageError, match=message):
        kafka_acls.kafka_acls([*argv, "--bootstrap-server", "127.0.0.1:1"])


def test_over_sasl_with_kafkas_command_config(tmp_path: Path) -> None:
    """``--command-config`` with Kafka's admin properties reaches a SASL listener as ``admin`` (a
    super user); without it the tool connects as nobody and the broker closes on it."""
    from tests.support.serve import launch

    jaas = (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
    )
    properties = tmp_path / "server.properties"
    properties.write_text(
        "\n".join(
            [
                "listeners=SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms=PLAIN",
                f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}",
                f"authorizer.class.name={STANDARD}",
                "super.users=User:admin",
            ]
        )
        + "\n"
    )
    client = tmp_path / "admin.properties"
    client.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret";\n'
    )
    broker = launch(tmp_path / "data", "--config", str(properties), "--admin-port", "-1")
    try:
        bootstrap = f"127.0.0.1:{broker.port}"
        code, out = acls(
            bootstrap, "--command-config", str(client), "--add", "--allow-principal", "User:alice",
            "--operation", "Describe", "--cluster",
        )  # fmt: skip
        assert code == 0, out
        code, listed = acls(bootstrap, "--command-config", str(client), "--list", "--cluster")
        assert code == 0
        assert "ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)" in listed
        assert "(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)" in listed
    finally:
        assert broker.stop() == 0
