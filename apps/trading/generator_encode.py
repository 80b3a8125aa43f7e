"""Rows to Kafka records (key: instrument, value: JSON) and the marks of labelled rows.

The JSON is built column-wise by Arrow compute (shared/generation/json_text). Prices are
exact decimal strings made from integer units (see apps/trading/reference.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from apps.trading.generator_instruments import VENUES, TradedInstruments, price_text
from apps.trading.generator_rows import CANCEL, NO_LABEL, Rows
from shared.generation.input_faults import BAD_BASE, DUPLICATE, LATE, truncated, without
from shared.generation.json_text import concat, padded, text
from shared.generation.producer import OutgoingRecord
from shared.generation.truth import Encoded, Mark, fault_label

# The "fault" column's trading kinds, besides shared/generation/input_faults' LATE and DUPLICATE.
FAT_FINGER, CANCELLATION = 3, 4
BAD_REASONS = ("malformed_json", "missing_trade_id", "unknown_instrument", "zero_price",
               "negative_price")
SCENARIOS = {LATE: "late", DUPLICATE: "duplicate", FAT_FINGER: "fat_finger",
             CANCELLATION: "cancel"}
_VENUE_TEXT = pa.array(VENUES)
_SIDE_TEXT = pa.array(["B", "S"])


def price_texts(units: np.ndarray, scale: np.ndarray) -> pa.Array:
    """Exact decimal strings of positive prices: (10125, 2) -> "101.25"."""
    power = 10 ** scale
    whole, fraction = np.divmod(units, power)
    digits = pc.utf8_slice_codeunits(text(power + fraction), 1)  # "105" -> "05"
    return pc.if_else(pa.array(scale == 0), text(whole), concat(text(whole), ".", digits))


class Encoder:
    def __init__(self, instruments: TradedInstruments, trade_prefix: str) -> None:
        self.instruments, self.prefix = instruments, trade_prefix
        self._symbols = pa.array(instruments.symbols)
        self._keys = [symbol.encode() for symbol in instruments.symbols]

    def trade_ids(self, tid: np.ndarray) -> list[str]:
        return [f"{self.prefix}{t:010d}" for t in tid.tolist()]

    def encode(self, rows: Rows) -> Encoded:
        ins = self.instruments
        symbols = self._symbols.take(pa.array(rows["inst"]))
        units = rows["ticks"] * ins.tick_units[rows["inst"]]
        head = concat('{"kind":"', pc.if_else(pa.array(rows["kind"] == CANCEL), "cancel",
                                               "trade"),
                      '","trade_id":"', self.prefix, padded(rows["tid"], 10),
                      '","instrument":"', symbols,
                      '","venue":"', _VENUE_TEXT.take(pa.array(rows["venue"])),
                      '","seq":', text(rows["seq"]))
        trade = concat(',"price":"', price_texts(units, ins.scale[rows["inst"]]),
                       '","size":', text(rows["size"]),
                       ',"side":"', _SIDE_TEXT.take(pa.array(rows["side"])), '"')
        tail = concat(',"event_time_ms":', text(rows["event_us"] // 1000),
                      ',"event_time_us":', text(rows["event_us"]), "}")
        body = pc.if_else(pa.array(rows["kind"] == CANCEL), "", trade)
        values = concat(head, body, tail).cast(pa.binary()).to_pylist()
        keys = list(map(self._keys.__getitem__, rows["inst"].tolist()))  # faster than Arrow's
        marks, labels = self._label_faults(rows, values, keys, units)
        return Encoded(list(map(OutgoingRecord, keys, values)), marks, labels)

    def _label_faults(self, rows: Rows, values: list[bytes], keys: list[bytes],
                      units: np.ndarray) -> tuple[list[Mark], dict[int, dict[str, Any]]]:
        """Marks every labelled row; corrupts bad rows in place, labelling them."""
        labels: dict[int, dict[str, Any]] = {}
        marks = []
        labelled = np.flatnonzero(rows["label"] != NO_LABEL)
        for i, trade_id in zip(labelled.tolist(), self.trade_ids(rows["tid"][labelled]),
                               strict=True):
            label_no, code = int(rows["label"][i]), int(rows["fault"][i])
            marks.append(Mark(i, label_no, trade_id))
            scenario, extra = self._fault(code, i, rows, values, keys, int(units[i]))
            labels[label_no] = fault_label(scenario, label_no, "instrument", keys[i].decode(),
                                           trade_id, int(rows["event_us"][i] // 1000), extra)
        return marks, labels

    def _fault(self, code: int, i: int, rows: Rows, values: list[bytes], keys: list[bytes],
               units: int) -> tuple[str, dict[str, Any]]:
        if code == LATE:
            return "late", {"detail": {"lateness_ms": int(rows["t_us"][i] - rows["event_us"][i])
                                       // 1000}}
        if code in (DUPLICATE, CANCELLATION):
            return SCENARIOS[code], {"detail": {}}
        scale = int(self.instruments.scale[rows["inst"][i]])
        if code == FAT_FINGER:
            return "fat_finger", {"detail": {"price": price_text(units, scale)}}
        reason = BAD_REASONS[code - BAD_BASE]
        values[i], keys[i], detail = corrupt(values[i], keys[i], reason, float(rows["fault_u"][i]))
        return "bad_record", {"reason": reason, "detail": detail}


def corrupt(value: bytes, key: bytes, reason: str, u: float) -> tuple[bytes, bytes, dict]:
    """The bad value, its key, and the label's detail; ``u`` picks the variant."""
    if reason == "malformed_json":
        bad, detail = truncated(value, u)
        return bad, key, detail
    record = orjson.loads(value)
    if reason == "missing_trade_id":
        bad, detail = without(record, "trade_id")
        return bad, key, detail
    if reason == "unknown_instrument":
        record["instrument"] = unknown = record["instrument"] + "X"  # 5 letters: never listed
        return orjson.dumps(record), unknown.encode(), {"value": unknown}
    if "price" not in record:  # a cancel has no price to break
        return value, key, {"unchanged": "cancel"}
    price = "0" if reason == "zero_price" else "-" + record["price"]
    record["price"] = price
    return orjson.dumps(record), key, {"field": "price", "value": price}
