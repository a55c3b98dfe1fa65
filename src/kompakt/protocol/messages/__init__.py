"""Typed messages for the handlers: one module per Kafka API, generated from kio's classes.

One handler body serves every version of its API, so it needs a type that holds the fields of
*every* version it serves. kio has one class per version; each module here (``create_topics``,
``fetch``, ...) holds the union over the versions the broker serves (``VERSIONS``):

* the request as :class:`typing.Protocol` classes, read as typed attributes. A field that some
  served version lacks carries the value Kafka assumes when it is absent (the schema default, else
  the zero of its type), so a handler never asks whether a version has it. The codec hands the
  decoded kio object over as it is when its version has every field (the newest versions, what
  clients send), and a filled-in copy otherwise (:func:`kompakt.protocol.codec.request_view`);
* the response as :class:`Message` classes: slots and a keyword-only ``__init__``, so a misspelt
  field name is a mypy error and a ``TypeError`` when built, where a misspelt key in a mapping used
  to be dropped without a word. The codec turns one into kio's class for the version asked
  (:func:`kompakt.protocol.codec.from_message`), dropping the fields that version does not have.

A response field that every served version requires has no default; one whose default differs
between versions, or that only some versions require, defaults to :data:`UNSET`: each version's
own default, refused when building a version that requires the field (a handler that branches on
the version sets it in the branch that needs it).

The modules are written by ``python -m kompakt.protocol.messages_gen`` and checked against kio
and the handler table by ``tests/protocol/test_messages.py``; do not edit them by hand.
"""

from __future__ import annotations

from typing import Any

__all__ = ["UNSET", "Message"]


class _Unset:
    """The type of :data:`UNSET` (a sentinel, compared by identity)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSET"


#: A response field left unset: the built version's default for it (kio's default, ``None`` when
#: nullable, 0 for ``throttle_time``); building a version that requires the field raises
#: ``ValueError`` naming it.
UNSET: Any = _Unset()


class Message:
    """Base of the generated response classes: plain slots, compared and shown field by field."""

    __slots__ = ()

    def _field_names(self) -> tuple[str, ...]:
        names: tuple[str, ...] = type(self).__slots__
        return names

    def __repr__(self) -> str:
        values = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._field_names())
        return f"{type(self).__name__}({values})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self._field_names())
