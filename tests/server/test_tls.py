"""TLS listeners in process: the principal a client certificate gives its session, Kafka's
principal mapping rules, the key/trust store errors, and each listener advertising itself."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from kompakt.broker.context import Broker
from kompakt.broker.session import ANONYMOUS, KafkaPrincipal
from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.errors import ConfigError
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.server.app import KafkaServer, listener_settings
from kompakt.server.tls import NoMatchingRule, SslPrincipalMapper, subject_dn
from tests.support.tls import CLIENT_DN, Pki, make_pki
from tests.support.wire import read_frame, request_bytes

TIMEOUT_S = 10.0


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def tls_config(pki: Pki, **extra: str) -> BrokerConfig:
    return BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(pki.broker_keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki.ca_cert),
            **extra,
        }
    )


def client_context(pki: Pki, *, cert: bool = True) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca_cert))
    if cert:
        context.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    return context


def with_tls_server(config: BrokerConfig, scenario: Callable[[KafkaServer], Awaitable[None]]) -> None:
    async def main() -> None:
        broker = Broker.create(clock=FakeClock(), advertised_port=0, advertised_host="")
        server = KafkaServer(broker, listeners=listener_settings(config))
        await server.start()
        try:
            await asyncio.wait_for(scenario(server), TIMEOUT_S)
        finally:
            await server.close()

    asyncio.run(main())


def port_of(server: KafkaServer, name: str) -> int:
    return next(bound.port for settings, bound in server.listeners if settings.name == name)


async def request(
    port: int, context: ssl.SSLContext | None, api_key: int, version: int, values: dict[str, Any]
) -> Any:
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname="localhost" if context else None
    )
    try:
        writer.write(request_bytes(api_key, version, values, 7))
        _, response = codec.decode_response(await read_frame(reader, TIMEOUT_S), api_key, version)
        return response
    finally:
        writer.close()


async def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not reached within {TIMEOUT_S} s"
        await asyncio.sleep(0.005)


def test_client_certificate_names_the_session_principal(pki: Pki) -> None:
    seen: list[tuple[str, str, KafkaPrincipal]] = []

    async def scenario(server: KafkaServer) -> None:
        port = port_of(server, "SSL")
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client_context(pki), server_hostname="localhost"
        )
        writer.write(request_bytes(ApiKey.API_VERSIONS, 0, {}, 1))
        await read_frame(reader, TIMEOUT_S)
        await until(lambda: bool(server._connections), "the connection is registered")
        seen.extend(
            (c.session.listener_name, c.session.security_protocol, c.session.principal)
            for c in server._connections
        )
        writer.close()

    with_tls_server(tls_config(pki, **{"ssl.client.auth": "required"}), scenario)
    assert seen == [("SSL", "SSL", KafkaPrincipal("User", CLIENT_DN))]


def test_mapping_rules_shorten_the_principal(pki: Pki) -> None:
    seen: list[KafkaPrincipal] = []

    async def scenario(server: KafkaServer) -> None:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port_of(server, "SSL"), ssl=client_context(pki), server_hostname="localhost"
        )
        writer.write(request_bytes(ApiKey.API_VERSIONS, 0, {}, 1))
        await read_frame(reader, TIMEOUT_S)
        seen.extend(c.session.principal for c in server._connections)
        writer.close()

    rules = {
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/U",
    }
    with_tls_server(tls_config(pki, **rules), scenario)
    assert seen == [KafkaPrincipal("User", "CLIENT@ENG")]


def test_no_client_certificate_is_anonymous_when_requested(pki: Pki) -> None:
    seen: list[KafkaPrincipal] = []

    async def scenario(server: KafkaServer) -> None:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1",
            port_of(server, "SSL"),
            ssl=client_context(pki, cert=False),
            server_hostname="localhost",
        )
        writer.write(request_bytes(ApiKey.API_VERSIONS, 0, {}, 1))
        await read_frame(reader, TIMEOUT_S)
        seen.extend(c.session.principal for c in server._connections)
        writer.close()

    with_tls_server(tls_config(pki, **{"ssl.client.auth": "requested"}), scenario)
    assert seen == [ANONYMOUS]


def test_each_listener_advertises_its_own_address(pki: Pki) -> None:
    answers: dict[str, list[tuple[str, int]]] = {}

    async def scenario(server: KafkaServer) -> None:
        for name, context in (("PLAINTEXT", None), ("SSL", client_context(pki))):
            port = port_of(server, name)
            metadata = await request(
                port,
                context,
                ApiKey.METADATA,
                9,
                {
                    "topics": [],
                    "allow_auto_topic_creation": False,
                    "include_cluster_authorized_operations": False,
                    "include_topic_authorized_operations": False,
                },
            )
            cluster = await request(
                port, context, ApiKey.DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False}
            )
            coordinator = await request(
                port, context, ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0}
            )
            answers[name] = [
                (metadata.brokers[0].host, metadata.brokers[0].port),
                (cluster.brokers[0].host, cluster.brokers[0].port),
                (coordinator.host, coordinator.port),
                ("port", port),
            ]

    config = tls_config(pki, **{"advertised.listeners": "SSL://kafka.example:19093"})
    with_tls_server(config, scenario)
    plain_port = answers["PLAINTEXT"][3][1]
    assert answers["PLAINTEXT"][:3] == [("127.0.0.1", plain_port)] * 3
    assert answers["SSL"][:3] == [("kafka.example", 19093)] * 3


# ---------------------------------------------------------------------------------------------
# Configuration errors: one line naming the listener and the config


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"ssl.keystore.location": None}, "listener SSL: no key store"),
        (
            {"ssl.keystore.type": "JKS"},
            "ssl.keystore.type JKS is not supported: kompakt reads PEM stores only",
        ),
        (
            {"ssl.keystore.location": "/nonexistent/k.pem"},
            "ssl.keystore.location /nonexistent/k.pem: no such file",
        ),
        (
            {"ssl.truststore.type": "PKCS12", "ssl.truststore.location": "/some/store.p12"},
            "ssl.truststore.type PKCS12 is not supported",
        ),
        ({"ssl.enabled.protocols": "TLSv1.1"}, "supported protocols are TLSv1.2, TLSv1.3"),
        ({"ssl.principal.mapping.rules": "RULE:^CN=(.*$/$1/"}, "ssl.principal.mapping.rules"),
        ({"ssl.cipher.suites": "NOT-A-CIPHER"}, "ssl.cipher.suites NOT-A-CIPHER names no cipher suite"),
    ],
)
def test_tls_config_errors(pki: Pki, props: dict[str, str | None], message: str) -> None:
    base = {
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.broker_keystore),
    }
    merged = {k: v for k, v in {**base, **props}.items() if v is not None}
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
        listener_settings(BrokerConfig.from_properties(merged))


def test_encrypted_key_with_its_password_and_inline_pem(pki: Pki, tmp_path: Path) -> None:
    import subprocess

    encrypted = tmp_path / "encrypted.key"
    subprocess.run(
        ["openssl", "pkcs8", "-topk8", "-in", str(pki.broker_key), "-out", str(encrypted),
         "-passout", "pass:s3cret", "-v2", "aes-256-cbc"],
        check=True, capture_output=True,
    )  # fmt: skip
    props = {
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        # Inline PEM on one line, as a properties file often carries it.
        "ssl.keystore.key": " ".join(encrypted.read_text().split("\n")),
        "ssl.keystore.certificate.chain": pki.broker_cert.read_text(),
    }
    with pytest.raises(ConfigError, match="ssl.key.password"):
        listener_settings(BrokerConfig.from_properties(props))
    settings = listener_settings(BrokerConfig.from_properties({**props, "ssl.key.password": "s3cret"}))
    assert settings[0].tls is not None


def test_listener_prefix_overrides_the_broker_wide_config(pki: Pki) -> None:
    config = tls_config(
        pki,
        **{
            "listeners": "SSL://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "SSL:SSL,INTERNAL:SSL",
            "listener.name.internal.ssl.client.auth": "required",
        },
    )
    contexts = {s.name: s.tls for s in listener_settings(config)}
    assert contexts["SSL"] is not None and contexts["SSL"].verify_mode == ssl.CERT_NONE
    assert contexts["INTERNAL"] is not None and contexts["INTERNAL"].verify_mode == ssl.CERT_REQUIRED


# ---------------------------------------------------------------------------------------------
# Kafka's SslPrincipalMapper and the RFC 2253 subject


@pytest.mark.parametrize(
    ("rules", "dn", "name"),
    [
        ("DEFAULT", "CN=Duke,OU=JavaSoft,O=Sun Microsystems", "CN=Duke,OU=JavaSoft,O=Sun Microsystems"),
        ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "CN=kafka1,OU=ServiceUsers,O=Org", "kafka1"),
        ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "CN=Duke,OU=JavaSoft,O=Org",
         "CN=Duke,OU=JavaSoft,O=Org"),
        ("RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
         "CN=Duke,OU=JavaSoft,O=Sun,L=SC,ST=CA,C=US", "duke@javasoft"),
        ("RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/U",
         "CN=Duke,OU=JavaSoft,O=Sun,L=SC,ST=CA,C=US", "DUKE@JAVASOFT"),
        ("RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1 $3/", "CN=a,OU=b,O=c", "a c"),
        ("RULE:^CN=([^,]*).*$/user-$1$4/", "CN=x,OU=y", "user-x$4"),  # $4 beyond the groups stays literal
        ("  RULE:^CN=(.*?),.*$/$1/ , DEFAULT ", "CN=svc,O=o", "svc"),
    ],
)  # fmt: skip
def test_principal_mapping_rules(rules: str, dn: str, name: str) -> None:
    assert SslPrincipalMapper(rules).name(dn) == name


def test_no_matching_rule_and_invalid_rules() -> None:
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=x"):
        SslPrincipalMapper("RULE:^CN=y$/y/").name("CN=x")
    for bad in ("DEFAULT/L", "RULE:/", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1", "RULE:x/y/z"):
        with pytest.raises(ConfigError):
            SslPrincipalMapper(bad)


def test_subject_dn_is_rfc2253() -> None:
    subject = (
        (("countryName", "US"),),
        (("organizationName", "acme, inc"),),
        (("organizationalUnitName", "eng"), ("organizationalUnitName", "ops")),
        (("commonName", "client"),),
        (("emailAddress", "a@b.c"),),
    )
    assert subject_dn({"subject": subject}) == (
        "1.2.840.113549.1.9.1=#16056140622e63,CN=client,OU=eng+OU=ops,O=acme\\, inc,C=US"
    )
