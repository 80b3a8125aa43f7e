"""Around the engine, not on a query's path: the in-memory harness, state inspection
helpers, the example processor and its plain-Python oracle."""
