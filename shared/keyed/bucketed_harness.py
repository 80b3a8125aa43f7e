"""A bucketed processor driven in memory, micro-batch by micro-batch: no JVM, no Spark.

It runs the same ``BucketedStatefulProcessor`` a query runs, on the in-memory state
handle of ``shared.keyed.memory``, and mirrors what Spark does around it per batch:

1. rows at or behind the batch's watermark are dropped (EventTime mode only);
2. each key goes to a bucket (a stable pandas hash, not Spark's xxhash64: the buckets
   differ from a real query's, the per-key results do not); control records go to every
   bucket, unioned with the rows as Spark's ``unionByName`` does (nulls across sides);
3. ``handleInputRows`` per bucket with rows, in bucket order, with ``TimerValues``;
4. timers at or behind the watermark fire through ``handleExpiredTimer``;
5. the watermark becomes max(event time) - delay; if it moved, a no-data batch fires
   the timers due (Spark's ``noDataMicroBatches`` default).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import ExpiredTimerInfo, TimerValues

from shared.keyed.bucketed_processor import BucketedProcessor
from shared.keyed.bucketed_spark import BucketedStatefulProcessor, InputLayout
from shared.keyed.bucketed_spec import (
    BUCKET_COLUMN,
    CONTROL_PREFIX,
    EVENT_MS_COLUMN,
    IS_CONTROL_COLUMN,
)
from shared.keyed.bucketed_tables import (
    BUCKET_STATE,
    CONTROL_STATE,
    StoredBucket,
    bucket_from_state,
    control_from_state,
)
from shared.keyed.memory import MemoryHandle

_EPOCH = pd.Timestamp(0, tz="UTC")


class BucketedHarness:
    """Feeds batches of pandas rows (and control records) to a bucketed processor."""

    def __init__(self, processor: BucketedProcessor, *, buckets: int,
                 watermark_delay_ms: int = 0, processing_time_ms: int = 0,
                 output_columns: tuple[str, ...] = ()) -> None:
        self.spec, self.buckets = processor.spec, buckets
        self._processor, self._output_columns = processor, output_columns
        self._delay_ms = watermark_delay_ms
        self.handle = MemoryHandle(self.spec.time_mode)
        self.handle.now_ms = processing_time_ms
        self.watermark_ms = 0  # Spark's first batch runs with watermark 0
        # Spark drops rows as late against the previous batch's watermark (measured),
        # while the batch itself runs at ``watermark_ms``.
        self.late_watermark_ms = 0
        self._runner: BucketedStatefulProcessor | None = None

    def run_batch(self, rows: pd.DataFrame | None = None, control: pd.DataFrame | None = None,
                  processing_time_ms: int | None = None, idle_after: bool = True
                  ) -> pd.DataFrame:
        """One micro-batch; returns its output and, with ``idle_after``, that of the
        no-data batch Spark runs when the watermark moved and no data is waiting.
        Without it the next batch follows at once (a busy stream): its rows are then
        judged late against this batch's watermark, while it runs at the moved one."""
        if processing_time_ms is not None:
            self.handle.now_ms = processing_time_ms
        rows = None if rows is None else self._with_layer_columns(rows)
        runner = self._runner_for(rows)
        if rows is None:  # control only: Spark's union still has the data columns (nulls)
            rows = pd.DataFrame(columns=[*runner.layout.data_columns, BUCKET_COLUMN])
        outputs: list[pd.DataFrame] = []
        frame = self._union(self._on_time(rows), control)
        for bucket, group in frame.groupby(BUCKET_COLUMN, sort=True):
            self.handle.key = (int(bucket),)
            outputs += runner.handleInputRows(
                self.handle.key, iter([group.reset_index(drop=True)]), self._timer_values())
        outputs += self._fire_timers()
        self.late_watermark_ms = self.watermark_ms
        if self.spec.time_mode == "EventTime" and len(rows):
            # Spark's watermark sees every row, late ones included.
            moved_to = max(self.watermark_ms, int(rows[EVENT_MS_COLUMN].max()) - self._delay_ms)
            if idle_after:
                outputs += self._move_watermark(moved_to)
            else:
                self.watermark_ms = moved_to
        return _concat(outputs)

    def advance_watermark(self, to_ms: int) -> pd.DataFrame:
        """A no-data batch at watermark ``to_ms`` (as if other partitions moved it)."""
        if to_ms < self.watermark_ms:
            raise ValueError(f"the watermark only moves forward ({self.watermark_ms} ms)")
        return _concat(self._move_watermark(to_ms))

    # Inspection.

    def stored_buckets(self) -> dict[int, StoredBucket]:
        """Decoded state of every bucket that has a stored value."""
        var = self.handle.variables.get(BUCKET_STATE)
        if var is None:
            return {}
        return {key[0]: bucket_from_state(slots[None][0], self.spec, self.buckets)
                for key, slots in sorted(var.data.items())}

    def keys(self) -> pd.DataFrame:
        """All stored keys (key columns, state columns, ``last_event_ms``), by key."""
        tables = [b.keys.reset_index() for b in self.stored_buckets().values()]
        if not tables:
            return self.spec.stored_key_schema.empty_table().to_pandas()
        keys = pd.concat(tables, ignore_index=True)
        return keys.sort_values(list(self.spec.key_columns), ignore_index=True)

    def history(self) -> pd.DataFrame:
        schema = self.spec.stored_history_schema
        tables = [b.history for b in self.stored_buckets().values() if b.history is not None]
        if schema is None or not tables:
            return pd.DataFrame()
        return pd.concat(tables, ignore_index=True)

    def control(self, bucket: int) -> pd.DataFrame:
        var = self.handle.variables.get(CONTROL_STATE)
        assert self.spec.control is not None, "the spec declares no control"
        value = None if var is None else var.data.get((bucket,), {}).get(None, (None,))[0]
        return control_from_state(value, self.spec.control.schema)

    def timers(self) -> dict[int, list[int]]:
        return {key[0]: sorted(stamps) for key, stamps in sorted(self.handle.timers.items())}

    def bucket_of(self, rows: pd.DataFrame) -> np.ndarray:
        hashes = pd.util.hash_pandas_object(rows[list(self.spec.key_columns)], index=False)
        return (hashes.to_numpy() % np.uint64(self.buckets)).astype("int64")

    # Spark's steps.

    def _with_layer_columns(self, rows: pd.DataFrame) -> pd.DataFrame:
        rows = rows.reset_index(drop=True)
        return rows.assign(**{
            BUCKET_COLUMN: self.bucket_of(rows),
            EVENT_MS_COLUMN: epoch_ms(rows[self.spec.event_time_column]),
            IS_CONTROL_COLUMN: False})

    def _on_time(self, rows: pd.DataFrame) -> pd.DataFrame:
        if self.spec.time_mode != "EventTime":
            return rows
        return rows[~(rows[EVENT_MS_COLUMN] <= self.late_watermark_ms)]

    def _union(self, rows: pd.DataFrame, control: pd.DataFrame | None) -> pd.DataFrame:
        parts = [rows]
        if control is not None and len(control):
            prefixed = control.rename(columns=lambda name: CONTROL_PREFIX + name)
            every_bucket = pd.DataFrame({BUCKET_COLUMN: range(self.buckets)})
            parts.append(prefixed.merge(every_bucket, how="cross").assign(
                **{IS_CONTROL_COLUMN: True}))
        return parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)

    def _runner_for(self, rows: pd.DataFrame | None) -> BucketedStatefulProcessor:
        if self._runner is None:
            if rows is None:
                raise ValueError("the first batch needs rows: they give the input's columns")
            control = self.spec.control
            data = rows.drop(columns=[BUCKET_COLUMN, IS_CONTROL_COLUMN])
            layout = InputLayout(
                bucket_count=self.buckets, data_columns=tuple(data.columns),
                control_columns=() if control is None else tuple(control.schema.names),
                output_columns=self._output_columns,
                data_dtypes=_exact_dtypes(data),
                control_dtypes=() if control is None else _exact_dtypes(
                    control.schema.empty_table().to_pandas()))
            self._runner = BucketedStatefulProcessor(self._processor, layout)
            self._runner.init(self.handle)
        return self._runner

    def _move_watermark(self, to_ms: int) -> list[pd.DataFrame]:
        """A no-data batch at ``to_ms``: the next batch's late rows are judged by it."""
        moved, self.watermark_ms = to_ms > self.watermark_ms, to_ms
        self.late_watermark_ms = to_ms
        return self._fire_timers() if moved else []

    def _timer_values(self) -> TimerValues:
        if self.spec.time_mode == "None":
            return TimerValues(-1, -1)
        return TimerValues(self.handle.now_ms, self.watermark_ms)

    def _fire_timers(self) -> list[pd.DataFrame]:
        if self._runner is None or self.spec.time_mode == "None":
            return []
        outputs: list[pd.DataFrame] = []
        due = sorted((ts, key) for key, stamps in self.handle.timers.items()
                     for ts in stamps if ts <= self.watermark_ms)
        for ts, key in due:
            if ts in self.handle.timers.get(key, ()):
                self.handle.key = key
                outputs += self._runner.handleExpiredTimer(
                    key=Row(*key), timerValues=self._timer_values(),
                    expiredTimerInfo=ExpiredTimerInfo(ts))
                self.handle.deleteTimer(ts)  # Spark deletes a timer once it has fired
        return outputs


def epoch_ms(values: pd.Series) -> pd.Series:
    """Event times as epoch ms: datetimes (naive ones read as UTC) or numbers as they are."""
    if pd.api.types.is_datetime64_any_dtype(values):
        utc = values.dt.tz_convert("UTC") if values.dt.tz else values.dt.tz_localize("UTC")
        millis = (utc - _EPOCH) // pd.Timedelta(milliseconds=1)
        return millis.astype("int64") if not millis.isna().any() else millis
    return values


def _exact_dtypes(frame: pd.DataFrame) -> tuple[tuple[str, str], ...]:
    return tuple((name, str(dtype)) for name, dtype in frame.dtypes.items()
                 if dtype.kind in "biu")


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

