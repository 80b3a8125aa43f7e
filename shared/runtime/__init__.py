"""What runs an app: the pipeline, the runners, the Spark session, restarts, metrics, the
Python workers' daemon, the JVM class archives' use. Kafka and checkpoints are layers
below (shared.kafka, shared.checkpoint)."""
