"""RFC 3339 timestamps as Kubernetes writes them (UTC, whole seconds)."""

from __future__ import annotations

from datetime import UTC, datetime


def format_time(moment: datetime) -> str:
    """2026-11-26T01:02:03Z."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str) -> datetime:
    """Parse an RFC 3339 time; a naive one is taken as UTC."""
    moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def seconds_since(value: str | None, now: datetime) -> float | None:
    """Seconds from a timestamp to now, or None when unset."""
    if not value:
        return None
    return (now - parse_time(value)).total_seconds()
