"""The glue to Spark: the ``StatefulProcessor`` run by ``transformWithStateInPandas``,
``apply_bucketed``, and reading a query's state with Spark's state reader."""
