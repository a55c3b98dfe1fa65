"""The listeners' default ports, in a module of their own so the command line can name them
without importing the server (every ``kompakt`` command shows them in its help)."""

from __future__ import annotations

DEFAULT_ADMIN_PORT = 9192
"""The admin endpoint's default port: Kafka's 9092 plus 100, used by no Kafka component."""
