"""Great-circle distance, vectorised (the impossible-travel rule and the generator)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

EARTH_RADIUS_KM = 6371.0


def haversine_km(lat1: ArrayLike, lon1: ArrayLike, lat2: ArrayLike, lon2: ArrayLike
                 ) -> np.ndarray:
    """Great-circle distance; numpy arrays or floats (NaN where a coordinate is)."""
    p1, p2 = np.radians(lat1), np.radians(lat2)
    dp, dl = p2 - p1, np.radians(np.asarray(lon2) - np.asarray(lon1))
    a = np.sin(dp / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(a))
