"""The pieces every panel of the Statewise dashboard is made of: PromQL for gauges and
counters, and time series and stat panels on the dashboard's Prometheus data source.

A panel queries the data source the `datasource` variable names, never a fixed uid: a
uid is per Grafana instance, so a fixed one would break on every import.
"""

from __future__ import annotations

from collections.abc import Sequence

from grafana_foundation_sdk.builders import prometheus, stat, timeseries
from grafana_foundation_sdk.builders.common import (
    ReduceDataOptions,
    VizLegendOptions,
    VizTooltipOptions,
)
from grafana_foundation_sdk.models.common import (
    BigValueGraphMode,
    LegendDisplayMode,
    LegendPlacement,
    SortOrder,
    TooltipDisplayMode,
)
from grafana_foundation_sdk.models.dashboard import DataSourceRef

DATASOURCE_VARIABLE = "datasource"
APP_VARIABLE = "app"
DATASOURCE = DataSourceRef(type_val="prometheus", uid=f"${{{DATASOURCE_VARIABLE}}}")
# The app variable may hold several apps (or All): a regex match takes any of them.
APPS = f'{APP_VARIABLE}=~"${APP_VARIABLE}"'
WIDTH = 24  # Grafana's grid


def gauge(metric: str) -> str:
    """A gauge as it is: each series is the newest figure of one query, partition..."""
    return f"{metric}{{{APPS}}}"


def per_second(counter: str, by: str) -> str:
    """A counter's rate, summed over the scrape's own labels (instance, job) so that an
    app scraped twice, or moved, stays one series per `by`. $__rate_interval is at least
    four scrape intervals, so rate() always has two samples to work with."""
    return f"sum by ({by}) (rate({counter}{{{APPS}}}[$__rate_interval]))"


def quantile(q: float, histogram: str, by: str) -> str:
    """The ``q`` quantile of a histogram's observations over the rate interval, per
    ``by`` (Prometheus interpolates within the bucket it falls in)."""
    return (f"histogram_quantile({q}, sum by (le, {by}) "
            f"(rate({histogram}_bucket{{{APPS}}}[$__rate_interval])))")


def query(expr: str, legend: str) -> prometheus.Dataquery:
    return prometheus.Dataquery().expr(expr).legend_format(legend)


def _with_targets(panel, queries: Sequence[prometheus.Dataquery]):
    # Grafana tells a panel's queries apart by refId (A, B...); an empty one is not unique.
    for number, target in enumerate(queries):
        panel = panel.with_target(target.ref_id(chr(ord("A") + number)))
    return panel


def series(title: str, about: str, unit: str, queries: Sequence[prometheus.Dataquery],
           width: int = WIDTH // 2, height: int = 8) -> timeseries.Panel:
    panel = (timeseries.Panel().title(title).description(about).unit(unit)
             .datasource(DATASOURCE).span(width).height(height).fill_opacity(10)
             .legend(VizLegendOptions().show_legend(True)
                     .display_mode(LegendDisplayMode.TABLE)
                     .placement(LegendPlacement.BOTTOM).calcs(["lastNotNull", "max"]))
             .tooltip(VizTooltipOptions().mode(TooltipDisplayMode.MULTI)
                      .sort(SortOrder.DESCENDING)))
    return _with_targets(panel, queries)


def stat_panel(title: str, about: str, queries: Sequence[prometheus.Dataquery],
               width: int = WIDTH // 3, height: int = 8) -> stat.Panel:
    """Each series' newest value, one tile per series."""
    panel = (stat.Panel().title(title).description(about).datasource(DATASOURCE)
             .span(width).height(height).graph_mode(BigValueGraphMode.NONE)
             .reduce_options(ReduceDataOptions().calcs(["lastNotNull"])))
    return _with_targets(panel, queries)
