"""The authorizer's configs: ``authorizer.class.name`` (Kafka's broker config) and the two that
Kafka's ``StandardAuthorizer`` reads from the broker's properties, ``super.users`` and
``allow.everyone.if.no.acl.found``.

kompakt implements one authorizer, Kafka's StandardAuthorizer, under its Kafka class name, so a
``server.properties`` written for Kafka works unchanged; any other class name is refused at start
(kompakt cannot load a Java class, and running open when the operator asked for a custom
authorizer would be the wrong failure).
"""

from __future__ import annotations

from dataclasses import dataclass

from kompakt.config.defs import BOOL, STR, ConfigDef, ConfigValue, define, invalid

#: The one ``authorizer.class.name`` kompakt implements.
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@dataclass(frozen=True, slots=True)
class _AuthorizerClass:
    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        if value is None or not isinstance(value, str) or not value.strip():
            return
        if value.strip() != STANDARD_AUTHORIZER:
            raise invalid(
                name,
                value,
                f"kompakt implements only {STANDARD_AUTHORIZER} (leave it empty for no authorization)",
            )


AUTHORIZER_BROKER_DEFS: tuple[ConfigDef, ...] = (
    define("authorizer.class.name", STR, "", "The authorizer: empty (every request allowed, the ACL APIs "
           f"answer SECURITY_DISABLED) or {STANDARD_AUTHORIZER} (ACLs as Kafka's StandardAuthorizer).",
           _AuthorizerClass(), dynamic=False),
    define("super.users", STR, None, "Principals allowed everything whatever the ACLs, separated by "
           "semicolons (User:admin;User:ops).", dynamic=False),
    define("allow.everyone.if.no.acl.found", BOOL, False, "Whether a request no ACL applies to is "
           "allowed (false: denied).", dynamic=False),
)  # fmt: skip


def parse_super_users(text: str | None) -> frozenset[str]:
    """``super.users`` as Kafka reads it: principals separated by ``;``, blanks ignored."""
    if not text:
        return frozenset()
    return frozenset(part.strip() for part in text.split(";") if part.strip())
