"""Kubernetes manifests for the apps, generated from their definitions (``statewise k8s``):
per app a Spark operator ``SparkApplication`` and one Strimzi ``KafkaTopic`` per topic of
its registry. The committed output is deploy/k8s/<app>/; deploy/k8s/README.md says how
to build the image and apply them."""
