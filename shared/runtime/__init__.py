"""What runs an app: the pipeline, the runners, Kafka I/O and clients, the Spark session,
checkpoints, metrics, the Python workers' daemon, the JVM class archives."""
