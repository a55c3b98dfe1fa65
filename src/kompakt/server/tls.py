"""TLS for a listener: the server ``SSLContext`` from Kafka's ``ssl.*`` configs, and the principal
of a client certificate.

Kafka's broker builds one ``SSLEngine`` factory per listener from that listener's SSL configs
(``listener.name.<l>.ssl.*`` before ``ssl.*``). Python's ``ssl`` reads PEM only, so kompakt takes
what Kafka calls a PEM key store (``ssl.keystore.type=PEM``): a file holding the private key and
its certificate chain, or both inline; JKS and PKCS12 stores are refused with a message saying
so. Every problem (a missing or unreadable file, a wrong key password, an unknown protocol) is a
:class:`~kompakt.errors.ConfigError` naming the listener and the config, raised before the broker
binds or opens anything.

A client certificate becomes the connection's principal as Kafka's ``DefaultKafkaPrincipalBuilder``
makes it: the subject's distinguished name in RFC 2253 form (``CN=client,OU=eng,O=acme``), put
through ``ssl.principal.mapping.rules`` (:class:`SslPrincipalMapper`), as a ``User`` principal.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from kompakt.broker.session import ANONYMOUS, KafkaPrincipal
from kompakt.config.broker import BrokerConfig
from kompakt.config.listeners import ListenerConfig, listener_list, listener_str
from kompakt.errors import ConfigError

_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
#: ``ssl.protocol`` values accepted (Java's SSLContext algorithms that can negotiate 1.2/1.3).
_CONTEXT_PROTOCOLS = ("TLS", "TLSv1.2", "TLSv1.3")
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def server_context(config: BrokerConfig, listener: ListenerConfig) -> ssl.SSLContext:
    """The TLS context of an SSL or SASL_SSL listener, from its (prefixed or broker-wide) configs."""
    name = listener.name

    def get(key: str) -> str | None:
        value = listener_str(config, name, key)
        return value if value else None

    def fail(message: str) -> ConfigError:
        return ConfigError(f"listener {name}: {message}")

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_protocols(context, listener_list(config, name, "ssl.enabled.protocols"), get("ssl.protocol"), fail)
    ciphers = listener_list(config, name, "ssl.cipher.suites")
    if ciphers:
        try:
            context.set_ciphers(":".join(ciphers))
        except ssl.SSLError:
            raise fail(f"ssl.cipher.suites {','.join(ciphers)} names no cipher suite OpenSSL knows") from None
    _load_key_store(context, get, fail)
    client_auth = (get("ssl.client.auth") or "none").lower()
    if client_auth not in _CLIENT_AUTH:
        raise fail(f"ssl.client.auth must be required, requested or none, got {client_auth}")
    context.verify_mode = _CLIENT_AUTH[client_auth]
    _load_trust_store(context, get, fail, needed=client_auth != "none")
    return context


def _set_protocols(
    context: ssl.SSLContext,
    enabled: Sequence[str],
    protocol: str | None,
    fail: Callable[[str], ConfigError],
) -> None:
    if protocol is not None and protocol not in _CONTEXT_PROTOCOLS:
        raise fail(f"ssl.protocol {protocol} is not supported (TLSv1.2 or TLSv1.3)")
    unknown = [p for p in enabled if p not in _PROTOCOLS]
    if unknown or not enabled:
        raise fail(
            f"ssl.enabled.protocols {','.join(enabled) or '(empty)'}: "
            "supported protocols are TLSv1.2, TLSv1.3"
        )
    versions = sorted(_PROTOCOLS[p] for p in enabled)
    context.minimum_version = versions[0]
    context.maximum_version = versions[-1]


def _load_key_store(
    context: ssl.SSLContext, get: Callable[[str], str | None], fail: Callable[[str], ConfigError]
) -> None:
    location = get("ssl.keystore.location")
    chain, key = get("ssl.keystore.certificate.chain"), get("ssl.keystore.key")
    if location is None and chain is None and key is None:
        raise fail(
            "no key store: set ssl.keystore.type=PEM and ssl.keystore.location (a PEM file with the "
            "private key and certificate chain), or ssl.keystore.certificate.chain and ssl.keystore.key"
        )
    _require_pem(get, "ssl.keystore.type", fail)
    password = get("ssl.key.password")
    if location is not None:
        if chain is not None or key is not None:
            raise fail("set either ssl.keystore.location or ssl.keystore.certificate.chain/ssl.keystore.key")
        _load_chain(context, location, password, fail, "ssl.keystore.location " + location)
        return
    if chain is None or key is None:
        missing = "ssl.keystore.key" if key is None else "ssl.keystore.certificate.chain"
        raise fail(f"{missing} is not set (inline PEM needs both the key and the certificate chain)")
    # Python's ssl loads key material from files only: a private file, removed right after.
    with tempfile.TemporaryDirectory(prefix="kompakt-tls-") as scratch:
        path = Path(scratch) / "keystore.pem"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as file:
            file.write(_pem(key) + _pem(chain))
        _load_chain(context, str(path), password, fail, "ssl.keystore.certificate.chain/ssl.keystore.key")


def _load_chain(
    context: ssl.SSLContext, path: str, password: str | None, fail: Callable[[str], ConfigError], what: str
) -> None:
    # Without ssl.key.password an encrypted key gets an empty one (and fails), never a prompt on
    # the terminal, which is what OpenSSL does when no password callback is given.
    try:
        context.load_cert_chain(path, password=password if password is not None else _no_password)
    except ssl.SSLError as exc:
        raise fail(
            f"{what}: cannot load a PEM private key and certificate chain ({exc.reason or exc}); "
            "an encrypted key needs ssl.key.password"
        ) from None
    except FileNotFoundError:
        raise fail(f"{what}: no such file") from None
    except OSError as exc:
        raise fail(f"{what}: {exc.strerror or exc}") from None


def _no_password() -> str:
    return ""


def _load_trust_store(
    context: ssl.SSLContext,
    get: Callable[[str], str | None],
    fail: Callable[[str], ConfigError],
    *,
    needed: bool,
) -> None:
    location, inline = get("ssl.truststore.location"), get("ssl.truststore.certificates")
    if location is None and inline is None:
        if needed:  # as Kafka without a trust store: the platform's default CAs
            context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        return
    _require_pem(get, "ssl.truststore.type", fail)
    try:
        if location is not None:
            context.load_verify_locations(cafile=location)
        if inline is not None:
            context.load_verify_locations(cadata=_pem(inline))
    except ssl.SSLError as exc:
        raise fail(f"trust store: not PEM certificates: {exc.reason or exc}") from None
    except FileNotFoundError:
        raise fail(f"ssl.truststore.location {location}: no such file") from None
    except OSError as exc:
        raise fail(f"ssl.truststore.location {location}: {exc.strerror or exc}") from None


def _require_pem(get: Callable[[str], str | None], name: str, fail: Callable[[str], ConfigError]) -> None:
    kind = (get(name) or "JKS").upper()
    if kind != "PEM":
        raise fail(
            f"{name} {kind} is not supported: kompakt reads PEM stores only (set {name}=PEM; "
            "convert a JKS or PKCS12 store with keytool -importkeystore and openssl pkcs12 -nodes)"
        )


def _pem(text: str) -> str:
    """Inline PEM as Kafka takes it from a properties file, where newlines are often lost:
    restore them around the BEGIN/END lines and in the base64 body."""
    if "\n" in text.strip():
        return text.strip() + "\n"
    blocks = re.findall(r"(-----BEGIN [A-Z0-9 ]+-----)(.*?)(-----END [A-Z0-9 ]+-----)", text, re.S)
    out = []
    for begin, body, end in blocks:
        data = "".join(body.split())
        lines = [data[i : i + 64] for i in range(0, len(data), 64)]
        out.append("\n".join([begin, *lines, end]))
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# The principal of a client certificate

#: RFC 2253 keywords (what Java's ``X500Principal.getName()`` prints) for OpenSSL's long names.
_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
#: Attributes Java prints as ``OID=#<DER hex>`` (IA5String values), as it does for emailAddress.
_IA5_OIDS = {"emailAddress": "1.2.840.113549.1.9.1"}

PeerCertificate = dict[str, object]


def _escape(value: str) -> str:
    """RFC 2253 section 2.4 escaping of an attribute value."""
    out = "".join("\\" + ch if ch in ',+"\\<>;' else ch for ch in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def _ia5_hex(value: str) -> str:
    data = value.encode("ascii", "replace")
    length = bytes([len(data)]) if len(data) < 128 else bytes([0x81, len(data)])
    return "#" + (b"\x16" + length + data).hex()


def subject_dn(certificate: PeerCertificate) -> str:
    """The subject of a verified peer certificate (``SSLObject.getpeercert()``) in RFC 2253 form:
    the last RDN first, multi-valued RDNs joined with ``+``."""
    subject = certificate.get("subject", ())
    rdns: list[str] = []
    for rdn in reversed(list(subject)):  # type: ignore[call-overload]
        parts = []
        for attribute, value in rdn:
            if attribute in _IA5_OIDS:
                parts.append(f"{_IA5_OIDS[attribute]}={_ia5_hex(value)}")
            else:
                parts.append(f"{_KEYWORDS.get(attribute, attribute)}={_escape(value)}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


class NoMatchingRule(Exception):
    """No ``ssl.principal.mapping.rules`` rule matched a distinguished name (the handshake's
    principal cannot be built: Kafka fails the authentication)."""


_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_RULE_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


class _Rule:
    def __init__(self, pattern: str | None = None, replacement: str = "", case: str = "") -> None:
        self.pattern = re.compile(pattern) if pattern is not None else None
        self.replacement = replacement
        self.case = case

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        groups = self.pattern.groups
        # Java's replaceAll: $n are groups; a $n beyond the groups stays literal (Kafka's escape).
        template = _BACK_REFERENCE.sub(
            lambda m: _group_ref(m.group(1), groups), self.replacement.replace("\\", "\\\\")
        )
        result = self.pattern.sub(template, dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        suffix = f"/{self.case}" if self.case else ""
        return f"RULE:{self.pattern.pattern}/{self.replacement}{suffix}"


def _group_ref(digits: str, groups: int) -> str:
    if digits.startswith("0"):
        return "$" + digits
    number = int(digits)
    rest = ""
    while number > groups and number >= 10:
        rest = str(number % 10) + rest
        number //= 10
    if number > groups:
        return "$" + digits
    return f"\\g<{number}>" + rest


class SslPrincipalMapper:
    """Kafka's ``SslPrincipalMapper``: ``ssl.principal.mapping.rules`` applied to a DN.

    Rules are ``DEFAULT`` (the DN as it is) or ``RULE:pattern/replacement/`` with an optional
    ``L``/``U`` to lower- or upper-case the result, comma-separated; the first whose pattern
    matches the whole DN names the principal. An invalid rule is a :class:`ConfigError` when the
    config is read.
    """

    def __init__(self, rules: str | None) -> None:
        text = "DEFAULT" if rules is None else rules.strip()
        self.rules: list[_Rule] = []
        for match in _RULE_SPLITTER.finditer(text):
            rule = match.group(1)
            parsed = _RULE_PARSER.match(rule)
            if parsed is None:
                raise ConfigError(
                    f"Invalid value {rules} for configuration ssl.principal.mapping.rules: {rule}"
                )
            if parsed.end() != len(rule):
                raise ConfigError(
                    f"Invalid rule: `{rule}`, unmatched substring: `{rule[parsed.end() :]}`"
                    " (ssl.principal.mapping.rules)"
                )
            try:
                if parsed.group(1) is not None:
                    self.rules.append(_Rule())
                elif parsed.group(2) is not None:
                    self.rules.append(_Rule(parsed.group(2), parsed.group(3), parsed.group(4)))
            except re.error as exc:
                raise ConfigError(f"Invalid rule: `{rule}` in ssl.principal.mapping.rules: {exc}") from None

    def name(self, dn: str) -> str:
        for rule in self.rules:
            result = rule.apply(dn)
            if result is not None:
                return result
        raise NoMatchingRule(f"No rules apply to {dn}, rules [{', '.join(map(str, self.rules))}]")


def certificate_principal(certificate: PeerCertificate | None, mapper: SslPrincipalMapper) -> KafkaPrincipal:
    """The principal of a TLS connection: ``User:<mapped DN>``, or ANONYMOUS without a certificate."""
    if not certificate:
        return ANONYMOUS
    return KafkaPrincipal("User", mapper.name(subject_dn(certificate)))
