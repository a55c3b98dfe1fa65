"""kompakt.backup."""
