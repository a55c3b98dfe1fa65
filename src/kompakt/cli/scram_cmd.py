"""SCRAM users from the command line, in Kafka's spellings.

* ``kompakt kafka-configs --entity-type users --entity-name alice --alter --add-config
  'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'`` (and ``--delete-config SCRAM-SHA-256``,
  ``--describe``) through AlterUserScramCredentials / DescribeUserScramCredentials, with Kafka's
  ``ConfigCommand`` output lines. The broker stores only the salted form.
* ``kompakt storage add-scram --data-dir DIR 'SCRAM-SHA-256=[name=alice,password=alice-secret]'``:
  Kafka's ``kafka-storage format --add-scram``, the way to create the first user of a broker
  whose listeners all require SASL, before it starts (the data directory must not be in use).
"""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path
from typing import Annotated, Any

import typer

from kompakt.cli.cluster import KAFKA_ADMIN, Cluster
from kompakt.cli.output import CliError, CliUsageError, OutputFormat, console, emit_json

#: ConfigCommand's default when ``iterations`` is not given (Kafka's ``ScramMechanism`` minimum).
DEFAULT_ITERATIONS = 4096
_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def scram_params(mechanism: str, text: str, option: str) -> dict[str, str]:
    """``iterations=8192,password=x`` (the inside of ``SCRAM-SHA-256=[...]``) as a mapping."""
    if mechanism not in _MECHANISMS:
        raise CliUsageError(f"{option}: {mechanism} is not a SCRAM mechanism ({', '.join(_MECHANISMS)})")
    params: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliUsageError(f"{option}: invalid {mechanism} entry {item!r}, expected key=value")
        params[key.strip()] = value
    return params


