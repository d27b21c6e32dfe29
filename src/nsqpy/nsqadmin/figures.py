"""How nsqadmin words its figures: counts, ages, rates, latencies, sizes,
moments, retention and the time to drain. One place, because the pages render them on the server and
the charts script shows the history API's words as they are (so a figure
reads the same before and after the script refreshes it)."""

import datetime
import time

_SIZE_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def count(value) -> str:
    """12345 -> '12,345'."""
    return f"{value:,}" if isinstance(value, int) else str(value)


def duration(nanoseconds: int) -> str:
    """A connection's age as Go prints it, to the second: 1h2m3s."""
    seconds = int(nanoseconds // 1_000_000_000)
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{seconds}s"
    return f"{minutes}m{seconds}s" if minutes else f"{seconds}s"


def rate(value) -> str:
    return "–" if value is None else f"{value:,.1f}/s"


def signed_rate(value: float) -> str:
    """A change per second, with its sign: '+3.9/s'; a slow one keeps two
    significant digits ('+0.03/s') rather than reading as '+0.0/s'."""
    return f"{value:+,.1f}/s" if abs(value) >= 0.1 else f"{value:+.2g}/s"


def drain(seconds) -> str:
    """Time to drain at the current pace; '∞' when nothing is leaving."""
    if seconds is None:
        return "∞"
    return "now" if seconds == 0 else duration(int(seconds * 1e9)) if seconds >= 1 else "< 1s"


# depth that cannot leave: its summary key, the label when all that waits is
# such, and how a part of it is named beside an estimate
_STUCK = (("paused_depth", "paused", "{} paused"), ("unconsumed_depth", "no consumer", "{} with no consumer"))


def drain_label(summary: dict) -> str:
    """The time to drain as the pages say it, from a history summary:
    '–' before two samples, 'growing (+3.9/s)' while the depth rises,
    'paused' or 'no consumer' (or both) when all that waits cannot leave,
    else the estimate; what waits where it cannot leave is named, not
    counted in ('9s (not counting 50 paused, 30 with no consumer)')."""
    if summary["rate_out"] is None:
        return "–"
    stuck = [(whole, part.format(count(summary[key]))) for key, whole, part in _STUCK if summary[key]]
    if summary["growing"]:
        label = f"growing ({signed_rate(summary['net_rate'])})"
    elif stuck and summary["depth"] == sum(summary[key] for key, _, _ in _STUCK):
        return " · ".join(whole for whole, _ in stuck)
    else:
        label = drain(summary["drain_seconds"])
    return f"{label} (not counting {', '.join(part for _, part in stuck)})" if stuck else label


def headline(summary: dict) -> dict:
    """The words of a history panel's headline, for the charts script to
    show as they are: rates in and out, and the time to drain."""
    return {"rate_in_label": rate(summary["rate_in"]), "rate_out_label": rate(summary["rate_out"]),
            "drain_label": drain_label(summary)}


def latency(nanoseconds) -> str:
    value = float(nanoseconds)
    for unit, size in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if value >= size:
            return f"{value / size:.1f}{unit}"
    return f"{value:.0f}ns"


def size(value: int) -> str:
    """Bytes as a person reads them: '512 B', '1.5 KiB', '12.3 MiB'."""
    if value < 1024:
        return f"{value} B"
    for unit in _SIZE_UNITS:
        value /= 1024
        if value < 1024 or unit == _SIZE_UNITS[-1]:
            return f"{value:,.1f} {unit}"


def moment(nanoseconds: int) -> str:
    """A Unix time in ns, in UTC to the second ('2026-11-28 09:00:00 UTC');
    '–' for 0, which nsqd gives for an empty log. To the second, down: a
    replay from the time shown starts at or before that message."""
    if not nanoseconds:
        return "–"
    when = datetime.datetime.fromtimestamp(nanoseconds // 1_000_000_000, datetime.timezone.utc)
    return when.strftime("%Y-%m-%d %H:%M:%S UTC")


def since(unix_seconds: float, now: float | None = None) -> str:
    """A moment in Unix seconds, how long ago and when:
    '1m3s ago (2026-11-28 09:00:00 UTC)'."""
    now = time.time() if now is None else now
    nanoseconds = int(unix_seconds * 1e9)
    return f"{duration(max(0, int(now * 1e9) - nanoseconds))} ago ({moment(nanoseconds)})"


def retention(retention_ms: int, retention_bytes: int) -> str:
    """A retained topic's limits, each removing what is past it: '24h0m0s',
    '1.0 GiB', or both ('24h0m0s · 1.0 GiB')."""
    limits = [duration(retention_ms * 1_000_000)] if retention_ms else []
    if retention_bytes:
        limits.append(size(retention_bytes))
    return " · ".join(limits) or "–"
