"""Who may drive the admin endpoint: no web page the operator happens to open, and, beyond
loopback, only the holder of a bearer token.

The endpoint compacts, rolls and moves the clock, and it is plain HTTP on a well-known port, so a
browser is a way in even when it listens on 127.0.0.1 only:

* **Cross-site requests.** Any page can make the browser send a "simple" request (a form's
  ``POST`` with ``Content-Type: text/plain`` or ``application/x-www-form-urlencoded``) to
  ``http://127.0.0.1:9192/v1/compact``; the browser does not let the page read the answer, but the
  compaction runs. A page cannot send ``Content-Type: application/json`` cross-site without a CORS
  preflight, which the endpoint never grants (``OPTIONS`` is a 405), so every state-changing method
  must carry that type, and one whose ``Origin`` is another site's is refused as well.
* **DNS rebinding.** A page at ``evil.example`` whose name then resolves to 127.0.0.1 makes its
  requests same-origin: the browser lets it read the answers. Its requests still say
  ``Host: evil.example``, so only the names the endpoint is known by are answered: localhost,
  127.0.0.1, [::1], its bound address, any IP address when bound to a wildcard (an address cannot
  be rebound), and ``admin.allowed.hosts``.
* **Other machines.** Bound beyond loopback (or when the Kafka listeners require authentication,
  so that the admin endpoint is no back door around them), every request but ``GET /healthz`` must
  carry ``Authorization: Bearer <admin.auth.token>``; the broker does not start without a token
  then. The static page at ``/`` holds no data and is served without one: it reads the token from
  its URL fragment (``/#token=…``, never sent to a server) for its own requests.

The token is compared in constant time. TLS (``admin.ssl.keystore.*`` in Kafka's PEM form) is
optional and keeps the token off the wire. Everything here is decided from the request line and
headers before the body is parsed or any operation runs.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import ssl
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from kompakt.config.broker import BrokerConfig
from kompakt.errors import ConfigError

__all__ = [
    "HEALTH_PATH",
    "LOOPBACK_HOSTS",
    "PAGE_PATH",
    "AccessRefused",
    "AdminAccess",
    "admin_access_from_config",
    "admin_ssl_context",
    "is_loopback",
    "normalized_path",
]

#: The names every endpoint answers to (the loopback addresses a local browser or tool uses).
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
_WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})  # noqa: S104 - names a wildcard, binds nothing
STATE_CHANGING_METHODS = frozenset({"POST", "PUT", "DELETE", "PATCH"})
#: Answered to anyone: a liveness probe (a load balancer's, a supervisor's) knows no token and may
#: name the endpoint by any address.
HEALTH_PATH = "/healthz"
#: The log map page: static HTML without data, served without a token (its requests carry one).
PAGE_PATH = "/"
_DEFAULT_PORTS = {"http": 80, "https": 443}
_CHECKED_HEADERS = ("host", "origin", "authorization", "content-type")


class AccessRefused(Exception):
    """A request the endpoint does not serve: ``status`` and a message for the person sending it."""

    def __init__(self, status: int, message: str, headers: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = tuple(headers)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a bind address or name) is reachable from this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def normalized_path(target: str) -> str:
    """The route a request target names, as :func:`kompakt.server.admin_http.handle_request` routes it."""
    return urlsplit(target).path.rstrip("/") or "/"


def _split_host(value: str, scheme: str) -> tuple[str, int] | None:
    """``host[:port]`` or ``[v6][:port]`` as (lowercase name, port); None when malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        name, sep, rest = value[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            return None
        port_text = rest[1:]
    else:
        name, _, port_text = value.partition(":")
        if ":" in port_text:
            return None
    if not name:
        return None
    if not port_text:
        return name, _DEFAULT_PORTS.get(scheme, 0)
    if not port_text.isdigit():
        return None
    return name, int(port_text)


def _is_ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class AdminAccess:
    """The endpoint's access rules; :meth:`check` raises :class:`AccessRefused` for a request they refuse."""

    #: Lowercase host names (IPv6 without brackets) a ``Host`` header may name.
    allowed_hosts: frozenset[str]
    #: ``admin.allowed.hosts=*``: no Host check (behind a proxy that checks it).
    any_host: bool = False
    #: Bound to a wildcard: any IP literal is one of this endpoint's addresses.
    any_address: bool = False
    token: bytes | None = None
    scheme: str = "http"

    @classmethod
    def for_endpoint(
        cls,
        host: str,
        *,
        allowed_hosts: Iterable[str] = (),
        token: str | None = None,
        token_required: bool = False,
        tls: bool = False,
    ) -> AdminAccess:
        """The rules of an endpoint bound to ``host``. ``token_required`` is the Kafka listeners'
        word (they require authentication); binding beyond loopback requires a token too. Raises
        :class:`ConfigError` when a token is required and none is given."""
        configured = [name.strip() for name in allowed_hosts if name.strip()]
        bound = host.strip("[]").lower()
        names = set(LOOPBACK_HOSTS) | {n.strip("[]").lower() for n in configured if n != "*"}
        if bound not in _WILDCARD_HOSTS:
            names.add(bound)
        if token is not None and not token:
            raise ConfigError("admin.auth.token must not be empty")
        if token is None and (token_required or not is_loopback(host)):
            where = (
                "the Kafka listeners require authentication"
                if token_required
                else (f"it listens on {host or 'every address'}, beyond loopback")
            )
            raise ConfigError(
                f"the admin endpoint needs a bearer token: {where}; set admin.auth.token or "
                "admin.auth.token.file (or keep --admin-host on 127.0.0.1)"
            )
        return cls(
            allowed_hosts=frozenset(names),
            any_host="*" in configured,
            any_address=bound in _WILDCARD_HOSTS,
            token=token.encode() if token is not None else None,
            scheme="https" if tls else "http",
        )

    @property
    def token_required(self) -> bool:
        return self.token is not None

    def check(self, method: str, target: str, headers: Sequence[tuple[str, str]]) -> None:
        """Refuse what a cross-site page, a rebound name or a caller without the token sends."""
        path = normalized_path(target)
        if path == HEALTH_PATH:
            return
        values = _single_values(headers)
        host = values.get("host")
        if host is not None and not self.host_allowed(host):
            raise AccessRefused(
                403,
                f"Host {host!r} is not a name of this admin endpoint (a DNS-rebinding page sends "
                "such a request); add the name to admin.allowed.hosts to allow it",
            )
        if self.token is not None and path != PAGE_PATH:
            self._check_token(values.get("authorization"))
        if method in STATE_CHANGING_METHODS:
            origin = values.get("origin")
            if origin is not None and not self._own_origin(origin, host):
                raise AccessRefused(
                    403,
                    f"{method} from origin {origin!r} refused: "
                    "only the admin endpoint's own pages may send it",
                )
            content_type = values.get("content-type")
            if content_type is None or content_type.split(";")[0].strip().lower() != "application/json":
                raise AccessRefused(
                    415,
                    f"{method} needs Content-Type: application/json (got {content_type or 'none'}): "
                    "a web page can send other types cross-site",
                )

    def host_allowed(self, value: str) -> bool:
        split = _split_host(value, self.scheme)
        if split is None:
            return False
        name = split[0]
        if self.any_host or name in self.allowed_hosts:
            return True
        return self.any_address and _is_ip_literal(name)

    def _own_origin(self, origin: str, host: str | None) -> bool:
        """The page's origin is this endpoint: same scheme, and the host and port the request names."""
        if host is None or origin.strip().lower() == "null":
            return False
        parts = urlsplit(origin.strip())
        if parts.scheme.lower() != self.scheme or not parts.netloc or parts.path not in ("", "/"):
            return False
        return _split_host(parts.netloc, self.scheme) == _split_host(host, self.scheme)

    def _check_token(self, authorization: str | None) -> None:
        assert self.token is not None
        scheme, _, given = (authorization or "").strip().partition(" ")
        # compare_digest on the bytes: the time taken does not tell how much of a guess was right.
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self.token):
            reason = "no bearer token" if authorization is None else "a wrong bearer token"
            raise AccessRefused(
                401,
                f"the admin endpoint requires a bearer token and the request has {reason} "
                "(kompakt admin: $KOMPAKT_ADMIN_TOKEN or --admin-token-file)",
                (("WWW-Authenticate", 'Bearer realm="kompakt admin"'),),
            )


