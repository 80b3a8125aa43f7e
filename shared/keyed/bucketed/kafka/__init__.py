"""The operator's outputs, dead letters and late rows as Kafka envelopes."""
