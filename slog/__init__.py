"""slog: a Kafka-compatible distributed commit log for one machine."""

__version__ = "0.1.0"
