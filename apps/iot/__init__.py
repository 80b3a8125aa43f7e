"""The iot app: per-device rolling averages, threshold alerts and offline devices.

Semantics: docs/iot-rules.md. Generator: generator.py. Oracle: oracle.py.
"""
