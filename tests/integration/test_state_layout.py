"""The bucket names a checkpoint is written under are recorded once and kept
(shared/keyed/state_layout.py): a restart with other settings, or a checkpoint made
before names were recorded, must never read its buckets under other names (every bucket
would start empty: state silently lost)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from shared.keyed.bucket_labels import balanced_labels, identity_labels
from shared.keyed.bucketed.api.spec import BucketedSpecError
from shared.keyed.state_layout import (
    LAYOUT_FILE,
    checkpoint_buckets,
    checkpoint_layout,
    labels_for_reading,
)

pytestmark = pytest.mark.integration


def test_a_new_checkpoint_records_balanced_names_and_keeps_them(
        spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    checkpoint = str(tmp_path / "new")
    first = checkpoint_layout(spark, checkpoint, 16, 4)
    assert first.bucket_labels == balanced_labels(16, 4)
    assert (tmp_path / "new" / LAYOUT_FILE).exists()
    # Started again with 2 state partitions configured: the recorded names stay.
    assert checkpoint_layout(spark, checkpoint, 16, 2) == first
    assert labels_for_reading(spark, checkpoint, 16) == first.bucket_labels
    # Another B configured (a new version's default, say): the recorded one wins, said.
    with caplog.at_level(logging.WARNING, "shared.keyed.state_layout"):
        assert checkpoint_layout(spark, checkpoint, 8, 4) == first
        assert checkpoint_buckets(spark, checkpoint, 8) == 16
    assert caplog.text.count("written with 16 buckets: it keeps them") == 2
    with pytest.raises(BucketedSpecError, match="written with 16 buckets, not 8"):
        labels_for_reading(spark, checkpoint, 8)  # a reader must ask checkpoint_buckets


def test_a_checkpoint_from_before_recorded_names_keeps_0_to_b_minus_1(
        spark: SparkSession, tmp_path: Path) -> None:
    offsets = tmp_path / "old" / "offsets"
    offsets.mkdir(parents=True)
    (offsets / "0").write_text("v1\n{}\n")
    checkpoint = str(tmp_path / "old")
    assert labels_for_reading(spark, checkpoint, 16) == identity_labels(16)
    assert checkpoint_buckets(spark, checkpoint, 16) == 16  # nothing recorded: the setting's
    assert checkpoint_layout(spark, checkpoint, 16, 4).bucket_labels == identity_labels(16)
    assert (tmp_path / "old" / LAYOUT_FILE).exists()