def _single_values(headers: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The checked headers by lowercase name; a request repeating one of them is refused (two
    ``Host`` headers could pass the check with one and be routed by the other)."""
    values: dict[str, str] = {}
    for name, value in headers:
        key = name.lower()
        if key not in _CHECKED_HEADERS:
            continue
        if key in values:
            raise AccessRefused(400, f"the request repeats the {name} header")
        values[key] = value
    return values


# ---------------------------------------------------------------------------------------- configs


def admin_token(config: BrokerConfig) -> str | None:
    """``admin.auth.token``, or the first line of ``admin.auth.token.file``; None when neither."""
    token = config.get_str("admin.auth.token")
    path = config.get_str("admin.auth.token.file")
    if token is not None and path is not None:
        raise ConfigError("set one of admin.auth.token and admin.auth.token.file, not both")
    if path is None:
        return token
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"cannot read admin.auth.token.file {path}: {reason}") from None
    lines = text.splitlines()
    token = lines[0].strip() if lines else ""
    if not token:
        raise ConfigError(f"admin.auth.token.file {path} holds no token")
    return token


def admin_access_from_config(
    config: BrokerConfig, host: str, *, listeners_require_auth: bool = False
) -> AdminAccess:
    """The access rules of an endpoint bound to ``host`` under ``config``; :class:`ConfigError`
    for a missing or unreadable token, before anything starts."""
    return AdminAccess.for_endpoint(
        host,
        allowed_hosts=config.get_list("admin.allowed.hosts"),
        token=admin_token(config),
        token_required=listeners_require_auth,
        tls=_tls_configured(config),
    )


def _tls_configured(config: BrokerConfig) -> bool:
    return any(
        config.get_str(name) is not None
        for name in (
            "admin.ssl.keystore.location",
            "admin.ssl.keystore.certificate.chain",
            "admin.ssl.keystore.key",
        )
    )


def admin_ssl_context(config: BrokerConfig) -> ssl.SSLContext | None:
    """The endpoint's TLS context from ``admin.ssl.keystore.*`` (Kafka's PEM key store: a file with
    the key and the chain, or both inline), None for plain HTTP; :class:`ConfigError` otherwise."""
    if not _tls_configured(config):
        return None
    location = config.get_str("admin.ssl.keystore.location")
    chain = config.get_str("admin.ssl.keystore.certificate.chain")
    key = config.get_str("admin.ssl.keystore.key")
    password = config.get_str("admin.ssl.key.password")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if location is not None:
        if chain is not None or key is not None:
            raise ConfigError(
                "set admin.ssl.keystore.location or admin.ssl.keystore.certificate.chain with "
                "admin.ssl.keystore.key, not both"
            )
        _load(context, location, None, password, f"admin.ssl.keystore.location {location}")
        return context
    if chain is None or key is None:
        raise ConfigError("admin.ssl.keystore.certificate.chain and admin.ssl.keystore.key go together")
    # The ssl module loads keys from files only: a private directory, gone once they are loaded.
    with tempfile.TemporaryDirectory(prefix="kompakt-admin-tls-") as scratch:
        chain_path, key_path = os.path.join(scratch, "chain.pem"), os.path.join(scratch, "key.pem")
        for path, text in ((chain_path, chain), (key_path, key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text if text.endswith("\n") else text + "\n")
        _load(context, chain_path, key_path, password, "admin.ssl.keystore.certificate.chain/key")
    return context


def _load(
    context: ssl.SSLContext, certfile: str, keyfile: str | None, password: str | None, what: str
) -> None:
    try:
        context.load_cert_chain(certfile, keyfile, password)
    except (OSError, ssl.SSLError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(
            f"cannot load the admin endpoint's TLS key and certificate from {what}: {reason}"
        ) from None
