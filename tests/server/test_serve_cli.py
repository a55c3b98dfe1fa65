"""``kompakt serve`` argument and config handling (errors exit 2 with one line)."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kompakt.cli.serve import UsageError, build_settings
from kompakt.protocol.apis import ApiKey
from tests.support.serve import start_broker
from tests.support.wire import request_bytes


def run_serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kompakt.cli.main", "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_unknown_config_exits_2_with_one_line(tmp_path: Path) -> None:
    result = run_serve("--data-dir", str(tmp_path / "d"), "--override", "log.retention.hourz=5")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: Unknown broker config name: log.retention.hourz (did you mean log.retention.hours?)"
    ]
    assert not (tmp_path / "d").exists()


def test_invalid_value_and_bad_override_syntax(tmp_path: Path) -> None:
    bad_value = run_serve("--data-dir", str(tmp_path / "d"), "--override", "num.partitions=0")
    assert bad_value.returncode == 2 and bad_value.stderr.startswith("error: ")
    assert len(bad_value.stderr.strip().splitlines()) == 1
    bad_syntax = run_serve("--override", "no-equals-sign")
    assert bad_syntax.returncode == 2
    assert bad_syntax.stderr.strip() == "error: --override expects name=value, got 'no-equals-sign'"


def test_settings_from_file_and_overrides(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("num.partitions=3\nlisteners=PLAINTEXT://0.0.0.0:19092\nlog.dirs=/var/k1,/var/k2\n")
    settings = build_settings(None, None, None, props, ["num.partitions=4"])
    assert settings.broker_config.num_partitions == 4
    assert (settings.host, settings.port) == ("0.0.0.0", 19092)
    assert settings.data_dir == Path("/var/k1")
    assert settings.advertised_host not in ("", "0.0.0.0")
    explicit = build_settings(tmp_path / "x", "127.0.0.1", 0, None, [])
    assert (explicit.host, explicit.port, explicit.data_dir) == ("127.0.0.1", 0, (tmp_path / "x").resolve())
    advertised = build_settings(
        None, None, None, None, ["advertised.listeners=PLAINTEXT://kafka.example:9093"]
    )
    assert (advertised.advertised_host, advertised.advertised_port) == ("kafka.example", 9093)


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read config file"):
        build_settings(None, None, None, tmp_path / "missing.properties", [])


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port another process would hold: a listening socket of this test."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


# A repeated option is not a plain command line: it goes through typer (the last one wins), the
# other path into run_serve.
@pytest.mark.parametrize("path", ["fast start", "typer"])
def test_taken_kafka_port_is_one_line_exit_1_and_nothing_created(
    tmp_path: Path, taken_port: int, path: str
) -> None:
    data_dir = tmp_path / "d"
    port_args = (
        ["--port", str(taken_port)] if path == "fast start" else ["--port", "0", "--port", str(taken_port)]
    )
    result = run_serve("--data-dir", str(data_dir), *port_args, "--admin-port", "0")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"error: 127.0.0.1:{taken_port} is in use; pass --port to use another port (0 picks a free one)"
    ]
    assert result.stdout == ""
    assert not data_dir.exists()


def test_taken_admin_port_is_one_line_exit_1_and_nothing_created(tmp_path: Path, taken_port: int) -> None:
    data_dir = tmp_path / "d"
    result = run_serve("--data-dir", str(data_dir), "--port", "0", "--admin-port", str(taken_port))
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"error: 127.0.0.1:{taken_port} is in use; pass --admin-port to use another port "
        "(0 picks a free one, -1 runs none)"
    ]
    assert not data_dir.exists()


def test_taken_port_of_an_existing_data_directory_leaves_it_untouched(
    tmp_path: Path, taken_port: int
) -> None:
    """A second broker started by mistake on a live broker's port must not lock, recover or
    rewrite anything in the data directory it was given."""
    data_dir = tmp_path / "d"
    data_dir.mkdir()
    (data_dir / "keep.txt").write_text("x")
    result = run_serve("--data-dir", str(data_dir), "--port", str(taken_port), "--admin-port", "-1")
    assert result.returncode == 1
    assert len(result.stderr.splitlines()) == 1
    assert sorted(p.name for p in data_dir.iterdir()) == ["keep.txt"]


def test_a_bad_group_setting_is_refused_before_the_data_directory_is_opened(tmp_path: Path) -> None:
    """The group coordinator's rules run when the config is read, like every other rule: one
    line, exit 2, and no data directory created (issue 32: they ran after it was opened)."""
    props = tmp_path / "server.properties"
    props.write_text("group.min.session.timeout.ms=10000\ngroup.max.session.timeout.ms=5000\n")
    data_dir = tmp_path / "d"
    result = run_serve(
        "--data-dir", str(data_dir), "--config", str(props), "--port", "0", "--admin-port", "-1"
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: group.min.session.timeout.ms must be within 0..group.max.session.timeout.ms"
    ]
    assert not data_dir.exists()


def test_socket_request_max_bytes_bounds_a_request(tmp_path: Path) -> None:
    """``socket.request.max.bytes`` is the largest request a connection takes: a larger one closes
    the connection unanswered (Kafka's ``InvalidReceiveException``), a smaller one is answered."""
    broker = start_broker(tmp_path / "d", "--admin-port", "-1", "--override", "socket.request.max.bytes=1000")
    try:
        small = request_bytes(
            ApiKey.API_VERSIONS, 3, {"client_software_name": "a", "client_software_version": "1"}
        )
        large = request_bytes(
            ApiKey.API_VERSIONS, 3, {"client_software_name": "a" * 1200, "client_software_version": "1"}
        )
        assert len(small) < 1000 < len(large)
        with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
            sock.sendall(small)
            assert len(_read_frame(sock)) > 0
        with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
            sock.sendall(large)
            assert sock.recv(4) == b""
    finally:
        broker.stop()


def _read_frame(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", _read_exactly(sock, 4))[0]
    return _read_exactly(sock, size)


def _read_exactly(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        assert chunk, "connection closed"
        data += chunk
    return data
