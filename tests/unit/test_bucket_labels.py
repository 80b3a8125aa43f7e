"""Bucket names balanced over Spark's state partitions (shared/keyed/bucket_labels.py).

The partition function is checked against Spark's own hash in
tests/integration/test_bucketed_state_query.py; here, the arithmetic and the layout."""

import pytest

from shared.keyed.bucket_labels import (
    balanced_labels,
    identity_labels,
    partition_loads,
    spark_partition_of,
)


def test_the_names_0_to_b_minus_1_fall_unevenly_as_measured_with_spark():
    # Measured with Spark's hash on 4.3.0 (fraud's 16 and iot's 32 buckets on 4 partitions).
    assert partition_loads(identity_labels(16), 4) == [6, 6, 1, 3]
    assert partition_loads(identity_labels(32), 4) == [14, 7, 6, 5]
    assert partition_loads(identity_labels(2), 2) == [0, 2]


@pytest.mark.parametrize(("buckets", "partitions"),
                         [(16, 4), (32, 4), (4, 2), (2, 2), (16, 2), (16, 8), (5, 3), (3, 8)])
def test_balanced_names_give_every_partition_its_share(buckets, partitions):
    labels = balanced_labels(buckets, partitions)
    assert len(set(labels)) == buckets
    assert all(label >= 0 for label in labels)
    loads = partition_loads(labels, partitions)
    assert max(loads) - min(loads) <= 1
    assert [spark_partition_of(label, partitions) for label in labels] == [
        i % partitions for i in range(buckets)]


def test_balanced_names_are_a_pure_function_of_b_and_p():
    assert balanced_labels(16, 4) == balanced_labels(16, 4)
    assert balanced_labels(1, 1) == (0,)
    with pytest.raises(ValueError):
        balanced_labels(0, 4)
