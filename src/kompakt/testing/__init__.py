"""Testing helpers for applications that use kompakt or any Kafka-compatible broker.

:class:`InProcessBroker` is an in-process broker with a manual clock; the pytest plugin
(``kompakt.testing.pytest_plugin``) turns it into the ``kompakt_broker`` fixture. See
``docs/pytest.md``.

The names are imported on first use: the pytest plugin is loaded into every test session of a
project that installs kompakt, and must not pay for the broker's imports (numba) unless a test
asks for the fixture.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kompakt.testing.broker import BrokerOperationError, InProcessBroker

__all__ = ["BrokerOperationError", "InProcessBroker"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from kompakt.testing import broker

        return getattr(broker, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
