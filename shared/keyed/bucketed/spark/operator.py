"""The Spark side of a bucketed processor: ``transformWithStateInPandas`` grouped by bucket.

Per bucket and call this does a fixed handful of state calls, whatever the number of
keys: one read of the bucket's small header, reads of its hot and cold segments only when
this Python worker does not hold their content already (bucketed.storage.cache), one of the
control state, writes of what changed, and at most one timer delete and one register.
The bucket's one event-time timer sits at the earliest due time of its keys (wake-ups the
app asked for, idle expiries), so a bucket that receives no rows is still cleaned, and
its pending decisions made, once the watermark passes.

Outputs leave either typed (the query's output schema) or, on the pipeline's single path,
as Kafka envelopes with the dead letters and late records (bucketed.kafka.envelopes).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from shared.keyed.bucketed.api.processor import BucketedProcessor
from shared.keyed.bucketed.api.spec import (
    CONTROL_PREFIX,
    IS_CONTROL_COLUMN,
    REJECT_COLUMN,
    BucketedSpec,
    BucketedSpecError,
)
from shared.keyed.bucketed.engine.call import CallResult, exact_dtypes, run_call
from shared.keyed.bucketed.engine.core import BatchClock
from shared.keyed.bucketed.engine.figures import BucketFigures, StateFigures
from shared.keyed.bucketed.kafka.envelopes import EnvelopeSpec, envelope_rows
from shared.keyed.bucketed.spark.driver_worker import quiet_driver_worker
from shared.keyed.bucketed.storage.cache import SEGMENTS
from shared.keyed.bucketed.storage.codec import (
    cached_kind,
    cold_to_state,
    header_from_state,
    header_to_state,
    hot_to_state,
    load,
)
from shared.keyed.bucketed.storage.portable import restored_header
from shared.keyed.bucketed.storage.store import Header
from shared.keyed.bucketed.storage.tables import (
    COLD_STATE,
    CONTROL_STATE,
    CONTROL_STATE_SCHEMA,
    HEADER_SCHEMA,
    HEADER_STATE,
    HOT_STATE,
    SEGMENT_SCHEMA,
    control_from_state,
    control_to_state,
)

quiet_driver_worker()  # imported there when Spark unpickles the processor


@dataclass(frozen=True)
class Restored:
    """What a checkpoint restored from a savepoint keeps of it (shared/keyed/savepoint):
    the watermark of the savepoint's batch and the one its next batch would have run at."""

    watermark_ms: int
    next_watermark_ms: int


@dataclass(frozen=True)
class InputLayout:
    """How one bucket's input frame is laid out, fixed when the query is built.

    Control rows share the frame with data rows (a union), so each side's columns are
    null on the other side's rows, and pyspark turns an integer or boolean column with
    nulls into float or object. ``data_dtypes`` and ``control_dtypes`` name the columns
    to turn back (when they hold no nulls): a batch with control records then looks like
    one without.
    """

    bucket_count: int
    data_columns: tuple[str, ...]
    control_columns: tuple[str, ...] = ()
    output_columns: tuple[str, ...] = ()
    data_dtypes: tuple[tuple[str, str], ...] = ()
    control_dtypes: tuple[tuple[str, str], ...] = ()

    def split(self, frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame | None]:
        """(data rows, control rows or None) with the app's column names."""
        if not self.control_columns:
            return frame[list(self.data_columns)], None
        is_control = frame[IS_CONTROL_COLUMN].to_numpy(dtype=bool)
        data = frame.loc[~is_control, list(self.data_columns)]
        control = None
        if is_control.any():
            prefixed = [CONTROL_PREFIX + name for name in self.control_columns]
            control = frame.loc[is_control, prefixed].rename(
                columns=dict(zip(prefixed, self.control_columns, strict=True)))
            control = exact_dtypes(control.reset_index(drop=True), self.control_dtypes)
        return data.reset_index(drop=True), control

    def shape_outputs(self, outputs: pd.DataFrame) -> pd.DataFrame:
        missing = [c for c in self.output_columns if c not in outputs.columns]
        if missing:
            raise BucketedSpecError(f"outputs lack columns {missing} of the output schema")
        return outputs[list(self.output_columns)] if self.output_columns else outputs


