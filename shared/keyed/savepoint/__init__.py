"""Savepoints of a keyed app's state, and restores from them (docs/operations.md)."""
