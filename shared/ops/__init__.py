"""Local operations: the Kafka broker, a Spark standalone cluster, detached processes,
topic provisioning; and the Kubernetes manifests that deploy the apps elsewhere (k8s/)."""
