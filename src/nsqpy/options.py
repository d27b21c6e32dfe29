"""Option declarations shared by every daemon: one dataclass field per NSQ
flag, carrying its flag name, config-file key and help in its metadata.

Durations are float seconds in Python and Go-syntax strings (``250ms``,
``1h``) on the command line and in config files.
"""

import dataclasses
import re

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Go's ``time.ParseDuration``: ``300ms``, ``1h30m``, ``-1.5s``, ``0``; seconds."""
    value = text.strip()
    sign = 1.0
    if value[:1] in "+-" and value:
        sign = -1.0 if value[0] == "-" else 1.0
        value = value[1:]
    if value == "0":
        return 0.0
    pos = 0
    total = 0.0
    while pos < len(value):
        match = _DURATION_PART.match(value, pos)
        if match is None:
            raise ValueError(f"invalid duration {text!r} (use Go syntax such as 250ms, 60s, 1h)")
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos == 0:
        raise ValueError(f"invalid duration {text!r} (use Go syntax such as 250ms, 60s, 1h)")
    return sign * total


def int_in_range(name: str, text, high: int) -> int:
    """A setting given as text (HTTP, nsqd.dat): ``ValueError`` naming it
    unless an integer in [0, ``high``]."""
    value = int(text)
    if not 0 <= value <= high:
        raise ValueError(f"{name} {value} must be in [0, {high}]")
    return value


def one_of(name: str, text: str, choices) -> str:
    """A setting that must be one of ``choices``; ``ValueError`` naming them otherwise."""
    if text not in choices:
        raise ValueError(f"{name} {text!r} must be one of {', '.join(choices)}")
    return text


def format_duration(seconds: float) -> str:
    """The inverse, in the shape Go prints (``1m0s``, ``250ms``) for help text."""
    if seconds == 0:
        return "0s"
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
