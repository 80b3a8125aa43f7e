"""The Spark side of a bucketed processor: ``transformWithStateInPandas`` grouped by bucket.

Per bucket and batch this does a fixed handful of state calls, whatever the number of
keys: one read of the bucket state, one of the control state, one write (or clear) of
the bucket, a control write when control records came, and at most one timer delete and
one register. The bucket's one event-time timer sits at its earliest key expiry (or the
app's earlier wake-up, see ``on_watermark``), so a bucket that receives no rows is still
cleaned, and its pending decisions made, once the watermark passes.
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

from shared.keyed.bucketed_core import BatchClock, BucketBatch, run_bucket_batch
from shared.keyed.bucketed_processor import BucketedProcessor
from shared.keyed.bucketed_spec import (
    CONTROL_PREFIX,
    IS_CONTROL_COLUMN,
    BucketedSpecError,
)
from shared.keyed.bucketed_tables import (
    BUCKET_STATE,
    BUCKET_STATE_SCHEMA,
    CONTROL_STATE,
    CONTROL_STATE_SCHEMA,
    StoredBucket,
    bucket_from_state,
    bucket_to_state,
    control_from_state,
    control_to_state,
)


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
            control = _exact(control.reset_index(drop=True), self.control_dtypes)
            data = _exact(data, self.data_dtypes)
        return data.reset_index(drop=True), control

    def shape_outputs(self, outputs: pd.DataFrame) -> pd.DataFrame:
        missing = [c for c in self.output_columns if c not in outputs.columns]
        if missing:
            raise BucketedSpecError(f"outputs lack columns {missing} of the output schema")
        return outputs[list(self.output_columns)] if self.output_columns else outputs


def _exact(frame: pd.DataFrame, dtypes: tuple[tuple[str, str], ...]) -> pd.DataFrame:
    wanted = {name: dtype for name, dtype in dtypes
              if frame[name].dtype != dtype and not frame[name].isna().any()}
    return frame.astype(wanted) if wanted else frame


class BucketedStatefulProcessor(StatefulProcessor):
    """Runs a :class:`BucketedProcessor` for each bucket (Spark's grouping key)."""

    def __init__(self, processor: BucketedProcessor, layout: InputLayout) -> None:
        self.processor, self.layout = processor, layout
        self.spec = processor.spec

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._handle = handle
        self._bucket = handle.getValueState(BUCKET_STATE, BUCKET_STATE_SCHEMA)
        self._control = (None if self.spec.control is None
                         else handle.getValueState(CONTROL_STATE, CONTROL_STATE_SCHEMA))

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame],
                        timerValues: TimerValues) -> Iterator[pd.DataFrame]:
        frames = list(rows)
        frame = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        data, control_rows = self.layout.split(frame)
        return self._run(int(key[0]), data, control_rows, timerValues, fired_timer_ms=None)

    def handleExpiredTimer(self, key: Any, timerValues: TimerValues,
                           expiredTimerInfo: ExpiredTimerInfo) -> Iterator[pd.DataFrame]:
        # Spark passes the key as a Row here (a tuple to handleInputRows).
        fired_ms = expiredTimerInfo.getExpiryTimeInMs()
        return self._run(int(tuple(key)[0]), None, None, timerValues, fired_timer_ms=fired_ms)

    def close(self) -> None:
        pass

    def _run(self, bucket: int, data: pd.DataFrame | None, control_rows: pd.DataFrame | None,
             timer_values: TimerValues, fired_timer_ms: int | None) -> Iterator[pd.DataFrame]:
        value = self._bucket.get()
        if value is None and fired_timer_ms is not None:
            return iter(())  # the bucket emptied earlier in this batch
        stored = bucket_from_state(value, self.spec, self.layout.bucket_count)
        if fired_timer_ms is not None and fired_timer_ms == stored.expiry_timer_ms:
            stored = replace(stored, expiry_timer_ms=None)  # Spark deletes it after this call
        control = self._load_control()
        clock = BatchClock(watermark_ms=timer_values.getCurrentWatermarkInMs(),
                           processing_time_ms=timer_values.getCurrentProcessingTimeInMs())
        batch = run_bucket_batch(self.processor, bucket, stored, data, control, control_rows,
                                 clock)
        self._save(value is not None, stored, batch)
        if batch.outputs is None:
            return iter(())
        return iter([self.layout.shape_outputs(batch.outputs)])

    def _load_control(self) -> pd.DataFrame | None:
        if self._control is None or self.spec.control is None:
            return None
        return control_from_state(self._control.get(), self.spec.control.schema)

    def _save(self, existed: bool, before: StoredBucket, batch: BucketBatch) -> None:
        after = replace(batch.stored, expiry_timer_ms=batch.next_timer_ms)
        if before.expiry_timer_ms != after.expiry_timer_ms:
            if before.expiry_timer_ms is not None:
                self._handle.deleteTimer(before.expiry_timer_ms)
            if after.expiry_timer_ms is not None:
                self._handle.registerTimer(after.expiry_timer_ms)
        if not len(after.keys):
            if existed:
                self._bucket.clear()  # the state reader then finds nothing for the bucket
        elif batch.stored is not before or after.expiry_timer_ms != before.expiry_timer_ms:
            self._bucket.update(bucket_to_state(after, self.spec, self.layout.bucket_count))
        if batch.control is not None and self._control is not None and self.spec.control:
            self._control.update(control_to_state(batch.control, self.spec.control.schema))
