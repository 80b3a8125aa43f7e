"""The trading rules, one module each (docs/trading-rules.md); the app runs every rule
defined here (shared/keyed/rules/discover.py), in module-name order: a trade's cancel,
then its fat-finger verdict, then the bars and figures that count it."""
