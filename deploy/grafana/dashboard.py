"""The Statewise Grafana dashboard, as code: ``python -m deploy.grafana.dashboard`` prints
it as JSON (deploy/grafana/statewise.json is that output, committed; a unit test holds the
two equal). Its figures are those shared/runtime/prometheus.py exposes (README.md,
"Metrics for Prometheus"); how to import it: deploy/grafana/README.md.
"""

from __future__ import annotations

import json

from grafana_foundation_sdk.builders.dashboard import (
    AnnotationQuery,
    Dashboard,
    DatasourceVariable,
    QueryVariable,
    Row,
)
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models.common import BigValueColorMode, BigValueTextMode

from deploy.grafana.panels import (
    APP_VARIABLE,
    DATASOURCE,
    DATASOURCE_VARIABLE,
    WIDTH,
    gauge,
    per_second,
    quantile,
    query,
    series,
    stat_panel,
)
from shared.runtime.prometheus import SKIPPED

UID = "statewise"
# A query's series are told apart by app and query; a multi-app view needs both.
BY_QUERY = "{{app}} {{query}}"
# Grafana's own annotations (alerts, annotations added by hand), which every dashboard it
# saves carries; without them its UI has no place to add one.
BUILT_IN = (AnnotationQuery().name("Annotations & Alerts").built_in(1).type("dashboard")
            .datasource(model.DataSourceRef(type_val="grafana", uid="-- Grafana --"))
            .enable(True).hide(True).icon_color("rgba(0, 211, 255, 1)"))
# Grafana's custom units: "ops" would read "ops/s", which these are not.
PER_SECOND, RECORDS = "suffix: /s", "suffix: records/s"
# Every app at first: one machine runs a few, and a panel per app is not needed to tell
# them apart (every legend names the app).
ALL = model.VariableOption(selected=True, text=["All"], value=["$__all"])
# A query restarted from its checkpoint after a failure, marked on every panel.
RESTARTS = (AnnotationQuery().name("Restarts").enable(True).icon_color("orange")
            .datasource(DATASOURCE)
            .expr(f"changes({gauge('statewise_query_restarts_total')}[2m]) > 0"))
RUNNING = model.ValueMap({"1": model.ValueMappingResult(text="running", color="green"),
                          "0": model.ValueMappingResult(text="stopped", color="red")})


