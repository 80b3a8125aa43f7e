"""Rows to Kafka records (key: instrument, value: JSON) and the marks of labelled rows.

The JSON is built column-wise by Arrow compute, as in apps/fraud/generator_encode.py:
every string comes from a fixed alphabet, so nothing needs escaping. Prices are exact
decimal strings made from integer units (see apps/trading/reference.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from apps.fraud.generator_truth import Mark
from apps.trading.generator_rows import CANCEL, NO_LABEL, Rows
from apps.trading.reference import VENUES, Instruments, price_text
from shared.producer import OutgoingRecord

# The "fault" column: what was done to a row, if anything.
NO_FAULT, LATE, DUPLICATE, FAT_FINGER, CANCELLATION = 0, 1, 2, 3, 4
BAD_REASONS = ("malformed_json", "missing_trade_id", "unknown_instrument", "zero_price",
               "negative_price")
BAD_BASE = 10  # BAD_BASE + i: bad record of reason BAD_REASONS[i]
SCENARIOS = {LATE: "late", DUPLICATE: "duplicate", FAT_FINGER: "fat_finger",
             CANCELLATION: "cancel"}
_VENUE_TEXT = pa.array(VENUES)
_SIDE_TEXT = pa.array(["B", "S"])


@dataclass(frozen=True)
class Encoded:
    records: list[OutgoingRecord]
    marks: list[Mark]
    fault_labels: dict[int, dict[str, Any]]


def _text(values: np.ndarray) -> pa.Array:
    return pc.cast(pa.array(values), pa.string())


def _concat(*parts: pa.Array | str) -> pa.Array:
    return pc.binary_join_element_wise(*parts, "")


def price_texts(units: np.ndarray, scale: np.ndarray) -> pa.Array:
    """Exact decimal strings of positive prices: (10125, 2) -> "101.25"."""
    power = 10 ** scale
    whole, fraction = np.divmod(units, power)
    digits = pc.utf8_slice_codeunits(_text(power + fraction), 1)  # "105" -> "05"
    return pc.if_else(pa.array(scale == 0), _text(whole), _concat(_text(whole), ".", digits))


class Encoder:
    def __init__(self, instruments: Instruments, trade_prefix: str) -> None:
        self.instruments, self.prefix = instruments, trade_prefix
        self._symbols = pa.array(instruments.symbols)
        self._keys = [symbol.encode() for symbol in instruments.symbols]

    def trade_ids(self, tid: np.ndarray) -> list[str]:
        return [f"{self.prefix}{t:010d}" for t in tid.tolist()]

    def encode(self, rows: Rows) -> Encoded:
        ins = self.instruments
        symbols = self._symbols.take(pa.array(rows["inst"]))
        units = rows["ticks"] * ins.tick_units[rows["inst"]]
        head = _concat('{"kind":"', pc.if_else(pa.array(rows["kind"] == CANCEL), "cancel",
                                                "trade"),
                       '","trade_id":"', self.prefix, pc.utf8_lpad(_text(rows["tid"]), 10, "0"),
                       '","instrument":"', symbols,
                       '","venue":"', _VENUE_TEXT.take(pa.array(rows["venue"])),
                       '","seq":', _text(rows["seq"]))
        trade = _concat(',"price":"', price_texts(units, ins.scale[rows["inst"]]),
                        '","size":', _text(rows["size"]),
                        ',"side":"', _SIDE_TEXT.take(pa.array(rows["side"])), '"')
        tail = _concat(',"event_time_ms":', _text(rows["event_us"] // 1000),
                       ',"event_time_us":', _text(rows["event_us"]), "}")
        body = pc.if_else(pa.array(rows["kind"] == CANCEL), "", trade)
        values = _concat(head, body, tail).cast(pa.binary()).to_pylist()
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
            labels[label_no] = {
                "kind": "fault", "scenario": scenario, "scenario_id": f"{scenario}-{label_no:07d}",
                "instrument": keys[i].decode(), "txn_ids": [trade_id],
                "event_time_ms": int(rows["event_us"][i] // 1000), **extra}
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
        cut = 1 + int(u * (len(value) - 2))  # a proper prefix of an object never closes
        return value[:cut], key, {"truncated_at": cut}
    record = orjson.loads(value)
    if reason == "missing_trade_id":
        del record["trade_id"]
        return orjson.dumps(record), key, {"field": "trade_id"}
    if reason == "unknown_instrument":
        record["instrument"] = unknown = record["instrument"] + "X"  # 5 letters: never listed
        return orjson.dumps(record), unknown.encode(), {"value": unknown}
    if "price" not in record:  # a cancel has no price to break
        return value, key, {"unchanged": "cancel"}
    price = "0" if reason == "zero_price" else "-" + record["price"]
    record["price"] = price
    return orjson.dumps(record), key, {"field": "price", "value": price}
