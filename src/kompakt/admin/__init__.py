"""kompakt.admin."""
