"""A bucket's stored state: the header, the hot and cold segments, their Arrow encoding in
Spark's value states, the per-worker cache, state upgrades, and reading the state back
(a key's view, the portable rows of savepoints). pyspark's types, no JVM."""
