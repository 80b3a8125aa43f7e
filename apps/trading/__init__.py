"""The trading app: per-instrument session and rolling VWAP, moving averages and bars.

``apps.trading.generator`` produces its seeded trade feed with ground-truth labels,
``apps.trading.oracle`` computes the figures in plain Python (docs/trading-rules.md).
"""
