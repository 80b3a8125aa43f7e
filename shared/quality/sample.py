"""Run a FULL suite with great-expectations on a sample and keep the result as JSON and
as a page.

Each call writes ``<results_dir>/<name>/<UTC time>.json`` and ``latest.json``: a short
``summary`` (what failed, named as in dq_reason) followed by GE's own ``result``. The
validation runs as a GE Checkpoint whose UpdateDataDocsAction renders it as Data Docs
(HTML) under ``<results_dir>/<name>/docs/``: the summary's ``page`` is the run's page, and
``docs/index.html`` lists the newest run (the context lives for one call, so its stores
hold that run only; the pages of earlier runs stay, pruned with their JSON files).

A fresh ephemeral context per call: it costs ~0.03 s here (the GE import, ~3.5 s, is
paid once), and GE's in-memory stores keep every validation result and definition for
the life of a context, so a cached one would grow without bound in a long-running app.
Calls are serialised because GE resolves some objects through a process-wide "current
context" that a concurrent call would replace.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import threading
import warnings
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame

from shared.checkpoint.owner_only import owner_only_folder, write_owner_only
from shared.quality.naming import describe

if TYPE_CHECKING:  # seconds to import: only the functions that validate import it
    from great_expectations.core.expectation_suite import ExpectationSuite

LATEST = "latest.json"
DOCS, DOCS_SITE = "docs", "statewise"  # <results_dir>/<name>/docs/: the Data Docs site
DEFAULT_KEEP = 1000  # result files kept per name (~3.5 days at one every 5 minutes)

# add_spark always warns about this deprecated field, even when it is not given.
warnings.filterwarnings(
    "ignore", message="force_reuse_spark_context is deprecated", category=DeprecationWarning)

_GX_LOCK = threading.Lock()


def utc_now() -> datetime:
    return datetime.now(UTC)


def _ephemeral_context():
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    import great_expectations as gx
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False),  # no tqdm bars on stderr
    )
    return gx.get_context(project_config=config, mode="ephemeral")


def run_suite(df: DataFrame, suite: ExpectationSuite, name: str,
              result_format: str | dict = "SUMMARY") -> dict[str, Any]:
    """GE's validation result for ``df``, as a JSON-ready dict."""
    return checkpoint_run(df, suite, name, result_format)[0]


def checkpoint_run(df: DataFrame, suite: ExpectationSuite, name: str,
                   result_format: str | dict = "SUMMARY", docs_dir: Path | None = None
                   ) -> tuple[dict[str, Any], str | None]:
    """(GE's validation result for ``df`` as a JSON-ready dict, the path of its Data Docs
    page or None): a Checkpoint, rendering the result into ``docs_dir`` when given."""
    import great_expectations as gx

    with _GX_LOCK:
        context = _ephemeral_context()
        actions = []
        if docs_dir is not None:
            context.add_data_docs_site(DOCS_SITE, {
                "class_name": "SiteBuilder",
                "store_backend": {"class_name": "TupleFilesystemStoreBackend",
                                  "base_directory": str(docs_dir)},
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder",
                                       "show_how_to_buttons": False}})
            actions.append(gx.checkpoint.UpdateDataDocsAction(name="docs",
                                                              site_names=[DOCS_SITE]))
        # persist=False: GE's default caches the DataFrame and never unpersists it.
        source = context.data_sources.add_spark(name, persist=False)
        batch = source.add_dataframe_asset(name).add_batch_definition_whole_dataframe(name)
        # Adding a suite to a context rewrites its ids; keep the app's suite untouched.
        added_suite = context.suites.add(copy.deepcopy(suite))
        definition = context.validation_definitions.add(
            gx.ValidationDefinition(data=batch, suite=added_suite, name=name))
        checkpoint = context.checkpoints.add(gx.Checkpoint(
            name=name, validation_definitions=[definition], actions=actions,
            result_format=result_format))
        run = checkpoint.run(batch_parameters={"dataframe": df})
        (identifier, result), = run.run_results.items()
        page = None
        if docs_dir is not None:
            (site,) = context.get_docs_sites_urls(resource_identifier=identifier,
                                                  site_name=DOCS_SITE)
            page = site["site_url"].removeprefix("file://")
        return result.to_json_dict(), page


