"""What a valid trade feed record is: one great-expectations suite, used inline (row-level
checks as Spark predicates on every batch) and in full on samples (shared/quality).

Prices arrive as exact decimal strings. On Spark's string ``price`` column the positivity
check cannot run inline (ANSI mode casts "10.10" to BIGINT for ``> 0`` and fails the
query), so the app's inline gate is ``inline_trade_suite``: the same suite without the
price check. The app itself parses every price exactly (at most the instrument's scale
decimals, > 0) and sends a bad one to the dead-letter topic with reason ``invalid_price``.
"""

from __future__ import annotations

KINDS = ("trade", "cancel")
# Event times the feed can sanely carry: 2000-01-01 to 2100-01-01 (epoch ms). Lateness
# and skew are the watermark's job, not the gate's.
EVENT_TIME_RANGE_MS = (946_684_800_000, 4_102_444_800_000)


def trade_suite(settings=None, symbols: list[str] | None = None):
    """``symbols``: the instrument reference list (default: the one ``settings`` names)."""
    import great_expectations as gx  # ~3 s to import: only when a suite is needed

    # A cancel's price and size are null; value checks skip nulls, so they hold for
    # trades only, which is what the inline gate can translate (no row conditions).

    if symbols is None:
        from apps.trading.reference import Instruments

        seed, count = (0, 5_000) if settings is None else (settings.reference_seed,
                                                           settings.instruments)
        symbols = Instruments(seed, count).symbols
    expect = gx.expectations
    return gx.ExpectationSuite(name="trade", expectations=[
        expect.ExpectColumnValuesToNotBeNull(column="trade_id"),
        expect.ExpectColumnValuesToNotBeNull(column="instrument"),
        expect.ExpectColumnValuesToBeInSet(column="kind", value_set=list(KINDS)),
        expect.ExpectColumnValuesToBeInSet(column="instrument", value_set=list(symbols)),
        expect.ExpectColumnValuesToBeBetween(
            column="event_time_ms", min_value=EVENT_TIME_RANGE_MS[0],
            max_value=EVENT_TIME_RANGE_MS[1]),
        expect.ExpectColumnValuesToBeBetween(
            column="price", min_value=0, strict_min=True),
        expect.ExpectColumnValuesToBeBetween(
            column="size", min_value=0, strict_min=True),
    ])


def inline_trade_suite(settings=None, symbols: list[str] | None = None):
    """The suite the app's inline gate runs: ``trade_suite`` without the price check."""
    import great_expectations as gx

    suite = trade_suite(settings, symbols)
    return gx.ExpectationSuite(name="trade_inline", expectations=[
        e for e in suite.expectations if getattr(e, "column", None) != "price"])
