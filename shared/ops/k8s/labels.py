"""Labels every generated resource carries, and the check Kubernetes makes of names."""

from __future__ import annotations

import re

PART_OF = "statewise"
# A DNS subdomain (RFC 1123), what metadata.name must be for these resources.
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
MAX_NAME = 253


def app_labels(app: str) -> dict[str, str]:
    return {"app.kubernetes.io/part-of": PART_OF,
            "app.kubernetes.io/instance": f"{PART_OF}-{app}"}


def checked_name(name: str) -> str:
    """``name`` if Kubernetes takes it as a resource's name; ValueError otherwise (the API
    server would refuse the manifest when applied, long after it was generated)."""
    if len(name) > MAX_NAME or not _DNS_SUBDOMAIN.fullmatch(name):
        raise ValueError(f"{name!r} is not a valid Kubernetes resource name (lowercase "
                         f"letters, digits, '-' and '.', at most {MAX_NAME} characters)")
    return name
