"""Length and count checks of a request frame against its schema, before anything is allocated.

kio 0.6.5's native reader sizes a Rust ``Vec`` from an array's count before it reads a single
element: a 40-byte frame whose compact-array count is a five-byte uvarint near 2^32 asks the
allocator for 34 GB, and a failed allocation aborts the whole process. Kafka's generated readers
refuse such a count ("Tried to allocate a collection of size N, but there are only M bytes
remaining", in every ``*Data.read``); this module does the same in front of kio, so that a frame
reaches kio only when every length and count in it is backed by bytes that are really there.

A :class:`Struct` is the wire layout of one entity: a short program of ops, built by
:mod:`kompakt.protocol.codec` from kio's classes (this module does not know kio), with runs of
fixed-size fields merged into one skip. :func:`compile_checker` turns the layouts of a request's
header and body into one Python function, the way Kafka generates a reader per message: every
nested entity and array element inlined, an array of fixed-size elements checked with one
multiplication, no per-field dispatch. A Produce request then costs a few operations whatever its
record bytes, and a Fetch request a few per partition (``bench/bench_protocol.py`` measures it).

The check follows kio's grammar exactly (the same null markers, the same non-nullable strings, the
same tagged fields) and adds only the bounds, so a frame that kio decodes and that is not lying
about its lengths passes unchanged. Beyond the bounds it checks two things kio skips: a tagged
field's declared size must be what its value takes (kio reads the value by its schema and ignores
the size), and an unknown tag is refused here (kio 0.6.5 refuses it too, with a ``KeyError``).

For fuzzers, the same function records where every length, count, null marker and tag header of
a frame sits (:func:`Checker.length_fields`); the hot path only pays an ``is not None`` test for it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NoReturn, TypeAlias

from kompakt.errors import KompaktError

#: Op codes of a :class:`Struct`'s program.
SKIP = 0  # ``size`` bytes of fixed-size fields
COMPACT_STRING = 1  # uvarint length + 1 (0 is null), then the bytes (compact string, bytes, records)
LEGACY_STRING = 2  # int16 length (-1 is null), then the bytes
LEGACY_BYTES = 3  # int32 length (-1 is null), then the bytes (bytes, records)
COMPACT_ARRAY = 4  # uvarint count + 1 (0 is null), then the elements
LEGACY_ARRAY = 5  # int32 count (-1 is null), then the elements
STRUCT = 6  # a nested entity, inline
NULLABLE_STRUCT = 7  # int8 marker (-1 is null), then the entity (KIP-893)

#: ``(code, size_or_nullable, element, field_name)``: ``size_or_nullable`` is the byte count of a
#: skip and 1/0 for a nullable/non-nullable string; ``element`` is the entity of a struct op or the
#: element layout of an array (:data:`NO_ELEMENT` for other ops).
Op: TypeAlias = "tuple[int, int, Struct, str]"

_MIN_SIZE = {
    COMPACT_STRING: 1,
    LEGACY_STRING: 2,
    LEGACY_BYTES: 4,
    COMPACT_ARRAY: 1,
    LEGACY_ARRAY: 4,
    NULLABLE_STRUCT: 1,
}


class FrameBoundsError(KompaktError):
    """A length, count or tag in a frame that the frame's bytes cannot back."""


@dataclass(frozen=True, slots=True, eq=False)
class Struct:
    """The wire layout of one entity (or of one array element or tagged value).

    ``tagged`` entities end with Kafka's tagged-field section (flexible versions); ``tags`` maps
    each known tag to the layout of its value. ``min_size`` is the fewest bytes one instance can
    take, which bounds an array's count by the bytes left; ``fixed_size`` is its exact size when
    every instance takes the same number of bytes (``None`` otherwise).
    """

    name: str
    ops: tuple[Op, ...]
    tagged: bool = False
    tags: Mapping[int, Struct] = field(default_factory=lambda: MappingProxyType({}))
    min_size: int = 0
    fixed_size: int | None = None


#: The ``element`` of ops that have none.
NO_ELEMENT = Struct("-", ())


def skip(size: int, name: str) -> Op:
    """``size`` bytes of fixed-size fields."""
    return (SKIP, size, NO_ELEMENT, name)


