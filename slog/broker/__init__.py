"""The broker daemon: asyncio Kafka listener, request handlers and lifecycle."""
