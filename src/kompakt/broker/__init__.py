"""kompakt.broker."""