def string(code: int, nullable: bool, name: str) -> Op:
    """A length-prefixed string or byte field (``COMPACT_STRING``, ``LEGACY_STRING``, ``LEGACY_BYTES``)."""
    return (code, int(nullable), NO_ELEMENT, name)


def array(compact: bool, element: Struct, name: str) -> Op:
    """A counted array of ``element``."""
    return (COMPACT_ARRAY if compact else LEGACY_ARRAY, 0, element, name)


def nested(entity: Struct, nullable: bool, name: str) -> Op:
    """A nested entity, inline or behind Kafka's int8 null marker."""
    return (NULLABLE_STRUCT if nullable else STRUCT, 0, entity, name)


def layout(
    name: str, ops: list[Op], tagged: bool = False, tags: Mapping[int, Struct] | None = None
) -> Struct:
    """A :class:`Struct` from its ops, with adjacent skips merged and its sizes computed."""
    merged: list[Op] = []
    for op in ops:
        if op[0] == SKIP and merged and merged[-1][0] == SKIP:
            previous = merged[-1]
            merged[-1] = (SKIP, previous[1] + op[1], NO_ELEMENT, previous[3])
        else:
            merged.append(op)
    min_size = sum(_op_min_size(op) for op in merged) + (1 if tagged else 0)
    fixed = not tagged and all(op[0] == SKIP for op in merged)
    return Struct(
        name=name,
        ops=tuple(merged),
        tagged=tagged,
        tags=MappingProxyType(dict(tags or {})),
        min_size=min_size,
        fixed_size=min_size if fixed else None,
    )


def _op_min_size(op: Op) -> int:
    code = op[0]
    if code == SKIP:
        return op[1]
    if code == STRUCT:
        return op[2].min_size
    return _MIN_SIZE[code]


@dataclass(frozen=True, slots=True)
class LengthField:
    """Where one length, count, null marker or tag header sits in a frame.

    ``encoding`` is ``"uvarint"``, ``"int8"``, ``"int16"`` or ``"int32"``; ``width`` its bytes in
    this frame; ``role`` one of ``"string"``, ``"array"``, ``"null-marker"``, ``"tag-count"``,
    ``"tag"``, ``"tag-size"``.
    """

    position: int
    width: int
    encoding: str
    role: str
    name: str


#: A compiled walk: ``(frame, start, end, marks) -> end of the layouts``.
_Walk: TypeAlias = Callable[[bytes | memoryview, int, int, list[LengthField] | None], int]


class Checker:
    """The compiled check of one request layout (header and body, one after the other)."""

    __slots__ = ("_walk", "source")

    def __init__(self, walk: _Walk, source: str) -> None:
        self._walk = walk
        #: The generated Python source, for debugging.
        self.source = source

    def check(self, frame: bytes | memoryview) -> int:
        """Where the layouts end in ``frame``; :class:`FrameBoundsError` for a length it cannot back."""
        try:
            return self._walk(frame, 0, len(frame), None)
        except (IndexError, struct.error):
            raise FrameBoundsError(f"frame of {len(frame)} bytes ends inside a length field") from None

    def length_fields(self, frame: bytes | memoryview) -> list[LengthField]:
        """Every length field of ``frame`` in order (the frame must pass :meth:`check`)."""
        marks: list[LengthField] = []
        try:
            self._walk(frame, 0, len(frame), marks)
        except (IndexError, struct.error):
            raise FrameBoundsError(f"frame of {len(frame)} bytes ends inside a length field") from None
        return marks


def compile_checker(layouts: tuple[Struct, ...], name: str) -> Checker:
    """Generate and compile the check of ``layouts`` read one after another from a frame's start."""
    source = _Source()
    source.line(0, "def walk(buf, pos, end, marks):")
    for entity in layouts:
        source.entity(1, entity)
    source.line(1, "return pos")
    text = "\n".join(source.lines) + "\n"
    namespace: dict[str, object] = dict(source.constants)
    exec(compile(text, f"<bounds check of {name}>", "exec"), namespace)  # noqa: S102 - generated from schema metadata only
    return Checker(namespace["walk"], text)  # type: ignore[arg-type]


