"""kompakt.log."""
