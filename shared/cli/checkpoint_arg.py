"""``--checkpoint PATH`` of the commands that read an existing checkpoint (state,
savepoint, repartition): the app's own checkpoint folder, or a folder holding it.

``statewise run`` keeps an app's checkpoint at ``CHECKPOINT_DIR/APP`` (``--checkpoint-dir``
names the root); the demo at ``WORK_DIR/checkpoints/CLUSTER_ID/APP``, one per Kafka
cluster. ``--checkpoint`` takes any of the three folders, so that the path an operator
sees (``var/checkpoints``, ``var/demo``) is the path to give.
"""

from __future__ import annotations

import sys
from pathlib import Path

# What the help says; the same words in every command that takes the flag.
CHECKPOINT_HELP = (
    "the app's checkpoint: its own folder (with offsets/ and commits/), or a folder "
    "holding it: a checkpoint root as --checkpoint-dir names it (ROOT/APP) or the demo's "
    "work dir (var/demo: var/demo/checkpoints/CLUSTER_ID/APP, the newest when the demo "
    "ran on several Kafka clusters). Default: CHECKPOINT_DIR/APP, where statewise run "
    "keeps it")


def is_checkpoint(folder: Path) -> bool:
    """A streaming query's checkpoint: Spark writes its offset log on the first batch."""
    return (folder / "offsets").is_dir()


def app_checkpoint(given: str, app_name: str) -> str:
    """The app's checkpoint that ``given`` names (see the module's doc). A URI (hdfs://)
    or a folder holding none is taken as given: the command then says that it holds no
    committed batch."""
    if "://" in given and not given.startswith("file:"):
        return given
    folder = Path(given.removeprefix("file:"))
    if is_checkpoint(folder):
        return given
    found = [c for c in (folder / app_name, *sorted(folder.glob(f"checkpoints/*/{app_name}")))
             if is_checkpoint(c)]
    if not found:
        return given
    # Several: the demo ran on several Kafka clusters (the local broker's data wiped).
    newest = max(found, key=lambda c: (c / "offsets").stat().st_mtime)
    if len(found) > 1:
        print(f"{len(found)} checkpoints of {app_name} under {given} (one per Kafka "
              f"cluster); reading the newest, {newest}", file=sys.stderr)
    return str(newest)


# Warns "StateStoreCoordinator endpoint not available" at each state store a session of
# its own opens to read a checkpoint (statewise state, savepoint: 6 to 8 lines a read):
# only a running query registers the coordinator, and a reader needs none.
STATE_READER_NOISE = "org.apache.spark.sql.execution.streaming.state.StateStoreProvider"


def quiet_state_reader(spark) -> None:
    """In the session of a command that reads a checkpoint, and there only: a running
    app's session keeps the warning, where it would mean something."""
    log4j = spark._jvm.org.apache.logging.log4j
    log4j.core.config.Configurator.setLevel(STATE_READER_NOISE, log4j.Level.ERROR)
