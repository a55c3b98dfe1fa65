"""The JAAS login-module syntax of ``sasl.jaas.config``, read as Kafka's ``JaasConfig`` reads it.

``<LoginModuleClass> <flag> (<name>=<value>)* ;`` where the flag is ``required``, ``requisite``,
``sufficient`` or ``optional`` and a value is a double-quoted string (backslash escapes its next
character) or a bare word. Comments (``//`` to the end of the line, ``/* ... */``) are skipped,
as Java's ``StreamTokenizer`` skips them. A value of the ``sasl.jaas.config`` property holds
exactly one login module; Kafka refuses more or fewer with the message used here.

Kafka's ``PlainServerCallbackHandler`` reads the users of SASL/PLAIN from the ``PlainLoginModule``
options: ``user_<name>="<password>"``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kompakt.errors import ConfigError

_FLAGS = ("required", "requisite", "sufficient", "optional")
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


@dataclass(frozen=True, slots=True)
class LoginModule:
    """One ``LoginModule flag options;`` entry."""

    class_name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    def plain_users(self) -> dict[str, str]:
        """``user_<name>`` options: PLAIN's users and passwords."""
        return {
            name[len("user_") :]: value for name, value in self.options.items() if name.startswith("user_")
        }


def _tokens(text: str, config_name: str) -> list[tuple[str, str]]:
    """(kind, text) tokens: ``word``, ``quoted`` or a one-character ``=``/``;``."""
    tokens: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise ConfigError(
                    f"Value not specified for key '{config_name}' in JAAS config: unterminated comment"
                )
            i = end + 2
        elif c in "=;":
            tokens.append((c, c))
            i += 1
        elif c in "\"'":
            out: list[str] = []
            i += 1
            while i < n and text[i] != c:
                if text[i] == "\\" and i + 1 < n:
                    i += 1
                    out.append({"n": "\n", "t": "\t", "r": "\r"}.get(text[i], text[i]))
                else:
                    out.append(text[i])
                i += 1
            if i >= n:
                raise ConfigError(f"Invalid JAAS config in {config_name}: unterminated quoted string")
            i += 1
            tokens.append(("quoted", "".join(out)))
        else:
            start = i
            while (
                i < n
                and not text[i].isspace()
                and text[i] not in "=;\"'"
                and not text.startswith(("//", "/*"), i)
            ):
                i += 1
            tokens.append(("word", text[start:i]))
    return tokens


def parse_jaas_config(text: str, config_name: str = "sasl.jaas.config") -> LoginModule:
    """The one login module of a ``sasl.jaas.config`` value; a :class:`ConfigError` otherwise."""
    tokens = _tokens(text, config_name)
    modules: list[LoginModule] = []
    pos = 0

    def expect(what: str) -> tuple[str, str]:
        nonlocal pos
        if pos >= len(tokens):
            raise ConfigError(f"Invalid JAAS config in {config_name}: expected {what} at the end")
        token = tokens[pos]
        pos += 1
        return token

    while pos < len(tokens):
        kind, class_name = expect("a login module class")
        if kind != "word":
            raise ConfigError(
                f"Invalid JAAS config in {config_name}: expected a login module class, got {class_name!r}"
            )
        kind, flag = expect("a control flag")
        if kind != "word" or flag.lower() not in _FLAGS:
            raise ConfigError(f"Invalid control flag '{flag}' in JAAS config of {config_name}")
        options: dict[str, str] = {}
        while True:
            kind, key = expect("';'")
            if kind == ";":
                break
            if kind != "word":
                raise ConfigError(
                    f"Invalid JAAS config in {config_name}: expected an option name, got {key!r}"
                )
            kind, _ = expect("'='")
            if kind != "=":
                raise ConfigError(f"Invalid JAAS config in {config_name}: expected '=' after {key}")
            kind, value = expect(f"a value for {key}")
            if kind not in ("word", "quoted"):
                raise ConfigError(f"Value not specified for key '{key}' in JAAS config")
            options[key] = value
        modules.append(LoginModule(class_name, flag.lower(), options))
    if len(modules) != 1:
        raise ConfigError(f"JAAS config property contains {len(modules)} login modules, should be 1 module")
    return modules[0]
