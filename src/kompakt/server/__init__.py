"""kompakt.server."""
