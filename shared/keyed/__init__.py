"""Keyed state on Spark's transformWithStateInPandas: the bucketed layer
(``shared.keyed.bucketed``), its savepoints (``shared.keyed.savepoint``) and the state
layout a checkpoint records (``state_layout.py``, ``bucket_labels.py``)."""
