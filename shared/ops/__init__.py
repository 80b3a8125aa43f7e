"""Local operations: the Kafka broker, a Spark standalone cluster, detached processes,
topic provisioning."""