class BucketedStatefulProcessor(StatefulProcessor):
    """Runs a :class:`BucketedProcessor` for each bucket (Spark's grouping key).
    ``envelopes``: emit Kafka envelopes (and decide lateness) instead of typed rows."""

    def __init__(self, processor: BucketedProcessor, layout: InputLayout,
                 envelopes: EnvelopeSpec | None = None, restored: Restored | None = None,
                 figures=None) -> None:
        self.processor, self.layout, self.envelopes = processor, layout, envelopes
        self.figures = figures  # an accumulator of bucketed/engine/figures.StateFigures, or None
        self.spec = processor.spec
        self.decides_late = envelopes is not None  # Spark drops late rows otherwise
        # Records the app's logic raises on go to dead letters, where there are any:
        # typed outputs have no dead-letter topic, so such a record fails the call there.
        self.sets_aside = envelopes is not None
        self.restored = restored

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._handle = handle
        self._header = handle.getValueState(HEADER_STATE, HEADER_SCHEMA)
        self._hot = handle.getValueState(HOT_STATE, SEGMENT_SCHEMA)
        self._cold = handle.getValueState(COLD_STATE, SEGMENT_SCHEMA)
        self._control = (None if self.spec.control is None
                         else handle.getValueState(CONTROL_STATE, CONTROL_STATE_SCHEMA))

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame],
                        timerValues: TimerValues) -> Iterator[pd.DataFrame]:
        frames = list(rows)
        frame = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        data, control_rows = self.layout.split(frame)
        return self._emit(self.call(int(key[0]), data, control_rows, timerValues))

    def handleInitialState(self, key: Any, initialState: pd.DataFrame,
                           timerValues: TimerValues) -> None:
        """A restore's first batch: the bucket's keys from a savepoint, packed into one
        cold segment (bucketed/storage/portable.py), its control records and its timer."""
        if self.restored is None:
            raise BucketedSpecError("an initial state was given without a restore")
        values = initialState.iloc[0].to_dict()  # one row per bucket
        header = restored_header(self.layout.bucket_count, values,
                                 self.restored.watermark_ms, self.spec.time_mode == "EventTime")
        if header.cold_id is not None:
            self._cold.update((header.cold_id, values["keys_ipc"], values["history_ipc"], None))
        if self._control is not None and values.get("control_ipc") is not None:
            self._control.update((values["control_ipc"], int(values["control_records"])))
        if header.timer_ms is not None:
            self._handle.registerTimer(header.timer_ms)
        self._header.update(header_to_state(header))

    def handleExpiredTimer(self, key: Any, timerValues: TimerValues,
                           expiredTimerInfo: ExpiredTimerInfo) -> Iterator[pd.DataFrame]:
        # Spark passes the key as a Row here (a tuple to handleInputRows); it deletes the
        # fired timer after this call, so the header forgets it.
        fired_ms = expiredTimerInfo.getExpiryTimeInMs()
        return self._emit(self.call(int(tuple(key)[0]), None, None, timerValues, fired_ms))

    def close(self) -> None:
        pass

    def call(self, bucket: int, data: pd.DataFrame | None, control_rows: pd.DataFrame | None,
             timer_values: TimerValues, fired_ms: int | None = None) -> CallResult | None:
        """One call of the bucket whose state the handle points at: state read, processed,
        written; the typed result (the in-memory harness reads it too)."""
        stored_header = self._header.get()
        if stored_header is None and fired_ms is not None:
            return None
        header = header_from_state(stored_header, self.layout.bucket_count)
        if fired_ms is not None and fired_ms == header.timer_ms:
            header = replace(header, timer_ms=None)
        loaded = load(header, self.spec, self._hot.get, self._cold.get)
        clock = BatchClock(watermark_ms=self._watermark_ms(timer_values),
                           processing_time_ms=timer_values.getCurrentProcessingTimeInMs())
        result = run_call(self.processor, bucket, loaded, data, self._load_control(),
                          control_rows, clock, decides_late=self.decides_late,
                          sets_aside=self.sets_aside,
                          dtypes=self.layout.data_dtypes)
        saved = self._save(header, result)
        if self.figures is not None:
            self.figures.add(call_figures(bucket, saved, result.refused_keys, self.spec,
                                          result.trimmed_entries))
        return result

    def _watermark_ms(self, timer_values: TimerValues) -> int:
        """Spark's watermark, and after a restore at least the one the savepoint's next
        batch would have run at: a new checkpoint's watermark starts from nothing, and
        the restored keys must be decided (and expire) as the uninterrupted run would."""
        watermark = timer_values.getCurrentWatermarkInMs()
        if self.restored is None or watermark < 0:
            return watermark
        return max(watermark, self.restored.next_watermark_ms)

    def _load_control(self) -> pd.DataFrame | None:
        if self._control is None or self.spec.control is None:
            return None
        return control_from_state(self._control.get(), self.spec.control.schema)

    def _save(self, before: Header, result: CallResult) -> Header:
        """Writes the call's state; returns the header written."""
        header = result.header
        if header.key_count == 0:
            if header.hot_id is not None or header.cold_id is not None:
                self._hot.clear()  # an empty bucket keeps only its header (and control)
                self._cold.clear()
            header = replace(header, hot_id=None, cold_id=None, cold_keys=0, cold_history=0)
        else:
            if result.hot is not None:
                hot_id, value = hot_to_state(result.hot, self.spec)
                if hot_id != before.hot_id:
                    self._hot.update(value)
                header = replace(header, hot_id=hot_id)
            if result.cold is not None:
                cold_id, value = cold_to_state(result.cold, self.spec)
                self._cold.update(value)
                header = replace(header, cold_id=cold_id)
        if before.timer_ms != header.timer_ms:
            if before.timer_ms is not None:
                self._handle.deleteTimer(before.timer_ms)
            if header.timer_ms is not None:
                self._handle.registerTimer(header.timer_ms)
        self._header.update(header_to_state(header))
        if result.control is not None and self._control is not None and self.spec.control:
            self._control.update(control_to_state(result.control, self.spec.control.schema))
        return header

    def _emit(self, result: CallResult | None) -> Iterator[pd.DataFrame]:
        if result is None:
            return iter(())
        screened, envelopes = result.screened, self.envelopes
        if envelopes is None:
            if result.outputs is None:
                return iter(())
            return iter([self.layout.shape_outputs(result.outputs)])
        parts = [None if result.outputs is None else envelopes.outputs(result.outputs)]
        if screened.rejected is not None:
            parts.append(envelopes.dead_letters(
                screened.rejected, screened.rejected[REJECT_COLUMN].to_numpy()))
        if screened.late is not None:
            parts.append(envelopes.late(screened.late, screened.late_after_ms))
        rows = envelope_rows(*parts)
        return iter(()) if rows is None else iter([rows])


def call_figures(bucket: int, header: Header, refused_keys: int, spec: BucketedSpec,
                 trimmed_entries: int = 0) -> StateFigures:
    """The bucket's figures after a call, from the header it wrote (its segments' sizes
    from this worker's cache, which holds every segment the call read or wrote)."""
    sizes = [SEGMENTS.blob_bytes(cached_kind(kind, spec), ident) for kind, ident
             in (("hot", header.hot_id), ("cold", header.cold_id)) if ident is not None]
    stored = None if None in sizes else sum(sizes)
    figures = BucketFigures(header.key_count, header.key_count + header.history_count,
                            stored, header.evicted_keys_total)
    return StateFigures({bucket: figures}, refused_keys, trimmed_entries)
