"""slog's Kafka client: connections, producer, consumer and admin."""
