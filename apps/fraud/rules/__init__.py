"""The fraud rules, one module each (docs/fraud-rules.md); the app runs every rule
defined here (shared/keyed/rules/discover.py)."""
