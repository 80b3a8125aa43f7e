"""Local operations: the Kafka broker, a Spark standalone cluster, Prometheus, ACLs, the
JVM class archives' training; and the Kubernetes manifests that deploy the apps
elsewhere (k8s/). Never on `statewise run`'s path."""
