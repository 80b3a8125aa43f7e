"""The fraud app: per-card velocity, spend spikes, impossible travel and card testing.

``apps.fraud.generator`` produces its seeded input stream with ground-truth labels.
"""