def _iterations(params: dict[str, str], option: str) -> int:
    try:
        return int(params.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise CliUsageError(
            f"{option}: iterations must be an integer, got {params['iterations']!r}"
        ) from None


# ------------------------------------------------------------------ --command-config

#: Kafka admin-client properties that mean the same to librdkafka.
_SAME_NAME = ("security.protocol", "sasl.mechanism", "sasl.username", "sasl.password", "ssl.ca.location")


def client_properties(path: str) -> dict[str, Any]:
    """librdkafka settings from Kafka's ``--command-config`` admin-client properties: the security
    protocol, the SASL mechanism, the credentials of ``sasl.jaas.config`` (PLAIN/SCRAM
    ``username``/``password``; OAUTHBEARER's ``unsecuredLoginStringClaim_sub``), PEM trust and key
    stores. Other properties tune Kafka's JVM client and are ignored."""
    from kompakt.broker.sasl.jaas import parse_jaas_config
    from kompakt.config.defs import parse_properties_file
    from kompakt.errors import ConfigError

    try:
        props = parse_properties_file(Path(path))
    except OSError as exc:
        raise CliUsageError(f"--command-config: cannot read {path}: {exc.strerror or exc}") from None
    config: dict[str, Any] = {name: props[name] for name in _SAME_NAME if name in props}
    if "sasl.jaas.config" in props:
        try:
            options = parse_jaas_config(props["sasl.jaas.config"]).options
        except ConfigError as exc:
            raise CliUsageError(f"--command-config {path}: {exc}") from None
        if "username" in options:
            config["sasl.username"] = options["username"]
        if "password" in options:
            config["sasl.password"] = options["password"]
        if "unsecuredLoginStringClaim_sub" in options:
            config["enable.sasl.oauthbearer.unsecure.jwt"] = True
            config["sasl.oauthbearer.config"] = f"principal={options['unsecuredLoginStringClaim_sub']}"
    for store in ("truststore", "keystore"):
        if f"ssl.{store}.location" in props and props.get(f"ssl.{store}.type", "PEM").upper() != "PEM":
            raise CliUsageError(f"--command-config: ssl.{store}.type must be PEM (kompakt reads PEM files)")
    if "ssl.truststore.location" in props:
        config["ssl.ca.location"] = props["ssl.truststore.location"]
    if "ssl.keystore.location" in props:  # one PEM file with the key and the certificate chain
        config["ssl.certificate.location"] = config["ssl.key.location"] = props["ssl.keystore.location"]
    if "ssl.key.password" in props:
        config["ssl.key.password"] = props["ssl.key.password"]
    if props.get("ssl.endpoint.identification.algorithm", "https").strip() == "":
        config["ssl.endpoint.identification.algorithm"] = "none"
    return config


# ------------------------------------------------------------------ kafka-configs --entity-type users


def alter_users(
    cluster: Cluster, users: list[str], sets: list[tuple[str, str]], deletes: list[str], output: OutputFormat
) -> None:
    ScramCredentialInfo = KAFKA_ADMIN.ScramCredentialInfo
    ScramMechanism = KAFKA_ADMIN.ScramMechanism
    UserScramCredentialDeletion = KAFKA_ADMIN.UserScramCredentialDeletion
    UserScramCredentialUpsertion = KAFKA_ADMIN.UserScramCredentialUpsertion

    alterations: list[Any] = []
    for name, value in sets:
        if name not in _MECHANISMS:
            raise CliUsageError(
                f"--add-config {name}: kompakt's users have SCRAM credentials only "
                f"({', '.join(_MECHANISMS)}), no client quotas"
            )
        params = scram_params(name, value, "--add-config")
        if "password" not in params:
            raise CliUsageError(f"--add-config {name}: password is required, e.g. {name}=[password=secret]")
        info = ScramCredentialInfo(
            ScramMechanism[name.replace("-", "_")], _iterations(params, "--add-config")
        )
        alterations += [UserScramCredentialUpsertion(u, info, params["password"].encode()) for u in users]
    for name in deletes:
        if name not in _MECHANISMS:
            raise CliUsageError(f"--delete-config {name}: kompakt's users have SCRAM credentials only")
        alterations += [UserScramCredentialDeletion(u, ScramMechanism[name.replace("-", "_")]) for u in users]
    admin = cluster.admin()
    futures = admin.alter_user_scram_credentials(alterations, request_timeout=cluster.timeout_s)
    for user in users:
        cluster.wait(futures[user], f"cannot update the SCRAM credentials of user {user}")
    if output is OutputFormat.JSON:
        emit_json({"updated": users})
        return
    console.file.write("".join(f"Completed updating config for user {user}.\n" for user in users))


def describe_users(cluster: Cluster, users: list[str], output: OutputFormat) -> None:
    from confluent_kafka import KafkaError, KafkaException

    admin = cluster.admin()
    described: dict[str, list[tuple[str, int]]] = {}
    if not users:
        future = admin.describe_user_scram_credentials(None, request_timeout=cluster.timeout_s)
        result = cluster.wait(future, "cannot describe SCRAM credentials")
    else:
        futures = admin.describe_user_scram_credentials(users, request_timeout=cluster.timeout_s)
        result = {}
        for user in users:
            try:
                result[user] = futures[user].result(timeout=cluster.timeout_s + 5.0)
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                if isinstance(error, KafkaError) and error.code() == KafkaError.RESOURCE_NOT_FOUND:
                    continue  # ConfigCommand prints nothing for a user without credentials
                raise CliError(f"cannot describe SCRAM credentials of user {user}: {exc}") from None
    for user, description in result.items():
        described[user] = [
            (info.mechanism.name.replace("_", "-"), int(info.iterations))
            for info in description.scram_credential_infos
        ]
    if output is OutputFormat.JSON:
        emit_json({u: {m: {"iterations": i} for m, i in infos} for u, infos in described.items()})
        return
    lines = [
        f"SCRAM credential configs for user-principal '{user}' are "
        + ", ".join(f"{mechanism}=iterations={iterations}" for mechanism, iterations in infos)
        for user, infos in sorted(described.items())
    ]
    console.file.write("".join(f"{line}\n" for line in lines))


# ------------------------------------------------------------------ kompakt storage add-scram

storage_app = typer.Typer(
    help="The data directory before the broker starts (Kafka's kafka-storage).", no_args_is_help=True
)


def _bytes_param(params: dict[str, str], key: str) -> bytes | None:
    """``salt``/``saltedpassword`` as kafka-storage takes them: base64 (Kafka also accepts hex-free
    base64 only)."""
    if key not in params:
        return None
    try:
        return base64.b64decode(params[key], validate=True)
    except ValueError:
        raise CliUsageError(f"--add-scram: {key} must be base64") from None


@storage_app.command("add-scram")
def add_scram_command(
    specs: Annotated[
        list[str],
        typer.Argument(help="SCRAM-SHA-256=[name=alice,password=secret] (iterations=, salt= optional)."),
    ],
    data_dir: Annotated[Path, typer.Option("--data-dir", help="The broker's data directory.")],
) -> None:
    """Add SCRAM users to a data directory (Kafka's ``kafka-storage format --add-scram``)."""
    from kompakt.broker.sasl.scram import (
        MAX_ITERATIONS,
        MIN_ITERATIONS,
        credential_from_password,
        credential_from_salted,
    )
    from kompakt.broker.sasl.store import ScramCredentialStore
    from kompakt.log.manager import lock_data_dir

    upserts = {}
    for spec in specs:
        match = re.fullmatch(r"(?P<mech>[A-Z0-9-]+)=\[(?P<params>.*)\]", spec.strip())
        if match is None:
            raise CliUsageError(
                f"--add-scram expects SCRAM-SHA-256=[name=alice,password=secret], got {spec!r}"
            )
        mechanism = match["mech"]
        params = scram_params(mechanism, match["params"], "add-scram")
        name = params.get("name", "").strip('"')
        if not name:
            raise CliUsageError(f"add-scram {spec!r}: name is required")
        iterations = _iterations(params, "add-scram")
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise CliUsageError(f"add-scram: iterations must be in {MIN_ITERATIONS}..{MAX_ITERATIONS}")
        salt = _bytes_param(params, "salt")
        salted = _bytes_param(params, "saltedpassword")
        if salted is not None:
            if salt is None:
                raise CliUsageError("add-scram: saltedpassword needs salt")
            credential = credential_from_salted(mechanism, salted, salt, iterations)
        elif "password" in params:
            credential = credential_from_password(mechanism, params["password"].strip('"'), iterations, salt)
        else:
            raise CliUsageError(f"add-scram {spec!r}: password (or salt and saltedpassword) is required")
        upserts[(name, mechanism)] = credential
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        fd = lock_data_dir(data_dir)
    except Exception as exc:  # noqa: BLE001 - the broker holds the directory: say so, change nothing
        raise CliError(f"{exc} Stop the broker first, or use kafka-configs --alter against it.") from None
    try:
        store = ScramCredentialStore(data_dir)
        store.apply(upserts, set())
    finally:
        os.close(fd)
    for name, mechanism in upserts:
        console.file.write(f"Added {mechanism} credential for user {name} to {store.path}\n")


def register(app: typer.Typer) -> None:
    """Add ``storage add-scram``; idempotent."""
    if not any(group.name == "storage" for group in app.registered_groups):
        app.add_typer(storage_app, name="storage")
