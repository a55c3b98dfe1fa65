"""kompakt.cleaner."""
