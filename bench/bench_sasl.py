"""SCRAM handshake time (issue 27): connect + SCRAM-SHA-512 authenticate, median over N.

Starts ``kompakt serve`` with a PLAINTEXT and a SASL_PLAINTEXT listener, the user written into the
data directory first (``kompakt storage add-scram``), and times, per fresh TCP connection, what a
client does before its first real request:

* ``plaintext``: connect + ApiVersions (the baseline, measured in the same run);
* ``scram_sha_512`` / ``scram_sha_256``: connect + ApiVersions + SaslHandshake + the two
  SaslAuthenticate round trips of SCRAM, the client computing its proof from the password as
  librdkafka does (PBKDF2 with the server's salt and iteration count, 4096 here), and checking the
  server's signature;
* ``plain``: connect + ApiVersions + SaslHandshake + one SaslAuthenticate.

``client_pbkdf2_ms`` is the client's share (its PBKDF2) of the SCRAM figures; the broker never
runs PBKDF2 at login (it keeps StoredKey/ServerKey), only HMACs and hashes.
Options: ``--connections N`` (default 200).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import os
import re
import select
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey

LISTENER = re.compile(r"(?P<name>[A-Z0-9_]+)://127\.0\.0\.1:(?P<port>\d+)")
DEADLINE_S = 60.0
API_VERSIONS = {"client_software_name": "bench", "client_software_version": "1"}
PASSWORD = "bench-secret"
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_bench="bench-secret";'


def frame_of(api_key: int, version: int, values: object, correlation_id: int) -> bytes:
    body = codec.build(codec.request_class(api_key, version), values)  # type: ignore[arg-type]
    return codec.encode_request(body, correlation_id, "bench")


def read_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return bytes(data)


class Session:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.next_id = 0

    def request(self, api_key: int, version: int, values: object) -> object:
        self.next_id += 1
        self.sock.sendall(frame_of(api_key, version, values, self.next_id))
        _, response = codec.decode_response(read_frame(self.sock), api_key, version)
        return response

    def close(self) -> None:
        self.sock.close()


def scram_login(session: Session, mechanism: str, pbkdf2_s: list[float]) -> None:
    algorithm = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    assert session.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism}).error_code == 0  # type: ignore[attr-defined]
    bare = f"n=bench,r={base64.b64encode(os.urandom(18)).decode()}"
    first = session.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": f"n,,{bare}".encode()})
    server_first = first.auth_bytes.decode()  # type: ignore[attr-defined]
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    started = time.perf_counter()
    salted = hashlib.pbkdf2_hmac(
        algorithm, PASSWORD.encode(), base64.b64decode(fields["s"]), int(fields["i"])
    )
    pbkdf2_s.append(time.perf_counter() - started)
    client_key = hmac.new(salted, b"Client Key", algorithm).digest()
    stored = hashlib.new(algorithm, client_key).digest()
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored, auth_message, algorithm).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    final = session.request(
        ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": f"{without_proof},p={proof}".encode()}
    )
    assert final.error_code == 0, final  # type: ignore[attr-defined]
    server_key = hmac.new(salted, b"Server Key", algorithm).digest()
    expected = b"v=" + base64.b64encode(hmac.new(server_key, auth_message, algorithm).digest())
    assert final.auth_bytes == expected  # type: ignore[attr-defined]


def plain_login(session: Session) -> None:
    assert session.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == 0  # type: ignore[attr-defined]
    response = session.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": f"\0bench\0{PASSWORD}".encode()})
    assert response.error_code == 0  # type: ignore[attr-defined]


def timed(port: int, count: int, login: Callable[[Session], None]) -> dict[str, float]:
    times: list[float] = []
    for _ in range(count):
        started = time.perf_counter()
        session = Session(port)
        session.request(ApiKey.API_VERSIONS, 3, API_VERSIONS)
        login(session)
        times.append(time.perf_counter() - started)
        session.close()
    times.sort()
    return {
        "median_ms": round(statistics.median(times) * 1000, 3),
        "p90_ms": round(times[int(len(times) * 0.9)] * 1000, 3),
    }


def start_broker(data_dir: Path) -> tuple[subprocess.Popen[str], dict[str, int]]:
    overrides = [
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
    ]
    command = [sys.executable, "-m", "kompakt.cli.main", "serve", "--data-dir", str(data_dir), "--port", "0"]
    command += ["--admin-port", "-1"]  # a SASL listener would make the admin endpoint require a token
    for override in overrides:
        command += ["--override", override]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    deadline = time.monotonic() + DEADLINE_S
    while True:
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            raise RuntimeError("the broker did not start")
        ready, _, _ = select.select([process.stdout], [], [], 1.0)
        line = process.stdout.readline() if ready else ""
        if line.startswith("kompakt ready:"):
            head = line.split(", data directory ")[0]
            return process, {m["name"]: int(m["port"]) for m in LISTENER.finditer(head)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=200)
    args, _ = parser.parse_known_args()
    with tempfile.TemporaryDirectory(prefix="bench-sasl-") as tmp:
        data_dir = Path(tmp) / "data"
        subprocess.run(
            [
                sys.executable, "-m", "kompakt.cli.main", "storage", "add-scram", "--data-dir", str(data_dir),
                f"SCRAM-SHA-512=[name=bench,password={PASSWORD}]",
                f"SCRAM-SHA-256=[name=bench,password={PASSWORD}]",
            ],
            check=True,
            capture_output=True,
        )  # fmt: skip
        process, ports = start_broker(data_dir)
        try:
            sasl = ports["SASL_PLAINTEXT"]
            timed(sasl, 10, lambda s: scram_login(s, "SCRAM-SHA-512", []))  # warm-up
            report: dict[str, object] = {"connections": args.connections, "iterations": 4096}
            report["plaintext"] = timed(ports["PLAINTEXT"], args.connections, lambda s: None)
            for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
                pbkdf2: list[float] = []
                figures = timed(sasl, args.connections, lambda s, m=mechanism, p=pbkdf2: scram_login(s, m, p))
                figures["client_pbkdf2_ms"] = round(statistics.median(pbkdf2) * 1000, 3)
                report[mechanism.lower().replace("-", "_")] = figures
            report["plain"] = timed(sasl, args.connections, plain_login)
        finally:
            process.terminate()
            process.wait(30)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
