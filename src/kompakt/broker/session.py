"""Who is on a connection: the listener it came in on, its security protocol and its principal.

The server owns sockets, TLS and the order of frames; the broker layer decides what a client may
do. This module is the seam between them. A :class:`Session` is created per accepted connection
by the server (from the listener's configuration) and handed to every request's
:class:`~kompakt.broker.context.RequestContext`. It is mutable because SASL authenticates a
connection after it is accepted (and KIP-152 re-authenticates it later): the SASL handlers set
:attr:`Session.principal`, the authorizer reads it.

Principals are Kafka's ``KafkaPrincipal``: a type (always ``User`` for the built-in builders)
and a name, printed ``User:alice`` as ACLs and ``kafka-acls`` spell them.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The security protocols of ``listener.security.protocol.map`` (Kafka's ``SecurityProtocol``).
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """An authenticated identity as Kafka names it (``User:alice``)."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``User:alice`` → principal; a name without a type is refused, as Kafka's SecurityUtils does."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type or not name:
            raise ValueError(f"invalid principal {text!r}: expected TYPE:NAME, e.g. User:alice")
        return cls(principal_type, name)


#: Kafka's ``KafkaPrincipal.ANONYMOUS``: every client of a PLAINTEXT listener, and of an SSL one
#: without a client certificate.
ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")


@dataclass(slots=True)
class Session:
    """One connection's identity; the server creates it, SASL may change :attr:`principal`."""

    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    principal: KafkaPrincipal = ANONYMOUS
    #: True once the connection may send any API: always on PLAINTEXT/SSL listeners, after a
    #: successful SaslAuthenticate on SASL_* listeners.
    authenticated: bool = True
    #: The SASL handlers' per-connection state (:class:`kompakt.broker.sasl.state.SaslState`);
    #: typed loosely so this seam does not depend on the SASL package.
    sasl: object | None = None
    #: Set by a handler whose response must be the connection's last (a failed SASL
    #: authentication, as Kafka closes the channel after sending the failure).
    close_after_response: bool = False

    @property
    def requires_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")
