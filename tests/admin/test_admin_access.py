"""The admin endpoint refuses what a web page or another machine could make it do (issue 27 item 4).

Each request is sent as the attacker's browser would send it, with ``http.client`` so that the
``Host``, ``Origin`` and ``Content-Type`` headers are exactly the ones under test; the effect is
checked on the log (a refused compaction leaves every record in place).
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from kompakt.testing import InProcessBroker

from .conftest import COMPACTED, produce

TOKEN = "s3cret-admin-token"


def send(
    url: str, method: str, path: str, *, headers: dict[str, str] | None = None, body: bytes | None = None
) -> tuple[int, Any]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        connection.putrequest(method, path, skip_host="Host" in (headers or {}))
        for name, value in (headers or {}).items():
            connection.putheader(name, value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        raw = response.read()
        return response.status, json.loads(raw) if raw.startswith((b"{", b"[")) else raw
    finally:
        connection.close()


def records_in(broker: InProcessBroker) -> int:
    status, data = send(broker.admin_url, "GET", f"/v1/partitions?topic={COMPACTED}")
    assert status == 200, data
    return sum(p["log_end_offset"] - p["log_start_offset"] for p in data["partitions"])


def fill_and_roll(broker: InProcessBroker) -> None:
    produce(broker.bootstrap_servers, COMPACTED, [(b"k", str(i).encode()) for i in range(50)], partition=0)
    broker.roll(COMPACTED, 0)


def test_a_cross_site_text_plain_post_does_not_compact(broker: InProcessBroker) -> None:
    fill_and_roll(broker)
    path = f"/v1/compact?topic={COMPACTED}&partition=0&wait=true"
    status, data = send(broker.admin_url, "POST", path, headers={"Content-Type": "text/plain"}, body=b"x")
    assert status == 415 and "application/json" in data["error"]
    status, data = send(
        broker.admin_url,
        "POST",
        path,
        headers={"Content-Type": "application/json", "Origin": "https://evil.example"},
        body=b"{}",
    )
    assert status == 403 and "origin" in data["error"].lower()
    status, _ = send(
        broker.admin_url,
        "POST",
        path,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        body=b"a=1",
    )
    assert status == 415
    assert records_in(broker) == 50  # nothing was cleaned
    status, data = send(
        broker.admin_url, "POST", path, headers={"Content-Type": "application/json"}, body=b"{}"
    )
    assert status == 200 and data["partitions"][0]["records_written"] == 1


def test_a_dns_rebinding_host_gets_no_data(broker: InProcessBroker) -> None:
    fill_and_roll(broker)
    status, data = send(
        broker.admin_url, "GET", f"/v1/partitions?topic={COMPACTED}", headers={"Host": "evil.example"}
    )
    assert status == 403 and "evil.example" in data["error"]
    port = urlsplit(broker.admin_url).port
    status, _ = send(
        broker.admin_url, "GET", f"/v1/partitions?topic={COMPACTED}", headers={"Host": f"localhost:{port}"}
    )
    assert status == 200


def test_nested_or_oversized_json_is_a_400(broker: InProcessBroker) -> None:
    headers = {"Content-Type": "application/json"}
    nested = b"[" * 100_000 + b"]" * 100_000
    status, data = send(broker.admin_url, "POST", "/v1/clock/advance", headers=headers, body=nested)
    assert status == 400, data
    big = json.dumps({"by": "1s", "pad": "x" * 200_000}).encode()
    status, data = send(broker.admin_url, "POST", "/v1/clock/advance", headers=headers, body=big)
    assert status == 400 and "bytes" in data["error"]


@pytest.fixture
def exposed(tmp_path: Path) -> Iterator[InProcessBroker]:
    """An endpoint bound beyond loopback: it needs a token."""
    with InProcessBroker(
        tmp_path / "data",
        host="0.0.0.0",
        overrides={"admin.auth.token": TOKEN, "log.cleaner.enable": "false"},  # noqa: S104
    ) as b:
        b.create_topic(COMPACTED, 1, cleanup_policy="compact")
        yield b


def test_beyond_loopback_every_request_but_healthz_needs_the_token(exposed: InProcessBroker) -> None:
    url = exposed.admin_url.replace("0.0.0.0", "127.0.0.1")  # noqa: S104
    status, data = send(url, "GET", "/v1/partitions")
    assert status == 401 and "token" in data["error"].lower()
    status, _ = send(url, "GET", "/v1/partitions", headers={"Authorization": "Bearer wrong"})
    assert status == 401
    status, data = send(url, "GET", "/v1/partitions", headers={"Authorization": f"Bearer {TOKEN}"})
    assert status == 200 and data["partitions"][0]["topic"] == COMPACTED
    status, _ = send(url, "GET", "/healthz")
    assert status == 200


def test_beyond_loopback_without_a_token_the_broker_does_not_start(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="admin.auth.token"):
        InProcessBroker(tmp_path / "data", host="0.0.0.0").start()  # noqa: S104
