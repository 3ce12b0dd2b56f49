"""The transaction coordinator (Kafka's TransactionCoordinator): transactional ids,
their producer ids and epochs, and the state of their transactions, kept in
``__transaction_state``. Pure but for the coordinator's awaits; the broker
provides the log and the marker sender."""
