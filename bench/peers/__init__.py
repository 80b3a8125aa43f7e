"""Peers of the apps on the same topics and the same logic (issue 6): Quix Streams,
Spark's native aggregations and (if it runs) PyFlink. ``python -m bench.peers_compare``
runs them all in one run.

The ``quix_*`` modules run inside their own venv (quixstreams pins confluent-kafka
below 2.13, the project needs 2.16+): they import nothing but the standard library and
quixstreams, and get every topic name and threshold from their command line.
"""
