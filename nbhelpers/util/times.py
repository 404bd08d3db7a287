"""Parsing of durations, timestamps and analysis windows (docs/contracts.md#window)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from nbhelpers.errors import RunbookError

MAX_WINDOW = timedelta(days=7)
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|us|µs|ns|s|m|h|d|w)")
_BARE_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
}


@dataclass(frozen=True)
class Window:
    """A half-open interval [start, end) in UTC."""

    start: datetime
    end: datetime

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()

    def contains(self, moment: datetime) -> bool:
        return self.start <= moment < self.end

    def to_json(self) -> dict[str, str]:
        return {"start": format_time(self.start), "end": format_time(self.end)}


def duration_seconds(value: object) -> float | None:
    """Seconds from a duration as clusters and people write it, or None when ``value`` is not one.

    Accepts Go / Prometheus / Gateway API forms (``90s``, ``1h30m``, ``500ms``, ``2d``), a bare number of
    seconds (``"120"``, ``120``, ``0.5``). Annotations and ConfigMaps hold either form.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    text = str(value).strip()
    if _BARE_SECONDS.fullmatch(text):
        return float(text)
    position, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != position:
            return None
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if not text or position != len(text) or not math.isfinite(total):
        return None
    return total


def parse_duration(text: str) -> timedelta:
    """A duration given by the user (``90s``, ``15m``, ``1h30m``, ``2d``); ``RunbookError`` when it is not one."""
    seconds = duration_seconds(text)
    if seconds is None:
        raise RunbookError(f"bad duration {text!r}: use a number with a unit, e.g. 90s, 15m, 2h, 1h30m")
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        raise RunbookError(f"duration {text!r} is too long") from None


def format_duration(length: timedelta) -> str:
    """A duration as people write it and :func:`parse_duration` reads it back: ``90s`` -> ``1m30s``."""
    milliseconds = round(length.total_seconds() * 1000)
    if milliseconds % 1000:
        return f"{milliseconds}ms"
    seconds = milliseconds // 1000
    parts = [(seconds // 3600, "h"), (seconds // 60 % 60, "m"), (seconds % 60, "s")]
    return "".join(f"{count}{unit}" for count, unit in parts if count) or "0s"


def parse_time(text: str, what: str = "time") -> datetime:
    """Parse an ISO 8601 timestamp that carries an explicit UTC offset (or ``Z``)."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise RunbookError(f"bad {what} {text!r}: use ISO 8601 with an offset, e.g. 2026-01-01T10:00:00Z") from None
    if moment.tzinfo is None:
        raise RunbookError(f"{what} {text!r} has no UTC offset: add Z or +HH:MM")
    try:
        return moment.astimezone(timezone.utc)
    except OverflowError:  # 9999-12-31T23:00:00-05:00 is past the largest datetime in UTC
        raise RunbookError(f"{what} {text!r} is out of range") from None


def parse_k8s_time(text: str | None) -> datetime | None:
    """Parse a Kubernetes RFC 3339 timestamp; ``None`` when absent or malformed."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return moment.astimezone(timezone.utc)
    except (ValueError, OverflowError):
        return None


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC with a ``Z`` suffix and whole seconds."""
    return moment.astimezone(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def resolve_window(
    now: datetime,
    since: timedelta | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    default_since: timedelta = timedelta(hours=1),
    latest_end: datetime | None = None,
) -> Window:
    """Turn the window options (already parsed) into a validated :class:`Window`.

    ``now`` is read once by the caller (the capture time for bundles).
    ``latest_end`` is the latest allowed end (defaults to ``now``).
    """
    limit = latest_end or now
    if since is not None and (start or end):
        raise RunbookError("give either --since or --start/--end, not both")
    if start or end:
        if not (start and end):
            raise RunbookError("--start and --end go together")
        assert start is not None and end is not None
        window = Window(start, end)
    else:
        length = since if since is not None else default_since
        if length > MAX_WINDOW:  # checked first: now - length can fall before the year 1
            raise RunbookError("window longer than 7 days: narrow it with --since or --start/--end")
        window = Window(now - length, now)
    if window.start >= window.end:
        raise RunbookError(
            f"empty or reversed window: start {format_time(window.start)} is not before end {format_time(window.end)}"
        )
    if window.end > limit + timedelta(seconds=1):
        raise RunbookError(f"window ends in the future ({format_time(window.end)} > {format_time(limit)})")
    if window.end - window.start > MAX_WINDOW:
        raise RunbookError("window longer than 7 days: narrow it with --since or --start/--end")
    return window


def query_step_seconds(window: Window) -> int:
    """Query resolution: max(15 s, ceil(window / 11,000)) (docs/contracts.md#metric-catalog)."""
    return max(15, math.ceil(window.seconds / 11_000))
