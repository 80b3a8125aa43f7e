"""Any keyed app in memory, micro-batch by micro-batch, built from its definition alone
(shared/app/definition.py): no JVM, no Kafka.

It runs the processor the app runs (``app.keyed.processor(settings)``) behind the
pipeline's first steps in plain Python (decoding, required fields and the quality gate:
shared/testing/record_gate.py), with Spark's watermark at the app's allowed lateness,
its timers and the operator's late rule around it (shared/keyed/bucketed/tools/harness.py).
Records the pipeline would send to dead letters are kept in ``rejected`` with their
reason, and those the operator sends to the late topic in ``late``, so that a test can
leave both out of its oracle's input, as the app leaves them out of its state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pyspark.sql.types import BooleanType, DataType, DoubleType, FloatType

from shared.app.definition import AppDefinition
from shared.durations import duration_ms
from shared.kafka.kafka_io import EVENT_TIME
from shared.keyed.bucketed import BucketedHarness
from shared.keyed.bucketed.spark.operator import Restored
from shared.testing.record_gate import INTEGER_TYPES, RecordGate

# A record as a test gives it: a Kafka value (bytes or text), its JSON already parsed
# (a dict), or None (a record with no value).
Given = bytes | str | dict | None


@dataclass(frozen=True)
class Rejected:
    record: Given  # as given
    reason: str  # the dead letter's reason


class AppHarness:
    """Feeds batches of records (and control records) to an app's keyed operator.

    ``buckets``: 8 unless said; in memory the bucket count changes no per-key result,
    only how the work is cut (a test of bucketing passes several). ``restored``: a
    harness started from a savepoint (its first batch gets the initial state:
    shared/testing/savepoint_memory.py)."""

    def __init__(self, app: AppDefinition, settings: Any = None, *, buckets: int = 8,
                 restored: Restored | None = None) -> None:
        if app.keyed is None:
            raise ValueError(
                f"app {app.name!r} declares a builder, not a keyed operator: only Spark runs it"
            )
        self.app = app
        self.settings = app.settings_type() if settings is None else settings
        self.gate = RecordGate.of(app, self.settings)
        self.lateness_ms = duration_ms(app.allowed_lateness(self.settings))
        self.processor = app.keyed.processor(self.settings)
        self.engine = BucketedHarness(
            self.processor, buckets=buckets, watermark_delay_ms=self.lateness_ms,
            restored=restored,
        )
        self.fed: list[Given] = []  # every record the operator got, as given, in order
        self._gate_rejected: list[Rejected] = []

    @property
    def watermark_ms(self) -> int:
        return self.engine.watermark_ms

    @property
    def rejected(self) -> list[Rejected]:
        """The records sent to dead letters, as given: by the gate, then by the operator
        (a full bucket's refusals, records the app's logic raised on)."""
        return [*self._gate_rejected, *(Rejected(self.fed[p], reason)
                                        for p, reason in self.engine.rejected_positions())]

    @property
    def late(self) -> list[Given]:
        """The records the operator sent to the late topic, as given."""
        return [self.fed[p] for p in self.engine.late_positions()]

    def run_batch(
        self,
        records: Sequence[Given],
        control: list[dict] | None = None,
        processing_time_ms: int | None = None,
        idle_after: bool = True,
        timestamps_ms: Sequence[int] | None = None,
        initial_state: dict[int, dict] | None = None,
    ) -> pd.DataFrame:
        """The processor's output rows of one micro-batch (every route), and with
        ``idle_after`` those of the no-data batch after it (BucketedHarness.run_batch).
        ``timestamps_ms``: the records' Kafka timestamps, for the event-time bound.
        ``initial_state``: a restore's, for its first batch (BucketedHarness.run_batch)."""
        stamps = [None] * len(records) if timestamps_ms is None else timestamps_ms
        decoded = self._screened(records, stamps)
        control = self._screened_control(control or [])
        controls = pd.DataFrame(control) if control else None
        # Every record set aside: still a batch, whose due timers fire.
        rows = self._frame(decoded) if decoded else None
        return self.engine.run_batch(
            rows, controls, processing_time_ms=processing_time_ms, idle_after=idle_after,
            initial_state=initial_state,
        )

    def advance_watermark(self, to_ms: int, processing_time_ms: int | None = None) -> pd.DataFrame:
        """A no-data batch at watermark ``to_ms`` (as if other partitions moved it)."""
        if processing_time_ms is not None:
            self.engine.handle.now_ms = processing_time_ms
        return self.engine.advance_watermark(to_ms)

    # The operator's state (BucketedHarness), to check what it keeps and that it goes.

    def keys(self) -> pd.DataFrame:
        return self.engine.keys()

    def history(self) -> pd.DataFrame:
        return self.engine.history()

    def timers(self) -> dict[int, list[int]]:
        return self.engine.timers()

    def _screened(
        self, records: Sequence[Given], timestamps_ms: Sequence[int | None]
    ) -> list[dict]:
        """The records the app gets, decoded; the others go to ``rejected``."""
        decoded = []
        for record, timestamp_ms in zip(records, timestamps_ms, strict=True):
            verdict = self.gate.judge(record, timestamp_ms)
            if verdict.reason is None:
                self.fed.append(record)
                decoded.append(verdict.record)
            else:
                self._gate_rejected.append(Rejected(record, verdict.reason))
        return decoded

    def _screened_control(self, control: list[dict]) -> list[dict]:
        """The control records the app gets; one whose value its param does not accept
        goes to ``rejected``, as the pipeline sends it to dead letters."""
        params = {param.name: param for param in self.app.control_params}
        kept = []
        for record in control:
            param = params.get(record.get("param"))
            problem = None if param is None else param.problem(float(record["value"]))
            if problem is None:
                kept.append(record)
            else:
                self._gate_rejected.append(Rejected(record, problem))
        return kept

    def _frame(self, records: list[dict]) -> pd.DataFrame:
        """The operator's input columns with the dtypes pyspark hands it."""
        schema = self.app.input_topic.schema
        types = {f.name: f.dataType for f in schema.struct.fields}
        columns = {}
        for name in self.app.keyed.input_columns:
            if name == EVENT_TIME:
                millis = [r[schema.event_time_field] for r in records]
                columns[name] = pd.to_datetime(millis, unit="ms", utc=True)
            else:
                columns[name] = column([r[name] for r in records], types[name])
        return pd.DataFrame(columns)


def column(values: list, data_type: DataType) -> pd.Series:
    """Values of one Spark type as pyspark's Arrow conversion gives them to pandas: an
    integer or boolean column with a null becomes float or object."""
    has_null = any(v is None for v in values)
    if isinstance(data_type, INTEGER_TYPES):
        return pd.Series(values, dtype="float64" if has_null else "int64")
    if isinstance(data_type, DoubleType | FloatType):
        return pd.Series(values, dtype="float64")
    if isinstance(data_type, BooleanType) and not has_null:
        return pd.Series(values, dtype="bool")
    return pd.Series(values, dtype="object")  # strings, and nested values as parsed
