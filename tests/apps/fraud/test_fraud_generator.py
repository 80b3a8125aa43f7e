"""The fraud generator without Kafka: determinism, rates, and labels that tell the truth.
One run of 20,000 records at 5 events/s (about an hour of event time, so that most
scenarios finish) with fraud and faults turned up, checked against its own labels."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter, defaultdict
from itertools import pairwise

import orjson
import pytest
from pyspark.sql.types import DoubleType, LongType, StringType

from apps.fraud.generator import (
    FaultRates,
    FraudGenerator,
    GeneratorConfig,
    ScenarioRates,
    generate,
)
from apps.fraud.generator_faults import BAD_REASONS, REQUIRED_FIELDS
from apps.fraud.generator_scenarios import SCENARIOS
from apps.fraud.generator_world import KNOWN_CURRENCIES
from apps.fraud.topics import CARD_TRANSACTION
from shared.cli.produce import StopRequest, records_to_send
from shared.generation.truth import GeneratedRun, TruthFiles, take

CONFIG = GeneratorConfig(
    seed=11, events_per_s=5.0, cards=20_000, chunk_size=1024,
    scenarios=ScenarioRates(20.0, 20.0, 20.0, 20.0),
    faults=FaultRates(late_fraction=0.01, duplicate_fraction=0.01, bad_fraction=0.02))
COUNT = 20_000
MINUTE_MS, YEAR_MS = 60_000, 365 * 24 * 3_600_000
Parsed = list[dict | None]  # each record's JSON value, None if it does not parse
ByTxn = dict[str, dict]  # parsed records by txn_id (a duplicate has the same content)
PYTHON_TYPES = {StringType(): str, DoubleType(): float, LongType(): int}
NUMERIC = [f.name for f in CARD_TRANSACTION.struct.fields if f.dataType != StringType()]


@pytest.fixture(scope="module")
def run() -> GeneratedRun:
    return generate(CONFIG, COUNT)


@pytest.fixture(scope="module")
def parsed(run: GeneratedRun) -> Parsed:
    return [_loads(r.value) for r in run.records]


def _loads(value: bytes) -> dict | None:
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return None


@pytest.fixture(scope="module")
def by_txn(parsed: Parsed) -> ByTxn:
    return {r["txn_id"]: r for r in parsed if r is not None and isinstance(r.get("txn_id"), str)}


def _problem(record: dict | None) -> str | None:
    """Why a record is not a valid card transaction (a bad-record reason), or None."""
    if record is None:
        return "malformed_json"
    if any(name not in record for name in REQUIRED_FIELDS):
        return "missing_field"
    if not all(type(record.get(name)) in (int, float) for name in NUMERIC):  # bool is no number
        return "wrong_type"
    if record["amount"] < 0:
        return "negative_amount"
    if record["currency"] not in KNOWN_CURRENCIES:
        return "unknown_currency"
    if abs(record["lat"]) > 90 or abs(record["lon"]) > 180:
        return "coordinates_out_of_range"
    if record["event_time_ms"] > CONFIG.start_time_ms + YEAR_MS * 0.9:
        return "event_time_far_future"
    return None


def _km(a: dict, b: dict) -> float:
    p1, l1, p2, l2 = map(math.radians, (a["lat"], a["lon"], b["lat"], b["lon"]))
    h = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin((l2 - l1) / 2) ** 2
    return 2 * 6371 * math.asin(math.sqrt(h))


def _five_within_3_minutes(times: list[int]) -> bool:
    ordered = sorted(times)
    return any(b - a < 3 * MINUTE_MS for a, b in zip(ordered, ordered[4:], strict=False))


def _scenarios(run: GeneratedRun, by_txn: ByTxn, scenario: str) -> list[tuple[dict, list]]:
    """Each complete label of ``scenario`` with its transactions, in event-time order."""
    return [(x, [by_txn[t] for t in x["txn_ids"]]) for x in run.labels
            if x["scenario"] == scenario and x["complete"]]


def test_same_seed_gives_identical_bytes_another_seed_does_not(run: GeneratedRun) -> None:
    again, other = generate(CONFIG, 5_000), generate(dataclasses.replace(CONFIG, seed=12), 5_000)
    assert again.records == run.records[:5_000]  # same key and value bytes; a prefix too
    assert [r.value for r in other.records] != [r.value for r in again.records]
    assert generate(CONFIG, 5_000).labels == again.labels


def test_count_event_rate_and_every_scenario_and_fault_kind(run: GeneratedRun) -> None:
    assert len(run.records) == run.summary["records"] == COUNT
    assert run.summary["event_rate_per_s"] == pytest.approx(CONFIG.events_per_s, rel=0.05)
    complete = Counter(x["scenario"] for x in run.labels if x["complete"])
    for kind in (*SCENARIOS, "duplicate", "late", "bad_record"):
        assert complete[kind] >= 5, (kind, complete)
    assert set(run.summary["bad_records_by_reason"]) == set(BAD_REASONS)


def test_good_records_fit_the_card_transaction_schema(run: GeneratedRun, parsed: Parsed) -> None:
    good = [(r, p) for r, p in zip(run.records, parsed, strict=True) if _problem(p) is None]
    assert len(good) > 0.9 * COUNT
    types = {f.name: PYTHON_TYPES[f.dataType] for f in CARD_TRANSACTION.struct.fields}
    for record, value in good:
        assert list(value) == CARD_TRANSACTION.field_names
        assert all(type(value[name]) is kind for name, kind in types.items()), value
        assert record.key == value["card_id"].encode() and record.timestamp_ms is None
        assert value["amount"] > 0


def test_velocity_bursts_are_5_plus_txns_of_one_card_within_3_minutes(
        run: GeneratedRun, by_txn: ByTxn) -> None:
    for label, txns in _scenarios(run, by_txn, "velocity_burst"):
        times = [t["event_time_ms"] for t in txns]
        assert len(txns) >= 5 and {t["card_id"] for t in txns} == {label["card_id"]}
        assert max(times) - min(times) < 3 * MINUTE_MS
        assert label["fraud_txn_ids"] == label["txn_ids"]


def test_honest_traffic_alone_trips_no_velocity_rule(run: GeneratedRun, parsed: Parsed) -> None:
    """The labels are the whole truth: only labelled bursts reach 5 txns in 3 minutes."""
    burst_cards = {x["card_id"] for x in run.labels if x["scenario"] == "velocity_burst"}
    times: dict[str, set[int]] = defaultdict(set)
    for value in filter(lambda v: _problem(v) is None, parsed):
        times[value["card_id"]].add(value["event_time_ms"])
    for card, card_times in times.items():
        assert card in burst_cards or not _five_within_3_minutes(list(card_times)), card


def test_spend_spikes_are_far_above_the_card_baseline(run: GeneratedRun, by_txn: ByTxn) -> None:
    for label, (*baseline, spike) in _scenarios(run, by_txn, "spend_spike"):
        assert label["fraud_txn_ids"] == [spike["txn_id"]] and len(baseline) >= 3
        assert spike["amount"] >= 50 * label["detail"]["baseline_median"]
        assert spike["amount"] > 5 * max(t["amount"] for t in baseline)
        gaps = [b["event_time_ms"] - a["event_time_ms"] for a, b in pairwise(baseline)]
        assert min(gaps) > 3 * MINUTE_MS  # a baseline is no velocity burst


def test_impossible_travel_is_far_apart_and_close_in_time(run: GeneratedRun, by_txn: ByTxn) -> None:
    for label, (home, away) in _scenarios(run, by_txn, "impossible_travel"):
        assert home["card_id"] == away["card_id"] == label["card_id"]
        assert _km(home, away) > 1_000
        assert 0 < away["event_time_ms"] - home["event_time_ms"] < 60 * MINUTE_MS


def test_card_testing_is_small_probes_then_a_large_amount(run: GeneratedRun, by_txn: ByTxn) -> None:
    for _label, (*probes, cash_out) in _scenarios(run, by_txn, "card_testing"):
        assert len(probes) >= 3 and len({p["merchant_id"] for p in probes}) == 1
        assert cash_out["amount"] > 50 * max(p["amount"] for p in probes)
        times = [t["event_time_ms"] for t in (*probes, cash_out)]
        assert times == sorted(times)
        assert not _five_within_3_minutes(times)  # card testing is no velocity burst


def test_duplicates_repeat_the_txn_id_and_the_bytes(run: GeneratedRun, parsed: Parsed) -> None:
    values_by_txn: dict[str, list[bytes]] = defaultdict(list)
    for record, value in zip(run.records, parsed, strict=True):
        if value is not None and isinstance(value.get("txn_id"), str):
            values_by_txn[value["txn_id"]].append(record.value)
    labelled = {x["txn_ids"][0] for x in run.labels if x["scenario"] == "duplicate"}
    assert {t for t, values in values_by_txn.items() if len(values) > 1} == labelled
    assert all(len(values_by_txn[t]) == 2 and len(set(values_by_txn[t])) == 1 for t in labelled)


def test_disorder_stays_in_the_window_except_late_events(run: GeneratedRun, parsed: Parsed) -> None:
    late = {x["txn_ids"][0] for x in run.labels if x["scenario"] == "late"}
    newest, worst_disorder, behind = CONFIG.start_time_ms, 0, []
    for value in filter(lambda v: _problem(v) is None, parsed):
        event_ms = value["event_time_ms"]
        if value["txn_id"] in late:
            behind.append(newest - event_ms)
        else:
            worst_disorder, newest = max(worst_disorder, newest - event_ms), max(newest, event_ms)
    window = CONFIG.faults.disorder_ms
    assert window / 2 < worst_disorder <= window  # shuffled, within bounds
    assert len(behind) == len(late)
    # A late event is behind the stream by its lateness, less the disorder (and a gap).
    assert min(behind) > CONFIG.faults.late_by_ms[0] - window - 10_000


def test_bad_records_are_invalid_for_their_reason(run: GeneratedRun, parsed: Parsed) -> None:
    bad_labels = [x for x in run.labels if x["scenario"] == "bad_record"]
    found = Counter(p for p in map(_problem, parsed) if p is not None)
    assert found == Counter(x["reason"] for x in bad_labels)
    reason_of = {x["txn_ids"][0]: x["reason"] for x in bad_labels}
    for value in parsed:
        if value is not None and isinstance(value.get("txn_id"), str) and _problem(value):
            assert _problem(value) == reason_of[value["txn_id"]]


def test_labels_name_only_sent_records_and_mark_cut_scenarios(
        run: GeneratedRun, by_txn: ByTxn) -> None:
    incomplete = [x for x in run.labels if not x["complete"]]
    assert incomplete and run.summary["incomplete_scenarios"]
    for label in (x for x in run.labels if x["scenario"] != "bad_record"):  # see above
        sent = label["txn_ids"] if label["complete"] else label["emitted_txn_ids"]
        assert all(t in by_txn for t in sent)
    for label in incomplete:
        unsent = set(label["txn_ids"]) - set(label["emitted_txn_ids"])
        assert label["emitted_txn_ids"] and unsent and not unsent & by_txn.keys()


def test_a_stop_mid_chunk_labels_exactly_the_records_taken(tmp_path) -> None:
    truth, stop = TruthFiles(tmp_path / "run"), StopRequest()  # not entered: no handler
    records = records_to_send(take(FraudGenerator(CONFIG).chunks()), truth, stop)
    taken = [next(records) for _ in range(4_321)]
    stop.requested = True
    assert list(records) == []
    truth.close({"seed": CONFIG.seed, "parameters": CONFIG.to_dict()})
    expected = generate(CONFIG, 4_321)
    lines = [orjson.loads(line) for line in truth.labels_path.read_bytes().splitlines()]
    assert taken == expected.records and lines == expected.labels
    manifest = orjson.loads(truth.manifest_path.read_bytes())
    assert manifest["records"] == 4_321 and manifest["seed"] == CONFIG.seed
    assert manifest["labels"] == dict(Counter(x["scenario"] for x in lines))


def test_a_population_of_millions_costs_nothing_up_front() -> None:
    big = generate(dataclasses.replace(CONFIG, cards=50_000_000, events_per_s=1000.0), 2_000)
    cards = {r.key for r in big.records}
    assert len(cards) > 1_900 and max(cards) > b"card-10000000"


@pytest.mark.parametrize("change", [
    {"events_per_s": 0}, {"cards": 0}, {"faults": FaultRates(bad_fraction=0.6)},
    {"faults": FaultRates(bad_reasons=("typo",))}, {"faults": FaultRates(late_by_ms=(10, 5))}])
def test_the_config_rejects_nonsense(change: dict) -> None:
    with pytest.raises(ValueError):
        dataclasses.replace(CONFIG, **change)
