"""The iot rules, one module each (docs/iot-rules.md); the app runs every rule defined
here in module-name order (shared/keyed/rules/discover.py), all when readings are final.
They build on each other through ``step.derived``: accepted (the seq check) leaves only
accepted readings, offline records device lives, rolling the shortest interval's windows,
and thresholds reads both."""