def health() -> list:
    active = stat_panel("Query active", "statewise_query_active: 1 while the query runs, 0 "
                        "once it stopped (kept after it stopped, so a dead query shows red, "
                        "not blank)", [query(gauge("statewise_query_active"), BY_QUERY)])
    active = (active.mappings([RUNNING]).color_mode(BigValueColorMode.BACKGROUND)
              .text_mode(BigValueTextMode.VALUE_AND_NAME))
    failures = series("Query failures and restarts", "Failures of the query, and the "
                      "restarts from its checkpoint they led to; a failure without a "
                      "restart is the one that stopped the app.", PER_SECOND, [
                          query(per_second("statewise_query_failures_total", "app"),
                                "{{app}} failures"),
                          query(per_second("statewise_query_restarts_total", "app"),
                                "{{app}} restarts")], width=WIDTH - WIDTH // 3)
    return [active, failures]


def throughput() -> list:
    by_query = "app, query"
    rows = series("Input records per second by topic", "Records the query read "
                  "(statewise_input_records_total, Spark's numInputRows of each source).",
                  RECORDS, [query(per_second("statewise_input_records_total",
                                             "app, query, topic"), f"{BY_QUERY} {{{{topic}}}}")])
    duration = series("Batch duration", "Micro-batches, start to end (Spark's "
                      "triggerExecution): median and 99th percentile over the rate "
                      "interval, against the trigger interval.", "s", [
                          query(quantile(q, "statewise_batch_duration_seconds", by_query),
                                f"{BY_QUERY} p{round(q * 100)}") for q in (0.5, 0.99)] + [
                          query(gauge("statewise_trigger_interval_seconds"),
                                "{{app}} trigger interval")])
    size = series("Records per batch", "Records read per batch, averaged over the rate "
                  "interval.", "short", [query(
                      f"{per_second('statewise_input_records_total', by_query)} / "
                      f"{per_second('statewise_batches_total', by_query)}", BY_QUERY)])
    since = series("Time since the last batch started", "Grows while a query stalls, also "
                   "one without event time (whose watermark delay is absent).", "s",
                   [query(f"time() - {gauge('statewise_last_progress_timestamp_seconds')}",
                          BY_QUERY)])
    return [rows, duration, size, since]


def latency() -> list:
    third, by_query = WIDTH // 3, "app, query"
    end_to_end = series("End-to-end latency (upper bound)", "Kafka write to output commit, "
                        "bounded per batch by its end minus the start of the batch before "
                        "(README.md, Metrics for Prometheus): p50 and p99.", "s", [
                            query(quantile(q, "statewise_end_to_end_latency_seconds",
                                           by_query), f"{BY_QUERY} p{round(q * 100)}")
                            for q in (0.5, 0.99)], width=third)
    checkpoint = series("Checkpoint commit duration", "Writing a batch's offsets and "
                        "commit to the checkpoint (Spark's walCommit + commitOffsets): "
                        "p99.", "s", [query(quantile(
                            0.99, "statewise_checkpoint_commit_duration_seconds", by_query),
                            BY_QUERY)], width=third)
    sink_commit = series("Transaction duration of the sink", "The slowest writer's Kafka "
                         "transaction of each batch the sink wrote: p99.", "s", [query(
                             quantile(0.99, "statewise_sink_commit_duration_seconds", "app"),
                             "{{app}}")], width=third)
    return [end_to_end, checkpoint, sink_commit]


def event_time_and_kafka() -> list:
    delay = series("Watermark delay", "How far the watermark is behind the wall clock when "
                   "Prometheus scrapes: it grows while a query stalls; absent until the "
                   "first event time.", "s",
                   [query(gauge("statewise_watermark_delay_seconds"), BY_QUERY)])
    lag = series("Kafka lag per partition", "Records waiting in each partition when the "
                 "last batch was planned (Kafka's latest offset minus the query's "
                 "position); 0 once Spark finds nothing new.", "short",
                 [query(gauge("statewise_kafka_lag_records"),
                        f"{BY_QUERY} {{{{topic}}}}/{{{{partition}}}}")])
    return [delay, lag]


def state() -> list:
    third = WIDTH // 3
    keyed = [series(f"Keyed state {what} per partition", f"The keyed operator's {what} per "
                    "state partition, as <app>.state.jsonl records them.", unit,
                    [query(gauge(f"statewise_keyed_state_{what}"),
                           "{{app}} partition {{partition}}")], width=third)
             for what, unit in (("keys", "short"), ("rows", "short"), ("bytes", "bytes"))]
    operator = f"{BY_QUERY} {{{{operator}}}}"
    spark = [series("Spark state rows per operator", "Rows in each stateful operator's "
                    "state store (Spark's numRowsTotal).", "short",
                    [query(gauge("statewise_state_rows"), operator)], width=third),
             series("Spark state memory per operator", "Memory of each stateful operator's "
                    "state store (Spark's memoryUsedBytes).", "bytes",
                    [query(gauge("statewise_state_memory_bytes"), operator)], width=third),
             series("Spark state on disk per operator", "Each stateful operator's RocksDB "
                    "files on the executors' disks (Spark's rocksdbSstFileSize).", "bytes",
                    [query(gauge("statewise_state_disk_bytes"), operator)], width=third)]
    caps = series("Keyed state caps at work", "What the state's caps did: keys evicted or "
                  "refused by a full bucket, history entries trimmed, guard warnings. These "
                  "count from the query's last start; rate() reads through the reset.",
                  PER_SECOND, [query(per_second(f"statewise_keyed_state_{name}_total", "app"),
                                f"{{{{app}}}} {name.replace('_', ' ')}")
                          for name in ("evicted_keys", "refused_keys", "trimmed_entries",
                                       "warnings")], width=third)
    return [*keyed, *spark, caps]


def side_records() -> list:
    third = WIDTH // 3
    dead = series("Dead-letter records per second by stage and reason", "Records sent to "
                  "the dead-letter topic, counted by the sink's writers as they commit "
                  "them.", RECORDS, [query(per_second("statewise_dead_letter_records_total",
                                                    "app, stage, reason"),
                                         "{{app}} {{stage}}: {{reason}}")], width=third)
    late = series("Late records per second by reason", "Records sent to the late topic, "
                  "counted the same way.", RECORDS,
                  [query(per_second("statewise_late_records_total", "app, reason"),
                         "{{app}} {{reason}}")], width=third)
    quality = series("Data quality", "Scheduled validations of an input sample per "
                     "second, passed or failed, and the expectations the newest one "
                     "failed.", "short", [
                         query(per_second("statewise_quality_validations_total",
                                          "app, result"), "{{app}} {{result}}/s"),
                         query(gauge("statewise_quality_failed_expectations"),
                               "{{app}} failed expectations")], width=third)
    lost = series("Input lost before it was read", "Input records Kafka deleted (retention) "
                  "before the app read them, skipped at a start with "
                  "STATEWISE_FAIL_ON_DATA_LOSS=false. Anything here is data the outputs "
                  "never saw.", RECORDS,
                  [query(per_second("statewise_input_lost_records_total", "app, topic"),
                         "{{app}} {{topic}}")], width=third)
    return [dead, late, quality, lost]


def sink() -> list:
    # The legend starts with the outcome, so that one regex finds the skipped series of
    # every app: a replay whose output was committed already means a restart happened.
    skipped = [model.DynamicConfigValue("color", {"mode": "fixed", "fixedColor": "orange"}),
               model.DynamicConfigValue("custom.lineWidth", 3),
               model.DynamicConfigValue("custom.fillOpacity", 40)]
    batches = series("Sink batches per second by outcome", f"Micro-batches the exactly-once "
                     f"sink wrote, found empty, or skipped ({SKIPPED}, in orange: a replay "
                     f"after a restart whose output was committed already).",
                     "suffix: batches/s",
                     [query(per_second("statewise_sink_batches_total", "app, outcome"),
                            "{{outcome}} ({{app}})")])
    batches = batches.override_by_regexp(f"^{SKIPPED} .*", skipped)
    records = series("Sink records per second by outcome", "Records the sink wrote, or "
                     "skipped in replays.", RECORDS,
                     [query(per_second("statewise_sink_records_total", "app, outcome"),
                            "{{outcome}} ({{app}})")])
    return [batches, records.override_by_regexp(f"^{SKIPPED} .*", skipped)]


ROWS = (("Health", health), ("Throughput", throughput), ("Latency", latency),
        ("Event time and Kafka", event_time_and_kafka), ("State", state),
        ("Dead letters and late records", side_records), ("Exactly-once sink", sink))


def build() -> model.Dashboard:
    board = (Dashboard("Statewise").uid(UID).tags(["statewise", "spark", "kafka"])
             .description("Statewise apps' figures from their Prometheus endpoints")
             .annotation(BUILT_IN).annotation(RESTARTS).refresh("10s").time("now-1h", "now")
             .tooltip(model.DashboardCursorSync.CROSSHAIR)
             .with_variable(DatasourceVariable(DATASOURCE_VARIABLE).label("Prometheus")
                            .type("prometheus"))
             .with_variable(QueryVariable(APP_VARIABLE).label("App").datasource(DATASOURCE)
                            .query("label_values(statewise_query_active, app)")
                            .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
                            .sort(model.VariableSort.ALPHABETICAL_ASC)
                            .multi(True).include_all(True).current(ALL)))
    # Grafana links to a panel (view, share, explore) by its id: ids in the order of the
    # panels keep those links valid from one generation to the next.
    number = 0
    for title, panels in ROWS:
        number += 1
        board = board.with_row(Row(title).id(number))
        for panel in panels():
            number += 1
            board = board.with_panel(panel.id(number))
    return board.build()


def render() -> str:
    return json.dumps(build(), cls=JSONEncoder, indent=2) + "\n"


if __name__ == "__main__":
    print(render(), end="")
