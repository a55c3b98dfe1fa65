"""The line and record formats, without a broker."""

from __future__ import annotations

import io

import pytest

from kompakt.cli.consume_cmd import RecordFormat
from kompakt.cli.output import CliUsageError
from kompakt.cli.produce_cmd import build_format, read_lines


class FakeMessage:
    def __init__(
        self, key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]]
    ) -> None:
        self._key, self._value, self._headers = key, value, headers

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> list[tuple[str, bytes | None]]:
        return self._headers

    def topic(self) -> str:
        return "t"

    def partition(self) -> int:
        return 2

    def offset(self) -> int:
        return 41

    def timestamp(self) -> tuple[int, int]:
        return (1, 1700000000000)


def test_record_format_fields_and_escapes() -> None:
    fmt = RecordFormat.compile("%t-%p@%o %T [%k|%v] %K/%S {%h} 100%%\\t\\n", "(null)")
    msg = FakeMessage(None, b"", [("a", b"1"), ("b", None)])
    assert fmt.render(msg) == b"t-2@41 1700000000000 [(null)|] -1/0 {a=1,b=(null)} 100%\t\n"
    assert RecordFormat.compile("%v", "~").render(FakeMessage(b"k", None, [])) == b"~"


@pytest.mark.parametrize("bad", ["%x", "trailing %"])
def test_record_format_rejects_unknown_fields(bad: str) -> None:
    with pytest.raises(CliUsageError):
        RecordFormat.compile(bad, "(null)")


def test_line_format_native_and_kafka_spelling_agree() -> None:
    native = build_format(":", "TOMBS", [], [])
    kafka = build_format(None, None, [], ["parse.key=true", "key.separator=:", "null.marker=TOMBS"])
    for fmt in (native, kafka):
        assert fmt.parse(b"user_id_99:TOMBS", 1) == (b"user_id_99", None, [])
        assert fmt.parse(b"k:", 2) == (b"k", b"", [])
        assert fmt.parse(b"k:a:b", 3) == (b"k", b"a:b", [])
        with pytest.raises(ValueError, match="no key separator ':' found"):
            fmt.parse(b"nosep", 4)
    assert build_format(None, None, [], []).parse(b"a\tb", 1) == (None, b"a\tb", [])
    tab = build_format("\\t", None, [], [])
    assert tab.parse(b"a\tb", 1) == (b"a", b"b", [])
    lenient = build_format(None, None, [], ["parse.key=true", "ignore.error=true"])
    assert lenient.parse(b"only-value", 1) == (None, b"only-value", [])


def test_line_format_headers() -> None:
    fmt = build_format(None, "N", ["static=s"], ["parse.headers=true", "parse.key=true", "key.separator=="])
    assert fmt.parse(b"h:1,g:N\tk=v", 1) == (b"k", b"v", [("static", b"s"), ("h", b"1"), ("g", None)])


@pytest.mark.parametrize(
    "props", [["parse.key=maybe"], ["key.separator="], ["null.marker="], ["unknown.property=1"], ["noequals"]]
)
def test_line_format_usage_errors(props: list[str]) -> None:
    with pytest.raises(CliUsageError):
        build_format(None, None, [], props)


def test_read_lines_strips_terminators_only() -> None:
    assert list(read_lines(io.BytesIO(b"a\r\n\nb \nlast"))) == [b"a", b"", b"b ", b"last"]


def test_kcat_format_tokens_as_kcat_has_them() -> None:
    """Issue 28: kcat's ``%s`` is the payload (``%v`` stays as kompakt's old spelling), ``%R`` the
    payload size as 4 big-endian bytes, and ``\\xXX`` / ``\\xNNN`` any character."""
    msg = FakeMessage(b"k", b"hello", [])
    assert RecordFormat.compile("%k=%s\\n", "(null)").render(msg) == b"k=hello\n"
    assert RecordFormat.compile("%v", "(null)").render(msg) == b"hello"
    assert RecordFormat.compile("%R%s", "(null)").render(msg) == b"\x00\x00\x00\x05hello"
    assert RecordFormat.compile("%R", "").render(FakeMessage(b"k", None, [])) == b"\xff\xff\xff\xff"
    assert RecordFormat.compile("%k\\x09%s\\x044", "").render(msg) == b"k\thello,"
    with pytest.raises(CliUsageError):
        RecordFormat.compile("\\xZZ", "")
