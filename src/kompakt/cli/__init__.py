"""kompakt.cli."""
