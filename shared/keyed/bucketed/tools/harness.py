"""A bucketed processor driven in memory, micro-batch by micro-batch: no JVM, no Spark.

It runs the same ``BucketedStatefulProcessor`` a query runs, on the in-memory state
handle of ``shared.keyed.bucketed.storage.memory``, and mirrors what Spark does around it per batch:

1. each key gets a 64-bit hash (a stable pandas hash, not Spark's xxhash64: the buckets
   differ from a real query's, the per-key results do not) and goes to bucket
   hash mod B; each row gets Kafka-like coordinates (partition 0, a running offset);
2. late rows: with ``operator_late`` (the pipeline's single path, the default) every row
   reaches the operator, which sends those at or behind its bucket's last watermark to
   ``late``; without it, rows at or behind the previous batch's watermark are dropped
   first, as Spark's EventTime operator does;
3. control records go to every bucket, unioned with the rows as Spark's ``unionByName``
   does (nulls across sides; a key hash of 0, as ``broadcast_control`` gives them);
4. ``handleInputRows`` per bucket with rows, in bucket order, with ``TimerValues``;
5. timers at or behind the watermark fire through ``handleExpiredTimer``;
6. the watermark becomes max(event time) - delay; if it moved, a no-data batch fires
   the timers due (Spark's ``noDataMicroBatches`` default).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import TimerValues

from shared.keyed.bucketed.api.processor import BucketedProcessor
from shared.keyed.bucketed.api.spec import (
    BUCKET_COLUMN,
    CONTROL_PREFIX,
    DUE_COLUMN,
    EVENT_MS_COLUMN,
    IS_CONTROL_COLUMN,
    KEY_HASH_COLUMN,
    REJECT_COLUMN,
    SOURCE_OFFSET,
    SOURCE_PARTITION,
)
from shared.keyed.bucketed.engine.call import CallResult
from shared.keyed.bucketed.spark.operator import BucketedStatefulProcessor, InputLayout, Restored
from shared.keyed.bucketed.storage.cache import SEGMENTS
from shared.keyed.bucketed.storage.codec import header_from_state, load
from shared.keyed.bucketed.storage.memory import MemoryHandle
from shared.keyed.bucketed.storage.segments import HISTORY_N
from shared.keyed.bucketed.storage.store import Header, compact
from shared.keyed.bucketed.storage.tables import (
    COLD_STATE,
    CONTROL_STATE,
    HEADER_STATE,
    HOT_STATE,
    StoredBucket,
    control_from_state,
)

_EPOCH = pd.Timestamp(0, tz="UTC")


class BucketedHarness:
    """Feeds batches of pandas rows (and control records) to a bucketed processor."""

    def __init__(self, processor: BucketedProcessor, *, buckets: int,
                 watermark_delay_ms: int = 0, processing_time_ms: int = 0,
                 output_columns: tuple[str, ...] = (), operator_late: bool = True,
                 restored: Restored | None = None) -> None:
        self.spec, self.buckets = processor.spec, buckets
        self.restored = restored  # a harness started from a savepoint (spark.Restored)
        self._processor, self._output_columns = processor, output_columns
        self._delay_ms = watermark_delay_ms
        self.operator_late = operator_late and self.spec.time_mode == "EventTime"
        # Rows the operator sent to the late topic and to dead letters, as given, per call:
        # concatenated when read (once per call, the copies would grow with the stream).
        self._late: list[pd.DataFrame] = []
        self._rejected: list[pd.DataFrame] = []
        self._offset = 0
        self.handle = MemoryHandle(self.spec.time_mode)
        self.handle.now_ms = processing_time_ms
        self.watermark_ms = 0  # Spark's first batch runs with watermark 0
        # Spark drops rows as late against the previous batch's watermark (measured),
        # while the batch itself runs at ``watermark_ms``.
        self.late_watermark_ms = 0
        self._runner: BucketedStatefulProcessor | None = None

    def run_batch(self, rows: pd.DataFrame | None = None, control: pd.DataFrame | None = None,
                  processing_time_ms: int | None = None, idle_after: bool = True,
                  initial_state: dict[int, dict] | None = None) -> pd.DataFrame:
        """One micro-batch; returns its output and, with ``idle_after``, that of the
        no-data batch Spark runs when the watermark moved and no data is waiting.
        Without it the next batch follows at once (a busy stream): its rows are then
        judged late against this batch's watermark, while it runs at the moved one.
        ``initial_state`` (the first batch of a restore): bucket -> its initial-state row
        (bucketed/storage/portable.py ``INITIAL_COLUMNS``), handed to ``handleInitialState``
        before any bucket's rows, as Spark does in a restored query's first batch."""
        if processing_time_ms is not None:
            self.handle.now_ms = processing_time_ms
        if rows is None and control is None and self._runner is None:
            return pd.DataFrame()  # nothing fed yet: no state, no timer, no watermark
        rows = None if rows is None else self._with_layer_columns(rows)
        runner = self._runner_for(rows)
        for bucket, values in sorted((initial_state or {}).items()):
            self.handle.key = (bucket,)
            runner.handleInitialState((bucket,), pd.DataFrame([values]), self._timer_values())
        if rows is None:  # control only: Spark's union still has the data columns (nulls)
            rows = pd.DataFrame(columns=[*runner.layout.data_columns, BUCKET_COLUMN])
        outputs: list[pd.DataFrame] = []
        frame = self._union(self._on_time(rows), control)
        for bucket, group in frame.groupby(BUCKET_COLUMN, sort=True):
            self.handle.key = (int(bucket),)
            data, control_rows = runner.layout.split(group.reset_index(drop=True))
            outputs += self._collect(runner.call(int(bucket), data, control_rows,
                                                 self._timer_values()))
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

    @property
    def late(self) -> pd.DataFrame:
        """The rows the operator sent to the late topic, as given."""
        self._late = [_concat(self._late)]
        return self._late[0]

    @property
    def rejected(self) -> pd.DataFrame:
        """The rows the operator sent to dead letters, as given."""
        self._rejected = [_concat(self._rejected)]
        return self._rejected[0]

    def rejected_positions(self) -> list[tuple[int, str]]:
        """(position among every row fed so far, reason) of the rows the operator itself
        sent to dead letters (a full bucket's refusals, records its logic raised on);
        with ``operator_late`` only, where rows carry their position."""
        rejected = self.rejected
        if not len(rejected) or SOURCE_OFFSET not in rejected.columns:
            return []
        return sorted((int(o), str(r)) for o, r in zip(
            rejected[SOURCE_OFFSET], rejected[REJECT_COLUMN], strict=True))

    def late_positions(self) -> list[int]:
        """Positions, among every row fed so far (in feeding order), of the rows the
        operator sent to the late topic."""
        if not len(self.late):
            return []
        return sorted(int(o) for o in self.late[SOURCE_OFFSET])

    def advance_watermark(self, to_ms: int) -> pd.DataFrame:
        """A no-data batch at watermark ``to_ms`` (as if other partitions moved it)."""
        if to_ms < self.watermark_ms:
            raise ValueError(f"the watermark only moves forward ({self.watermark_ms} ms)")
        return _concat(self._move_watermark(to_ms))

    # Inspection.

    def headers(self) -> dict[int, Header]:
        var = self.handle.variables.get(HEADER_STATE)
        if var is None:
            return {}
        return {key[0]: header_from_state(slots[None][0], self.buckets)
                for key, slots in sorted(var.data.items())}

    def stored_buckets(self) -> dict[int, StoredBucket]:
        """Every bucket's keys and history, hot and cold segments merged."""
        buckets = {}
        for bucket, header in self.headers().items():
            loaded = load(header, self.spec, self._getter(HOT_STATE, bucket),
                          self._getter(COLD_STATE, bucket))
            cold = compact(loaded.cold, loaded.hot, self.spec)
            keys = cold.keys.drop(columns=[KEY_HASH_COLUMN, DUE_COLUMN, HISTORY_N]).set_index(
                list(self.spec.key_columns)).sort_index()
            buckets[bucket] = StoredBucket(keys=keys, history=cold.history,
                                           expiry_timer_ms=header.timer_ms,
                                           expired_keys_total=header.expired_keys_total,
                                           evicted_keys_total=header.evicted_keys_total)
        return buckets

    def _getter(self, name: str, bucket: int):
        var = self.handle.variables.get(name)
        return lambda: None if var is None else var.data.get((bucket,), {}).get(
            None, (None,))[0]

    def keys(self) -> pd.DataFrame:
        """All stored keys (key columns, state columns, ``last_event_ms``), by key."""
        tables = [b.keys.reset_index() for b in self.stored_buckets().values() if len(b.keys)]
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

    def timers(self) -> dict[int, list[int]]:  # noqa: D102 - Spark's timers per bucket
        return {key[0]: sorted(stamps) for key, stamps in sorted(self.handle.timers.items())}

    def key_hashes(self, rows: pd.DataFrame) -> np.ndarray:
        hashes = pd.util.hash_pandas_object(rows[list(self.spec.key_columns)], index=False)
        return hashes.to_numpy().view(np.int64)

    def bucket_of(self, rows: pd.DataFrame) -> np.ndarray:
        return (self.key_hashes(rows).view(np.uint64) % np.uint64(self.buckets)).astype("int64")

    # Spark's steps.

    def _with_layer_columns(self, rows: pd.DataFrame) -> pd.DataFrame:
        rows = rows.reset_index(drop=True)
        offsets = np.arange(self._offset, self._offset + len(rows), dtype=np.int64)
        self._offset += len(rows)
        hashes = self.key_hashes(rows)
        added = {EVENT_MS_COLUMN: epoch_ms(rows[self.spec.event_time_column]),
                 KEY_HASH_COLUMN: hashes, IS_CONTROL_COLUMN: False,
                 BUCKET_COLUMN: (hashes.view(np.uint64) % np.uint64(self.buckets)).astype(
                     "int64")}
        if self.operator_late:
            added.update({SOURCE_PARTITION: np.int32(0), SOURCE_OFFSET: offsets,
                          REJECT_COLUMN: None})
            # The single path hands the operator epoch ms, not the watermarked column.
            rows = rows.drop(columns=[self.spec.event_time_column])
        return rows.assign(**added)

    def _on_time(self, rows: pd.DataFrame) -> pd.DataFrame:
        if self.spec.time_mode != "EventTime" or self.operator_late:
            return rows
        return rows[~(rows[EVENT_MS_COLUMN] <= self.late_watermark_ms)]

    def _union(self, rows: pd.DataFrame, control: pd.DataFrame | None) -> pd.DataFrame:
        parts = [rows]
        if control is not None and len(control):
            prefixed = control.rename(columns=lambda name: CONTROL_PREFIX + name)
            every_bucket = pd.DataFrame({BUCKET_COLUMN: range(self.buckets)})
            parts.append(prefixed.merge(every_bucket, how="cross").assign(
                **{IS_CONTROL_COLUMN: True, KEY_HASH_COLUMN: np.int64(0)}))
        return parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)

    def upgrade(self, processor: BucketedProcessor) -> None:
        """Go on with a new version of the processor over the same stored state, as a
        restart with new code does (its workers start with an empty segment cache)."""
        self.spec, self._processor, self._runner = processor.spec, processor, None
        SEGMENTS.clear()

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
            self._runner = BucketedStatefulProcessor(self._processor, layout,
                                                     restored=self.restored)
            self._runner.decides_late = self.operator_late
            self._runner.sets_aside = True  # rejected rows are kept aside, as dead letters
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
                outputs += self._collect(self._runner.call(
                    int(Row(*key)[0]), None, None, self._timer_values(), fired_ms=ts))
                self.handle.deleteTimer(ts)  # Spark deletes a timer once it has fired
        return outputs


    def _collect(self, result: CallResult | None) -> list[pd.DataFrame]:
        """The call's typed outputs; its late and rejected rows are kept aside."""
        if result is None:
            return []
        screened = result.screened
        if screened.late is not None:
            self._late.append(screened.late)
        if screened.rejected is not None:
            self._rejected.append(screened.rejected)
        if result.outputs is None:
            return []
        return [self._runner.layout.shape_outputs(result.outputs)]


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

