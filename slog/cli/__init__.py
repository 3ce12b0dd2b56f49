"""The ``slog`` command line (typer + rich)."""
