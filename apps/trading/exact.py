"""Exact, vectorised number work (docs/trading-rules.md, "Exact prices"): price strings
to integer units, half-even rounding, the EMA step, the fat-finger test, decimal strings.
All int64 numpy over whole columns; products that could overflow int64 (with an
arbitrary decimal ``alpha`` or ``band``) fall back to Python ints in an object array.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from apps.trading.reference import price_units

# A VWAP, SMA or EMA has the instrument's scale plus these digits (docs/trading-rules.md).
# The oracle keeps its own copy: it must not take the rule from the code it checks.
EXTRA_DIGITS = 4
ROUNDING = 10 ** EXTRA_DIGITS  # averages carry scale + 4 decimals: x = value * 10**(s+4)
_SAFE = float(2 ** 62)
# Plain decimal notation; anything else (exponents, signs, spaces) is parsed one by one
# by reference.price_units, exactly as the oracle does. 13 digits: units stay < 2**63.
_PLAIN = r"^(?P<w>[0-9]{1,13})(?:\.(?P<f>[0-9]*))?$"


def parse_units(prices: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Price strings (object array, None allowed) as integer units ``price * 10**scale``;
    0 where a price is missing, malformed or has more decimals than its scale."""
    units = np.zeros(len(prices), np.int64)
    if not len(prices):
        return units
    text = pa.array(prices, type=pa.string(), from_pandas=True)
    parts = pc.extract_regex(text, _PLAIN)
    matched = pc.is_valid(parts).to_numpy(zero_copy_only=False)
    whole = pc.struct_field(parts, "w")
    fraction = pc.utf8_rtrim(pc.struct_field(parts, "f"), characters="0")
    digits = pc.fill_null(pc.utf8_length(fraction), 99).to_numpy(zero_copy_only=False)
    ok = matched & (digits <= scale)
    if ok.any():
        at = np.flatnonzero(ok)
        w = pc.cast(whole.take(pa.array(at)), pa.int64()).to_numpy()
        f_text = fraction.take(pa.array(at))
        f = pc.cast(pc.if_else(pc.equal(f_text, ""), "0", f_text), pa.int64()).to_numpy()
        s, d = scale[at], digits[at]
        units[at] = w * 10 ** s + f * 10 ** (s - d)
    odd = np.flatnonzero(~matched & pc.is_valid(text).to_numpy(zero_copy_only=False))
    for i in odd.tolist():  # only records that are not plain decimals: rare, mostly bad
        try:
            units[i] = max(price_units(prices[i], int(scale[i])), 0)
        except (TypeError, ValueError, ArithmeticError, OverflowError):
            units[i] = 0
    return units


def fits_int64(*products: tuple[np.ndarray, int]) -> bool:
    """Whether every ``a * b`` of the pairs stays well inside int64 (checked in floats)."""
    return all(not len(a) or float(np.max(np.abs(a.astype(np.float64)))) * b < _SAFE
               for a, b in products)


def round_ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """``numerator / denominator`` (non-negative int64, denominator > 0) times 10**4,
    rounded half-even once: an average at scale + 4 from its exact integer sums. Two
    divisions, so ``numerator * 10**4`` never has to fit int64."""
    q1, r1 = np.divmod(numerator, denominator)
    q2, r2 = np.divmod(r1 * ROUNDING, denominator)
    q = q1 * ROUNDING + q2
    return q + ((2 * r2 > denominator) | ((2 * r2 == denominator) & (q % 2 == 1)))


def ema_step(previous: np.ndarray, value: np.ndarray, alpha: tuple[int, int]) -> np.ndarray:
    """``alpha * value + (1 - alpha) * previous`` exactly, rounded half-even once (all in
    units of 10**-(scale+4), like their inputs)."""
    a, d = alpha
    previous, value = _wide(fits_int64((previous, 2 * d), (value, 2 * d)), previous, value)
    q, r = np.divmod(previous * (d - a) + value * a, d)
    return (q + ((2 * r > d) | ((2 * r == d) & (q % 2 == 1))).astype(np.int64)).astype(np.int64)


def outside_band(units: np.ndarray, reference: np.ndarray, band: tuple[int, int]
                 ) -> np.ndarray:
    """``|price - ref| > band * ref`` for prices in units (scale s) and references at
    scale + 4 (negative: no reference, the trade passes)."""
    b, d = band
    units, ref = _wide(fits_int64((units, 2 * ROUNDING * d), (reference, 2 * max(b, d))),
                       units, reference)
    return (np.abs(units * ROUNDING - ref) * d > ref * b).astype(bool) & (reference >= 0)


def _wide(fits: bool, *values: np.ndarray) -> tuple[np.ndarray, ...]:
    """The arrays as they are if their products fit int64, else as Python ints (exact)."""
    return values if fits else tuple(
        np.array([int(v) for v in np.asarray(a).tolist()], dtype=object) for a in values)


def decimal_text(values: np.ndarray, digits: np.ndarray) -> pa.Array:
    """Non-negative integers as exact decimal strings with ``digits`` decimals each:
    (1006667, 5) -> "10.06667", (1010, 0) -> "1010"."""
    values, digits = np.asarray(values, np.int64), np.asarray(digits, np.int64)
    if not len(values):
        return pa.array([], pa.string())
    power = 10 ** digits
    whole, part = np.divmod(values, power)
    whole_text = pc.cast(pa.array(whole), pa.string())
    part_text = pc.utf8_slice_codeunits(pc.cast(pa.array(power + part), pa.string()), 1)
    dotted = pc.binary_join_element_wise(whole_text, ".", part_text, "")
    return pc.if_else(pa.array(digits == 0), whole_text, dotted)
