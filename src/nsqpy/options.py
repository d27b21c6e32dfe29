"""Option declarations shared by every daemon: one dataclass field per NSQ
flag, carrying its flag name, config-file key and help in its metadata.

Durations are float seconds in Python and Go-syntax strings (``250ms``,
``1h``) on the command line and in config files.
"""

import dataclasses
import re

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

_DECIMAL = re.compile(r"-?[0-9]+")
_DURATION_PART = re.compile(r"([0-9]*)(?:\.([0-9]*))?(ns|us|µs|μs|ms|s|m|h)")
_UNIT_NS = {"ns": 1, "us": 1000, "µs": 1000, "μs": 1000, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}


def parse_int(text: str, low: int = 0, high: int = INT64_MAX) -> int:
    """The one integer parser for text a person typed (flags, config files,
    HTTP queries, nsqd.dat): ASCII digits, a leading ``-`` only when ``low``
    is negative; ``ValueError`` otherwise or outside [``low``, ``high``]
    (which lie within int64).

    Python's ``int()`` also takes ``1_000``, ``+5``, `` 5 `` and other
    scripts' digits (``٣``); nsqd refuses them, and a value Go would refuse
    must not quietly mean something here."""
    if _DECIMAL.fullmatch(text) is None:
        raise ValueError(f"{text!r} is not a number (decimal digits only)")
    # beyond 19 digits is beyond int64 (and int() refuses 4300 digits in its own words)
    value = int(text) if len(text.lstrip("-0")) <= 19 else high + 1
    if not low <= value <= high or (text[0] == "-" and low >= 0):
        raise ValueError(f"{text} is out of range [{low}, {high}]")
    return value


def parse_duration(text: str) -> float:
    """Go's ``time.ParseDuration``: ``300ms``, ``1h30m``, ``-1.5s``, ``0``; seconds.

    Counted in integer nanoseconds as Go counts, so what Go refuses is
    refused here: other scripts' digits, spaces, ``1_0s``, and anything
    beyond int64 nanoseconds (about 292 years), which ``/config/<name>``
    (in nanoseconds) could not report to a Go client either."""
    negative = text[:1] == "-"
    value = text[1:] if text[:1] in ("+", "-") else text
    if value == "0":
        return 0.0
    invalid = ValueError(f"invalid duration {text!r} (use Go syntax such as 250ms, 60s, 1h)")
    out_of_range = ValueError(f"duration {text!r} is out of range (at most 2562047h47m16.854775807s)")
    if not value:
        raise invalid
    nanoseconds = 0
    pos = 0
    while pos < len(value):
        match = _DURATION_PART.match(value, pos)
        if match is None or not (match.group(1) or match.group(2)):
            raise invalid
        whole = match.group(1).lstrip("0")
        fraction = (match.group(2) or "")[:18]  # finer than a nanosecond in every unit
        unit = _UNIT_NS[match.group(3)]
        if len(whole) > 19:  # beyond int64 in any unit (and int() refuses 4300 digits in its own words)
            raise out_of_range
        nanoseconds += int(whole or 0) * unit + int(fraction or 0) * unit // 10 ** len(fraction)
        pos = match.end()
    if nanoseconds > INT64_MAX + negative:
        raise out_of_range
    return (-nanoseconds if negative else nanoseconds) / 1e9


def int_in_range(name: str, text: str, high: int) -> int:
    """A setting given as text (HTTP, nsqd.dat): ``ValueError`` naming it
    unless an integer in [0, ``high``]."""
    try:
        return parse_int(text, 0, high)
    except ValueError as error:
        raise ValueError(f"{name} {error}") from None


def duration_in_range(name: str, text: str, high: float, shown_high: str) -> float:
    """A duration setting (Go syntax; flag, HTTP): ``ValueError`` naming it
    unless in [0, ``high``] (written ``shown_high`` in the message)."""
    try:
        seconds = parse_duration(text)
    except ValueError as error:
        raise ValueError(f"{name} {error}") from None
    if not 0 <= seconds <= high:
        raise ValueError(f"{name} {text!r} must be in [0, {shown_high}]")
    return seconds


def one_of(name: str, text: str, choices) -> str:
    """A setting that must be one of ``choices``; ``ValueError`` naming them otherwise."""
    if text not in choices:
        raise ValueError(f"{name} {text!r} must be one of {', '.join(choices)}")
    return text


def format_duration(seconds: float) -> str:
    """The inverse, in the shape Go prints (``1m0s``, ``250ms``) for help text."""
    if seconds == 0:
        return "0s"
    if seconds < 0:
        return "-" + format_duration(-seconds)
    if seconds < 1:
        ms = seconds * 1000
        return f"{ms:g}ms" if ms >= 1 else f"{seconds * 1e6:g}µs"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{secs:g}s"
    if hours or minutes:
        text = f"{int(minutes)}m" + text
    if hours:
        text = f"{int(hours)}h" + text
    return text


def option(default, help: str, *, flag: str | None = None, cfg: str | None = None,
           duration: bool = False, choices: tuple | None = None):
    """Declare one option. ``flag`` defaults to the field name with ``-``;
    ``cfg`` (the config-file key) defaults to the field name."""
    metadata = {"help": help, "flag": flag, "cfg": cfg, "duration": duration, "choices": choices}
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata=metadata)
    if callable(default):
        return dataclasses.field(default_factory=default, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass(frozen=True)
class OptionSpec:
    field: str
    flag: str
    cfg: str
    kind: type  # int, float, str, bool, list
    item_kind: type | None
    duration: bool
    help: str
    choices: tuple | None


def option_specs(options_class) -> list[OptionSpec]:
    """The flag table of an options dataclass."""
    specs = []
    hints = {f.name: f.type for f in dataclasses.fields(options_class)}
    for field in dataclasses.fields(options_class):
        meta = field.metadata
        if "help" not in meta:
            continue
        hint = hints[field.name]
        hint = eval(hint) if isinstance(hint, str) else hint  # noqa: S307 - our own annotations
        kind = getattr(hint, "__origin__", hint)
        item_kind = hint.__args__[0] if kind is list else None
        specs.append(
            OptionSpec(
                field=field.name,
                flag=meta["flag"] or field.name.replace("_", "-"),
                cfg=meta["cfg"] or field.name,
                kind=kind,
                item_kind=item_kind,
                duration=meta["duration"],
                help=meta["help"],
                choices=meta["choices"],
            )
        )
    return specs