class _Source:
    """Python source of one walk, with its constants (names, tag tables, helpers) by name."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.constants: dict[str, object] = {
            "_uvarint": _uvarint,
            "_i16": struct.Struct(">h").unpack_from,
            "_i32": struct.Struct(">i").unpack_from,
            "_Mark": LengthField,
            "_tagged": _tagged_fields,
            "_short": _short,
            "_too_long": _too_long,
            "_too_many": _too_many,
            "_null": _null,
            "_negative": _negative,
        }

    def line(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def constant(self, value: object) -> str:
        name = f"_k{len(self.constants)}"
        self.constants[name] = value
        return name

    def entity(self, depth: int, entity: Struct) -> None:
        for code, arg, element, field_name in entity.ops:
            where = repr(f"{entity.name}.{field_name}")
            if code == SKIP:
                self.line(depth, f"pos += {arg}")
                self.line(depth, "if pos > end:")
                self.line(depth + 1, f"_short({where}, pos, end)")
            elif code in (COMPACT_STRING, COMPACT_ARRAY):
                role = "string" if code == COMPACT_STRING else "array"
                self._uvarint_length(depth, where, role)
                if code == COMPACT_STRING:
                    self.line(depth, "if n:")
                    self._advance(depth + 1, where, "n - 1")
                    if not arg:
                        self.line(depth, "else:")
                        self.line(depth + 1, f"_null({where})")
                else:
                    self.line(depth, "if n > 1:")
                    self._elements(depth + 1, where, element, "n - 1")
            elif code in (LEGACY_STRING, LEGACY_BYTES):
                read, width = ("_i16", 2) if code == LEGACY_STRING else ("_i32", 4)
                self.line(depth, f"(n,) = {read}(buf, pos)")
                self._mark(depth, "pos", str(width), f"int{width * 8}", "string", where)
                self.line(depth, f"pos += {width}")
                self.line(depth, "if n > 0:")
                self._advance(depth + 1, where, "n")
                self.line(depth, "elif n < 0:" if not arg else "elif n < -1:")
                self.line(
                    depth + 1,
                    f"_negative({where}, n)"
                    if arg
                    else f"_null({where}) if n == -1 else _negative({where}, n)",
                )
            elif code == LEGACY_ARRAY:
                self.line(depth, "(n,) = _i32(buf, pos)")
                self._mark(depth, "pos", "4", "int32", "array", where)
                self.line(depth, "pos += 4")
                self.line(depth, "if n > 0:")
                self._elements(depth + 1, where, element, "n")
                self.line(depth, "elif n < -1:")
                self.line(depth + 1, f"_negative({where}, n)")
            elif code == STRUCT:
                self.entity(depth, element)
            else:  # NULLABLE_STRUCT: any marker but -1 means present, as kio reads it
                self._mark(depth, "pos", "1", "int8", "null-marker", where)
                self.line(depth, "pos += 1")
                self.line(depth, "if buf[pos - 1] != 255:")
                self._block(depth + 1, element)
        if entity.tagged:
            tags = self.constant(
                {tag: compile_checker((value,), value.name) for tag, value in entity.tags.items()}
            )
            self.line(depth, "if buf[pos] or marks is not None:")
            self.line(depth + 1, f"pos = _tagged({tags}, {entity.name!r}, buf, pos, end, marks)")
            self.line(depth, "else:")
            self.line(depth + 1, "pos += 1")

    def _block(self, depth: int, entity: Struct) -> None:
        """``entity`` as the body of an ``if`` or ``for`` (``pass`` when it has nothing to check)."""
        before = len(self.lines)
        self.entity(depth, entity)
        if len(self.lines) == before:
            self.line(depth, "pass")

    def _uvarint_length(self, depth: int, where: str, role: str) -> None:
        """Read a uvarint into ``n`` (one byte inline, longer ones in :func:`_uvarint`)."""
        self.line(depth, "n = buf[pos]")
        self.line(depth, "if n < 128:")
        self._mark(depth + 1, "pos", "1", "uvarint", role, where)
        self.line(depth + 1, "pos += 1")
        self.line(depth, "else:")
        self.line(depth + 1, "start = pos")
        self.line(depth + 1, f"n, pos = _uvarint(buf, pos, {where})")
        self._mark(depth + 1, "start", "pos - start", "uvarint", role, where)

    def _advance(self, depth: int, where: str, length: str) -> None:
        self.line(depth, f"pos += {length}")
        self.line(depth, "if pos > end:")
        self.line(depth + 1, f"_too_long({where}, {length}, pos, end)")

    def _elements(self, depth: int, where: str, element: Struct, count: str) -> None:
        self.line(depth, f"if {count} > (end - pos) // {max(element.min_size, 1)}:")
        self.line(depth + 1, f"_too_many({where}, {count}, end - pos)")
        if element.fixed_size is not None:
            self.line(depth, f"pos += ({count}) * {element.fixed_size}")
            return
        self.line(depth, f"for _ in range({count}):")
        self._block(depth + 1, element)

    def _mark(self, depth: int, position: str, width: str, encoding: str, role: str, where: str) -> None:
        self.line(depth, "if marks is not None:")
        self.line(depth + 1, f"marks.append(_Mark({position}, {width}, {encoding!r}, {role!r}, {where}))")


def _uvarint(buf: bytes | memoryview, pos: int, where: str) -> tuple[int, int]:
    """A uvarint of at most five bytes, as kio and Kafka's ``ByteUtils.readUnsignedVarint`` read it.

    Unrolled for the lengths of record batches (two or three bytes), the common case here.
    """
    byte = buf[pos]
    value = byte & 0x7F
    if byte < 0x80:
        return value, pos + 1
    byte = buf[pos + 1]
    value |= (byte & 0x7F) << 7
    if byte < 0x80:
        return value, pos + 2
    byte = buf[pos + 2]
    value |= (byte & 0x7F) << 14
    if byte < 0x80:
        return value, pos + 3
    byte = buf[pos + 3]
    value |= (byte & 0x7F) << 21
    if byte < 0x80:
        return value, pos + 4
    byte = buf[pos + 4]
    if byte >= 0x80:
        raise FrameBoundsError(f"{where}: varint longer than five bytes")
    return value | byte << 28, pos + 5


def _tagged_fields(  # noqa: PLR0913 - the walk's state, as the generated code holds it
    tags: Mapping[int, Checker],
    name: str,
    buf: bytes | memoryview,
    pos: int,
    end: int,
    marks: list[LengthField] | None,
) -> int:
    """Kafka's tagged-field section: a count, then per field its tag, its size and its value."""
    where = f"{name} tagged fields"
    start = pos
    count, pos = _uvarint(buf, pos, where)
    if marks is not None:
        marks.append(LengthField(start, pos - start, "uvarint", "tag-count", where))
    if count > (end - pos) // 2:  # a tag and a size take a byte each at least
        raise FrameBoundsError(f"{where}: {count} tags, but there are only {end - pos} bytes remaining")
    for _ in range(count):
        start = pos
        tag, pos = _uvarint(buf, pos, where)
        if marks is not None:
            marks.append(LengthField(start, pos - start, "uvarint", "tag", where))
        start = pos
        size, pos = _uvarint(buf, pos, where)
        if marks is not None:
            marks.append(LengthField(start, pos - start, "uvarint", "tag-size", f"{where}: tag {tag}"))
        if size > end - pos:
            raise FrameBoundsError(
                f"{where}: tag {tag} of {size} bytes, but there are only {end - pos} remaining"
            )
        value = tags.get(tag)
        if value is None:
            raise FrameBoundsError(f"{where}: unknown tag {tag}")
        stop = pos + size
        pos = value._walk(buf, pos, end, marks)  # noqa: SLF001 - the generated walks share one module
        if pos != stop:
            raise FrameBoundsError(
                f"{where}: tag {tag} declares {size} bytes but its value takes {pos - stop + size}"
            )
    return pos


def _short(where: str, pos: int, end: int) -> NoReturn:
    raise FrameBoundsError(f"{where}: the frame ends {pos - end} bytes early")


def _too_long(where: str, length: int, pos: int, end: int) -> NoReturn:
    remaining = end - (pos - length)
    raise FrameBoundsError(f"{where}: length {length}, but there are only {remaining} bytes remaining")


def _too_many(where: str, count: int, remaining: int) -> NoReturn:
    raise FrameBoundsError(
        f"{where}: tried to allocate a collection of size {count}, "
        f"but there are only {remaining} bytes remaining"
    )


def _null(where: str) -> NoReturn:
    raise FrameBoundsError(f"{where}: null in a non-nullable field")


def _negative(where: str, value: int) -> NoReturn:
    raise FrameBoundsError(f"{where}: negative length {value}")