def _failure(result: dict[str, Any]) -> dict[str, Any]:
    config, details = result["expectation_config"], result.get("result") or {}
    exception = result.get("exception_info") or {}
    messages = [info.get("exception_message") for info in exception.values()
                if isinstance(info, dict) and info.get("exception_message")]
    if exception.get("raised_exception"):
        messages.append(exception.get("exception_message"))
    return {
        "expectation": describe(config["type"], config["kwargs"]),
        "unexpected_count": details.get("unexpected_count"),
        "unexpected_percent": details.get("unexpected_percent"),
        "observed_value": details.get("observed_value"),
        "partial_unexpected_list": details.get("partial_unexpected_list"),
        "exception": "; ".join(filter(None, messages)) or None,
    }


def summarize(result: dict[str, Any], *, name: str, suite_name: str,
              validated_at: datetime) -> dict[str, Any]:
    statistics = result["statistics"]
    return {
        "name": name,
        "suite": suite_name,
        "validated_at": validated_at.isoformat(),
        "success": result["success"],
        "evaluated": statistics["evaluated_expectations"],
        "successful": statistics["successful_expectations"],
        "unsuccessful": statistics["unsuccessful_expectations"],
        "failed": [_failure(r) for r in result["results"] if not r["success"]],
    }


def result_file_name(validated_at: datetime) -> str:
    """Sortable, colon-free (safe on any filesystem): 2024-05-01T12-00-00.123Z.json."""
    at = validated_at.astimezone(UTC)
    return f"{at:%Y-%m-%dT%H-%M-%S}.{at.microsecond // 1000:03d}Z.json"


def _write_atomically(path: Path, text: str) -> None:
    # A reader of latest.json never sees half a file.
    partial = path.with_name(f".{path.name}.partial")
    write_owner_only(partial, text)  # it quotes input values
    os.replace(partial, path)


def prune_results(folder: Path, keep: int) -> None:
    """Delete all but the newest ``keep`` timestamped results and Data Docs pages (0 keeps
    everything). A page's folder is its run time (``validations/SUITE/RUN/TIME/``)."""
    if keep <= 0:
        return
    timestamped = sorted(p for p in folder.glob("*.json") if p.name != LATEST)
    for old in timestamped[:-keep]:
        old.unlink(missing_ok=True)
    pages = sorted((p for p in (folder / DOCS / "validations").glob("*/*/*") if p.is_dir()),
                   key=lambda p: p.name)
    for old in pages[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


def _check_name(name: str) -> None:
    if not name or name in {".", ".."} or any(c in name for c in "/\\"):
        raise ValueError(f"name must be one plain path component, got {name!r}")


def validate_sample(df: DataFrame, suite: ExpectationSuite, results_dir: Path, name: str, *,
                    clock: Callable[[], datetime] = utc_now,
                    result_format: str | dict = "SUMMARY",
                    keep: int = DEFAULT_KEEP) -> dict[str, Any]:
    """Validate ``df`` against the full suite; write the JSON files; return the summary.

    ``result_format`` SUMMARY keeps up to 20 unexpected values per expectation, enough to
    diagnose while keeping files small; pass GE's COMPLETE form for every failing row.
    """
    _check_name(name)
    validated_at = clock()
    folder = Path(results_dir) / name
    owner_only_folder(folder)  # the pages quote input values too
    result, page = checkpoint_run(df, suite, name, result_format, folder / DOCS)
    path = folder / result_file_name(validated_at)
    summary = summarize(result, name=name, suite_name=suite.name, validated_at=validated_at)
    summary |= {"path": str(path), "latest": str(folder / LATEST), "page": page}
    text = json.dumps({"summary": summary, "result": result}, indent=2, default=str)
    _write_atomically(path, text)
    _write_atomically(folder / LATEST, text)
    prune_results(folder, keep)
    return summary
