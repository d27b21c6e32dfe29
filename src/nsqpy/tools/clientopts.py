"""``--consumer-opt`` / ``--producer-opt name,value``: go-nsq's option names
onto nsqpy's ``Config``, so command lines written for NSQ's tools keep
working. Durations take Go's syntax (``90s``, ``250ms``) as go-nsq's do."""

import dataclasses

from ..client import Config, ConfigError
from ..options import parse_duration
from .app import ToolError

# go-nsq options nsqpy's client has no counterpart for: refused by name
# rather than silently ignored
_UNSUPPORTED = frozenset({"local_addr", "tls_min_version", "tls_config", "max_msg_size", "topology_region",
                          "topology_zone", "skip_lookupd_authorization"})
_PLAIN_FLOATS = frozenset({"lookupd_poll_jitter"})  # the only float go-nsq does not read as a duration
_DISABLED_BY_NEGATIVE = frozenset({"heartbeat_interval", "output_buffer_timeout"})  # -1 turns them off
_FIELDS = {field.name: field for field in dataclasses.fields(Config)}


def _value(name: str, kind: type, text: str):
    if kind is bool:
        lowered = text.strip().lower()
        if lowered not in ("1", "t", "true", "0", "f", "false"):
            raise ValueError(f"invalid boolean {text!r} (use true or false)")
        return lowered in ("1", "t", "true")
    if kind is int:
        return int(text)
    if kind is float and name in _PLAIN_FLOATS:
        return float(text)
    if kind is float:
        if name in _DISABLED_BY_NEGATIVE and text.strip().startswith("-"):
            return -1
        return parse_duration(text)
    return text


def apply_client_opts(config: Config, flag: str, settings: list[str]) -> Config:
    """``settings``: ``name,value`` or a bare ``name`` (true), as go-nsq's tools take them."""
    changes = {}
    for setting in settings:
        name, comma, text = setting.partition(",")
        name = name.strip()
        if not comma:
            text = "true"
        if name in _UNSUPPORTED:
            raise ToolError(f"--{flag} {name}: go-nsq option not supported by nsqpy's client")
        field = _FIELDS.get(name)
        if field is None:
            raise ToolError(f"--{flag} {name}: unknown option (known: {', '.join(sorted(_FIELDS))})")
        try:
            changes[name] = _value(name, field.type, text)
        except ValueError as error:
            raise ToolError(f"--{flag} {name}: {error}") from None
    try:
        return config.replace(**changes)
    except ConfigError as error:
        raise ToolError(f"--{flag}: {error}") from None


# Tools that deliver (to files, HTTP, nsqd) never give a message up: go-nsq's
# default of 5 attempts would FIN, and so lose, a message whose destination
# failed five times. ``--consumer-opt=max_attempts,5`` brings NSQ's back.
DELIVERING_DEFAULTS = {"max_attempts": 0}


def client_config(user_agent: str, flag: str, settings: list[str], *, defaults: dict | None = None,
                  **fixed) -> Config:
    """NSQ's order: the tool's user agent (and ``defaults``), then the flags'
    options, then what the tool fixes itself (``max_in_flight`` from
    ``--max-in-flight``)."""
    config = apply_client_opts(Config(user_agent=user_agent, **(defaults or {})), flag, settings)
    try:
        return config.replace(**fixed)
    except ConfigError as error:
        raise ToolError(str(error)) from None
