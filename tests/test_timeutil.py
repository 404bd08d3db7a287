"""Durations, timestamps and window rules (docs/contracts.md#window)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from nbhelpers.errors import RunbookError
from nbhelpers.triage import params_from_text
from nbhelpers.util.times import Window, parse_duration, parse_time, query_step_seconds, resolve_window

NOW = datetime(2026, 1, 15, 12, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("15m", 900), ("2h", 7200), ("1h30m", 5400), ("1d", 86400), ("300", 300), ("1.5h", 5400)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "abc", "5x", "h", "1h 30m", "-5m", "5m3"])
def test_bad_durations_say_how_to_write_one(text: str) -> None:
    with pytest.raises(RunbookError, match="bad duration"):
        parse_duration(text)


def test_times_need_an_offset() -> None:
    assert parse_time("2026-01-15T10:00:00Z") == datetime(2026, 1, 15, 10, tzinfo=timezone.utc)
    assert parse_time("2026-01-15T12:00:00+02:00") == datetime(2026, 1, 15, 10, tzinfo=timezone.utc)
    with pytest.raises(RunbookError, match="no UTC offset"):
        parse_time("2026-01-15T10:00:00")
    with pytest.raises(RunbookError, match="bad time"):
        parse_time("yesterday")


def window_from_text(now: datetime, **text: str) -> Window:
    """The path user input takes: text parsed once into params, then resolved against "now"."""
    params = params_from_text(text)
    return resolve_window(now, params.since, params.start, params.end)


def test_since_counts_back_from_now_and_defaults_to_one_hour() -> None:
    assert window_from_text(NOW, since="2h") == Window(NOW - timedelta(hours=2), NOW)
    assert resolve_window(NOW) == Window(NOW - timedelta(hours=1), NOW)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"start": "2026-01-15T11:00:00Z", "end": "2026-01-15T10:00:00Z"}, "reversed"),
        ({"start": "2026-01-15T11:00:00Z", "end": "2026-01-15T11:00:00Z"}, "empty"),
        ({"start": "2026-01-15T11:00:00Z", "end": "2026-01-15T13:00:00Z"}, "future"),
        ({"start": "2026-01-01T00:00:00Z", "end": "2026-01-15T11:00:00Z"}, "7 days"),
        ({"start": "2026-01-15T11:00:00Z"}, "go together"),
        ({"since": "1h", "start": "2026-01-15T11:00:00Z"}, "not both"),
    ],
)
def test_bad_windows_are_refused(options: dict[str, str], message: str) -> None:
    with pytest.raises(RunbookError, match=message):
        window_from_text(NOW, **options)


def test_step_keeps_under_prometheus_point_limit() -> None:
    assert query_step_seconds(Window(NOW - timedelta(hours=1), NOW)) == 15
    week = Window(NOW - timedelta(days=7), NOW)
    assert query_step_seconds(week) == 55
    assert week.seconds / query_step_seconds(week) <= 11_000
