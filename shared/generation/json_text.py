"""Column-wise JSON text with Arrow compute: every generator's encoder builds its record
values this way (numbers to text, one element-wise concatenation), not per record.

That is safe only because every string a generator writes comes from a fixed alphabet
(ids, codes, names): nothing needs JSON escaping. Numbers use Arrow's shortest
round-trip formatting.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def text(values: np.ndarray) -> pa.Array:
    return pc.cast(pa.array(values), pa.string())


def padded(values: np.ndarray, width: int) -> pa.Array:
    """Integers zero-padded to ``width`` digits."""
    return pc.utf8_lpad(text(values), width, "0")


def json_float(values: np.ndarray) -> pa.Array:
    """Floats as JSON numbers; an integral one gets ".0" so it stays a float for any reader."""
    as_text = text(values)
    integral = pc.match_substring_regex(as_text, r"^-?\d+$")  # "12" -> "12.0"
    return pc.if_else(integral, pc.binary_join_element_wise(as_text, ".0", ""), as_text)


def concat(*parts: pa.Array | str) -> pa.Array:
    """Element-wise concatenation of text columns and constant strings."""
    return pc.binary_join_element_wise(*parts, "")
