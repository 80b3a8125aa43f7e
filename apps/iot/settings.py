"""The iot app's settings: rolling intervals, alert timing, state bounds (flags or IOT_*)."""

from __future__ import annotations

from dataclasses import dataclass

from shared.durations import SparkDuration
from shared.settings import AtLeast, AtLeastNumber, Checked, PlatformSettings, setting


def parse_intervals(text: str) -> tuple[int, ...]:
    """ "60,300,900" -> (60, 300, 900): whole seconds, distinct, each above 0."""
    intervals = tuple(sorted(int(part) for part in text.split(",")))
    if not intervals or intervals[0] <= 0 or len(set(intervals)) != len(intervals):
        raise ValueError(f"rolling intervals must be distinct and > 0: {text!r}")
    return intervals


@dataclass(frozen=True)
class IotSettings(PlatformSettings):
    """Per-device rolling averages, threshold alerts and offline detection on sensor readings."""

    rolling_intervals: str = setting(
        "60,300,900", "IOT_ROLLING_INTERVALS",
        "rolling-average intervals in seconds, comma-separated; the shortest drives alerts",
        convert=Checked(parse_intervals, "distinct whole seconds >= 1, comma-separated"))
    emit_cadence_s: int = setting(
        10, "IOT_EMIT_CADENCE_S",
        "rolling averages are emitted at event-time ticks that are multiples of this",
        convert=AtLeast(1))
    allowed_lateness: str = setting(
        "30 seconds", "IOT_ALLOWED_LATENESS",
        "how far behind the newest event time a reading may arrive; later ones go to the "
        "late topic", convert=SparkDuration())
    hot_duration_s: int = setting(
        60, "IOT_HOT_DURATION_S",
        "alert when the shortest interval's average stays above the raise level this long",
        convert=AtLeast(0))
    offline_gap_s: int = setting(
        120, "IOT_OFFLINE_GAP_S",
        "a device with no reading for this many seconds of event time is offline",
        convert=AtLeast(1))
    device_idle_expiry_h: float = setting(
        24.0, "IOT_DEVICE_IDLE_EXPIRY_H",
        "a device with no reading for this many hours of event time is forgotten",
        convert=AtLeastNumber(0, above=True))
    state_buckets: int = setting(
        8, "IOT_STATE_BUCKETS",
        "devices are hashed into this many state buckets in a new checkpoint; a checkpoint "
        "keeps the count it was made with (a savepoint restore changes it)", convert=AtLeast(1))

    def __post_init__(self) -> None:
        super().__post_init__()
        intervals = self.intervals_s  # parses, or raises ValueError
        if self.state_buckets < 1:
            raise ValueError("IOT_STATE_BUCKETS must be >= 1")
        if self.emit_cadence_s <= 0 or self.hot_duration_s < 0 or self.offline_gap_s <= 0:
            raise ValueError("IOT_EMIT_CADENCE_S and IOT_OFFLINE_GAP_S must be > 0, "
                             "IOT_HOT_DURATION_S >= 0")
        # Windows and timers never outlive the device's state (docs/iot-rules.md).
        if self.device_idle_expiry_h * 3600 <= max(*intervals, self.offline_gap_s):
            raise ValueError("IOT_DEVICE_IDLE_EXPIRY_H must exceed every interval of "
                             "IOT_ROLLING_INTERVALS and IOT_OFFLINE_GAP_S")

    @property
    def intervals_s(self) -> tuple[int, ...]:
        """The rolling intervals, shortest first."""
        return parse_intervals(self.rolling_intervals)

    @property
    def cadence_ms(self) -> int:
        return self.emit_cadence_s * 1000

    @property
    def hot_duration_ms(self) -> int:
        return self.hot_duration_s * 1000

    @property
    def offline_gap_ms(self) -> int:
        return self.offline_gap_s * 1000

    @property
    def idle_expiry_ms(self) -> int:
        return int(self.device_idle_expiry_h * 3_600_000)
