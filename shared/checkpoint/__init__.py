"""A query's checkpoint and the folders an app writes: reading Spark's logs, the check
before a restart, the one-query-per-checkpoint lock, owner-only files. Below the sink and
the runners, which both read a checkpoint; above Kafka only."""
