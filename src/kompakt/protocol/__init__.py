"""kompakt.protocol."""
