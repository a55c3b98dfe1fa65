"""A small client of a broker's admin HTTP endpoint (``kompakt serve --admin-port``).

Standard library only (``urllib``), so ``kompakt admin`` and scripts need nothing else. Every
method returns the endpoint's decoded JSON; failures are one-line :class:`KompaktError` messages:
:class:`AdminUnreachableError` when nothing answers at the URL, :class:`AdminRequestError` with
the HTTP status and the endpoint's ``{"error": ...}`` message otherwise.

Credentials: the bearer token an endpoint beyond loopback requires is given explicitly, or read
from ``$KOMPAKT_ADMIN_TOKEN``, or from the file ``$KOMPAKT_ADMIN_TOKEN_FILE`` names (its first
line); an ``https://`` endpoint with a private certificate authority is verified against
``$KOMPAKT_ADMIN_CAFILE``. A ``POST`` says ``Content-Type: application/json``, as the endpoint
requires of every state-changing request (a web page cannot send that type cross-site).
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from kompakt.errors import OperatorError

DEFAULT_ADMIN_URL = "http://127.0.0.1:9192"
TOKEN_ENV = "KOMPAKT_ADMIN_TOKEN"  # noqa: S105 - the variable's name, not a token
TOKEN_FILE_ENV = "KOMPAKT_ADMIN_TOKEN_FILE"  # noqa: S105 - a variable's name
CAFILE_ENV = "KOMPAKT_ADMIN_CAFILE"


class AdminUnreachableError(OperatorError):
    """Nothing answered at the admin URL (broker down, wrong port, no admin endpoint)."""


class AdminRequestError(OperatorError):
    """The endpoint answered with an error status."""

    def __init__(self, status: int, message: str, body: bytes | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


def read_token_file(path: str | Path) -> str:
    """The token in ``path`` (its first line, stripped); an :class:`OperatorError` if unreadable."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise OperatorError(f"cannot read the admin token file {path}: {reason}") from None
    token = lines[0].strip() if lines else ""
    if not token:
        raise OperatorError(f"the admin token file {path} holds no token")
    return token


def resolve_token(token: str | None = None, token_file: str | Path | None = None) -> str | None:
    """The token to send: ``token``, else ``token_file``'s, else ``$KOMPAKT_ADMIN_TOKEN``, else
    the file ``$KOMPAKT_ADMIN_TOKEN_FILE`` names; None when there is none (loopback needs none)."""
    if token:
        return token
    if token_file is not None:
        return read_token_file(token_file)
    from_env = os.environ.get(TOKEN_ENV, "").strip()
    if from_env:
        return from_env
    env_file = os.environ.get(TOKEN_FILE_ENV, "").strip()
    return read_token_file(env_file) if env_file else None


class AdminClient:
    """Calls the admin endpoint at ``base_url`` (e.g. ``http://127.0.0.1:9192``)."""

    def __init__(
        self,
        base_url: str = DEFAULT_ADMIN_URL,
        *,
        timeout_s: float = 300.0,
        token: str | None = None,
        token_file: str | Path | None = None,
        cafile: str | Path | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.token = resolve_token(token, token_file)
        cafile = cafile if cafile is not None else (os.environ.get(CAFILE_ENV, "").strip() or None)
        self._context: ssl.SSLContext | None = None
        if cafile is not None:
            try:
                self._context = ssl.create_default_context(cafile=str(cafile))
            except (OSError, ssl.SSLError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise OperatorError(f"cannot read the admin CA file {cafile}: {reason}") from None

    # ------------------------------------------------------------------ transport

    def request(self, method: str, path: str, **params: object) -> bytes:
        """One request; ``params`` with a None value are left out. Returns the raw body."""
        query = urlencode(
            {
                k: (str(v).lower() if isinstance(v, bool) else str(v))
                for k, v in params.items()
                if v is not None
            }
        )
        url = f"{self.base_url}{path}" + (f"?{query}" if query else "")
        if not url.startswith(("http://", "https://")):
            raise AdminUnreachableError(
                f"the admin URL must start with http:// or https://, got {self.base_url}"
            )
        headers = {"Accept": "application/json"}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if method != "GET":
            data = b"{}"
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(url, method=method, data=data, headers=headers)  # noqa: S310
        try:
            with urllib.request.urlopen(  # noqa: S310 - scheme checked
                req, timeout=self.timeout_s, context=self._context
            ) as response:
                body: bytes = response.read()
                return body
        except urllib.error.HTTPError as exc:
            body = exc.read()
            raise AdminRequestError(exc.code, f"{_error_message(body)} (HTTP {exc.code})", body) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            text = reason.strerror if isinstance(reason, OSError) and reason.strerror else str(reason)
            raise AdminUnreachableError(
                f"cannot reach the admin endpoint at {self.base_url}: {text}"
            ) from None

    def call(self, method: str, path: str, **params: object) -> Any:
        body = self.request(method, path, **params)
        try:
            return json.loads(body)
        except ValueError:
            raise AdminRequestError(
                200, f"the admin endpoint answered with non-JSON: {body[:80]!r}"
            ) from None

    # ------------------------------------------------------------------ operations

    def partitions(self, topic: str | None = None) -> Any:
        return self.call("GET", "/v1/partitions", topic=topic)

    def explain(self, topic: str, partition: int | None = None) -> Any:
        return self.call("GET", "/v1/explain", topic=topic, partition=partition)

    def readers(self, topic: str | None = None) -> Any:
        return self.call("GET", "/v1/readers", topic=topic)

    def roll(self, topic: str, partition: int | None = None) -> Any:
        return self.call("POST", "/v1/roll", topic=topic, partition=partition)

    def compact(self, topic: str, partition: int | None = None, *, wait: bool = True) -> Any:
        return self.call("POST", "/v1/compact", topic=topic, partition=partition, wait=wait)

    def retry(self, topic: str, partition: int) -> Any:
        return self.call("POST", "/v1/retry", topic=topic, partition=partition)

    def clock(self) -> Any:
        return self.call("GET", "/v1/clock")

    def advance_clock(self, by: str | int) -> Any:
        """Advance the manual clock by a duration (``"25h"``, ``"90s"``) or milliseconds."""
        return self.call("POST", "/v1/clock/advance", by=by)

    def metrics(self) -> str:
        return self.request("GET", "/metrics").decode()

    # ------------------------------------------------------------------ tables

    def table_get(self, topic: str, key: bytes, **params: object) -> Any:
        """The lookup answer for ``key``; an absent key is an answer (``found`` false), not an error."""
        path = f"/v1/topics/{quote(topic, safe='')}/keys/{quote(key, safe='')}"
        try:
            return self.call("GET", path, **params)
        except AdminRequestError as exc:
            if exc.status == 404 and exc.body is not None:
                try:
                    data = json.loads(exc.body)
                except ValueError:
                    raise exc from None
                if isinstance(data, dict) and "found" in data:
                    return data
            raise

    def table_scan(self, topic: str, **params: object) -> Any:
        """One page of the latest record per key (``next`` is the cursor of the following page)."""
        return self.call("GET", f"/v1/topics/{quote(topic, safe='')}/table", **params)

    def table_counts(self, topic: str, partition: int | None = None) -> Any:
        return self.call("GET", f"/v1/topics/{quote(topic, safe='')}/table/counts", partition=partition)


def _error_message(body: bytes) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return body.decode(errors="replace").strip() or "no message"
    if isinstance(data, dict) and "error" in data:
        return str(data["error"])
    return str(data)
