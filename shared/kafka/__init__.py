"""Kafka at the bottom of the shared package: its clients and their settings, topic
specs and provisioning, reading records into Spark and the envelope every output takes,
and the JSON encoding of those records. Imports nothing of shared/ but settings."""
