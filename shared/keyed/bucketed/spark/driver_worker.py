"""Quiet pyspark's transformWithState driver worker.

At every start of a query with a ``transformWithStateInPandas`` operator, Spark runs
``python -m pyspark.sql.streaming.transform_with_state_driver_worker`` to initialise the
processor on the driver. That module ``print()``s each step to its stdout, with the
repr of the pickled UDF and the key schema ("... Received UDF from JVM: <function ...>"),
and the JVM copies the process's output to the console as it is: no log4j or Python
logger to raise. The module that defines a processor is imported there when the UDF is
unpickled, before those prints; it calls :func:`quiet_driver_worker`, which gives the
worker module a ``print`` of its own that prints nothing (its first line, "Starting ...",
is printed before the unpickling and stays).
"""

from __future__ import annotations

import sys

DRIVER_WORKER = "pyspark.sql.streaming.transform_with_state_driver_worker"


def quiet_driver_worker(modules=sys.modules) -> bool:
    """In the driver worker process (its module is ``__main__``): silence its prints and
    return True; anywhere else, nothing."""
    main = modules.get("__main__")
    if getattr(getattr(main, "__spec__", None), "name", None) != DRIVER_WORKER:
        return False
    main.print = _print_nothing  # found before the builtin by the module's functions
    return True


def _print_nothing(*args, **kwargs) -> None:
    return None
