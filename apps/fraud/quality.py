"""What a valid card transaction is: one great-expectations suite, used inline (row-level
checks as Spark predicates on every batch) and in full on samples (shared/quality)."""

from __future__ import annotations

from apps.fraud.reference import KNOWN_CURRENCIES

# A guard against absurd values in any currency (1,000,000 JPY is about 6,500 USD);
# spend spikes relative to a card's own habit are the detector's job, not the gate's.
MAX_AMOUNT = 1_000_000.0


def transaction_suite(settings=None):
    import great_expectations as gx  # ~3 s to import: only when a suite is needed

    expect = gx.expectations
    return gx.ExpectationSuite(name="card_transaction", expectations=[
        expect.ExpectColumnValuesToNotBeNull(column="txn_id"),
        expect.ExpectColumnValuesToNotBeNull(column="card_id"),
        expect.ExpectColumnValuesToBeBetween(
            column="amount", min_value=0, max_value=MAX_AMOUNT, strict_min=True),
        expect.ExpectColumnValuesToBeInSet(column="currency", value_set=list(KNOWN_CURRENCIES)),
        expect.ExpectColumnValuesToBeBetween(column="lat", min_value=-90, max_value=90),
        expect.ExpectColumnValuesToBeBetween(column="lon", min_value=-180, max_value=180),
    ])
