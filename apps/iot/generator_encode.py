"""Readings to Kafka records: JSON values keyed by device id, plus the marks of labelled rows.

The JSON is built column-wise by Arrow compute (shared/generation/json_text), not per
record. Bad records are then corrupted one by one with orjson (a few per thousand). A
record's id in the ground truth is ``device_id:seq``, the identity the app deduplicates on.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from apps.iot.generator_faults import BAD_REASONS, SEQ_NOT_INCREASING, corrupt
from apps.iot.generator_rows import NO_LABEL, Readings
from apps.iot.reference import DEVICE_TYPE_NAMES, METRIC_NAMES
from shared.generation.input_faults import BAD_BASE, DUPLICATE, LATE, NO_FAULT
from shared.generation.json_text import concat, json_float, text
from shared.generation.producer import OutgoingRecord
from shared.generation.truth import Encoded, Mark, fault_label

SEQ_BAD = BAD_BASE + BAD_REASONS.index(SEQ_NOT_INCREASING)

_TYPE_TEXT = pa.array(DEVICE_TYPE_NAMES)
_METRIC_TEXT = pa.array(METRIC_NAMES)


def device_id(dev: int) -> str:
    return f"dev-{dev:06d}"


def record_id(dev: int, seq: int) -> str:
    return f"{device_id(dev)}:{seq}"


class Encoder:
    def __init__(self, device_types: np.ndarray, sites: np.ndarray) -> None:
        self.device_ids = pa.array([device_id(d) for d in range(len(device_types))])
        self.type_text = _TYPE_TEXT.take(pa.array(device_types))
        self.site_text = pa.array([f"site-{s:04d}" for s in sites.tolist()])

    def encode(self, rows: Readings) -> Encoded:
        dev = pa.array(rows["dev"])
        ids = self.device_ids.take(dev)
        json = concat(
            '{"device_id":"', ids, '","device_type":"', self.type_text.take(dev),
            '","site":"', self.site_text.take(dev),
            '","metric":"', _METRIC_TEXT.take(pa.array(rows["metric"])),
            '","value":', json_float(rows["value"]), ',"seq":', text(rows["seq"]),
            ',"event_time_ms":', text(rows["event_ms"]), "}")
        values = json.cast(pa.binary()).to_pylist()
        keys = ids.cast(pa.binary()).to_pylist()
        marks, fault_labels = self._label(rows, values)
        return Encoded(list(map(OutgoingRecord, keys, values)), marks, fault_labels)

    def _label(self, rows: Readings, values: list[bytes]
               ) -> tuple[list[Mark], dict[int, dict[str, Any]]]:
        """Marks every labelled row; corrupts bad rows' values in place, labelling them."""
        labels: dict[int, dict[str, Any]] = {}
        marks = []
        for i in np.flatnonzero(rows["label"] != NO_LABEL).tolist():
            label_no, code = int(rows["label"][i]), int(rows["fault"][i])
            dev, seq = int(rows["dev"][i]), int(rows["seq"][i])
            marks.append(Mark(i, label_no, record_id(dev, seq)))
            if code == NO_FAULT:
                continue  # an episode's reading: labelled when the episode was planned
            scenario, extra = self._fault(code, i, rows, values)
            labels[label_no] = fault_label(scenario, label_no, "device_id", device_id(dev),
                                           record_id(dev, seq), int(rows["event_ms"][i]), extra)
        return marks, labels

    @staticmethod
    def _fault(code: int, i: int, rows: Readings, values: list[bytes]
               ) -> tuple[str, dict[str, Any]]:
        if code == LATE:
            delay = int(rows["arrival"][i] - rows["t"][i])
            return "late", {"detail": {"delayed_ms": delay}}
        if code == DUPLICATE:
            return "duplicate", {"detail": {}}
        reason = BAD_REASONS[code - BAD_BASE]
        if code == SEQ_BAD:
            return "bad_record", {"reason": reason, "detail": {"seq": int(rows["seq"][i])}}
        values[i], detail = corrupt(values[i], reason, float(rows["fault_u"][i]))
        return "bad_record", {"reason": reason, "detail": detail}
