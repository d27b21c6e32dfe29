"""IDENTIFY: decode a client's settings, validate them against the server's
limits, and build the JSON answer clients read when they negotiate features.

All durations here are integer milliseconds, as on the wire.
"""

import json
from dataclasses import dataclass, asdict

from .errors import E_BAD_BODY, E_IDENTIFY_FAILED, ProtocolError

DEFAULT_HEARTBEAT_INTERVAL_MS = 30_000  # nsqd's ClientTimeout / 2, not a flag
DEFAULT_OUTPUT_BUFFER_SIZE = 16 * 1024
DEFAULT_DEFLATE_LEVEL = 6
MIN_OUTPUT_BUFFER_SIZE = 64

# JSON key -> Python type nsqd's decoder accepts; others are ignored
# (go-nsq and pynsq still send the deprecated short_id/long_id).
_FIELD_TYPES = {
    "client_id": str,
    "hostname": str,
    "user_agent": str,
    "feature_negotiation": bool,
    "heartbeat_interval": int,
    "output_buffer_size": int,
    "output_buffer_timeout": int,
    "tls_v1": bool,
    "snappy": bool,
    "deflate": bool,
    "deflate_level": int,
    "sample_rate": int,
    "msg_timeout": int,
    "short_id": str,
    "long_id": str,
    "topology_region": str,
    "topology_zone": str,
}


@dataclass(frozen=True)
class IdentifyPolicy:
    """What the server allows and offers."""

    version: str
    max_rdy_count: int
    max_heartbeat_interval: int
    max_output_buffer_size: int
    default_output_buffer_timeout: int
    min_output_buffer_timeout: int
    max_output_buffer_timeout: int
    default_msg_timeout: int
    max_msg_timeout: int
    max_deflate_level: int = 6
    tls_available: bool = False
    snappy_enabled: bool = False
    deflate_enabled: bool = False
    auth_required: bool = False


@dataclass
class ClientSettings:
    """A connection's negotiated settings. ``heartbeat_interval`` 0 means
    heartbeats are disabled; ``output_buffer_timeout`` 0 means no timed
    flush; ``output_buffer_size`` 1 means unbuffered."""

    client_id: str = ""
    hostname: str = ""
    user_agent: str = ""
    feature_negotiation: bool = False
    heartbeat_interval: int = DEFAULT_HEARTBEAT_INTERVAL_MS
    output_buffer_size: int = DEFAULT_OUTPUT_BUFFER_SIZE
    output_buffer_timeout: int = 250
    sample_rate: int = 0
    msg_timeout: int = 60_000
    tls_v1: bool = False
    snappy: bool = False
    deflate: bool = False
    deflate_level: int = DEFAULT_DEFLATE_LEVEL


def decode_identify_body(body: bytes, field_types: dict[str, type]) -> dict:
    """The known fields of an IDENTIFY JSON body, typed as Go's decoder types
    them (unknown keys ignored, null taken as absent), or ``E_BAD_BODY``.
    Shared by nsqd's V2 and nsqlookupd's V1 IDENTIFY."""
    try:
        # Go's decoder replaces invalid UTF-8 in strings rather than refusing
        data = json.loads(body.decode("utf-8", "replace"))
    except ValueError:
        raise ProtocolError(E_BAD_BODY, "IDENTIFY failed to decode JSON body") from None
    except RecursionError:
        raise ProtocolError(E_BAD_BODY, "IDENTIFY failed to decode JSON body: nested too deeply") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ProtocolError(E_BAD_BODY, "IDENTIFY failed to decode JSON body")
    fields = {}
    for key, kind in field_types.items():
        value = data.get(key)
        if value is None:
            continue
        # bool is an int in Python but not in Go's decoder
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ProtocolError(E_BAD_BODY, "IDENTIFY failed to decode JSON body")
        fields[key] = value
    return fields


def _invalid(what: str, value: int) -> ProtocolError:
    return ProtocolError(E_BAD_BODY, f"IDENTIFY {what} ({value}) is invalid")


def negotiate(body: bytes, policy: IdentifyPolicy, current: ClientSettings) -> ClientSettings:
    """Apply an IDENTIFY body to ``current`` and return the new settings, or
    raise the ``E_BAD_BODY`` nsqd answers with."""
    fields = decode_identify_body(body, _FIELD_TYPES)
    settings = ClientSettings(**asdict(current))
    for key in ("client_id", "hostname", "user_agent"):
        if key in fields:
            settings.__dict__[key] = fields[key]
    settings.feature_negotiation = fields.get("feature_negotiation", False)

    heartbeat = fields.get("heartbeat_interval", 0)
    if heartbeat == -1:
        settings.heartbeat_interval = 0
    elif heartbeat != 0:
        if not 1000 <= heartbeat <= policy.max_heartbeat_interval:
            raise _invalid("heartbeat interval", heartbeat)
        settings.heartbeat_interval = heartbeat

    buffer_timeout = fields.get("output_buffer_timeout", 0)
    if buffer_timeout == -1:
        settings.output_buffer_timeout = 0
    elif buffer_timeout != 0:
        if not policy.min_output_buffer_timeout <= buffer_timeout <= policy.max_output_buffer_timeout:
            raise _invalid("output buffer timeout", buffer_timeout)
        settings.output_buffer_timeout = buffer_timeout

    buffer_size = fields.get("output_buffer_size", 0)
    if buffer_size == -1:
        settings.output_buffer_size = 1
        settings.output_buffer_timeout = 0
    elif buffer_size != 0:
        if not MIN_OUTPUT_BUFFER_SIZE <= buffer_size <= policy.max_output_buffer_size:
            raise _invalid("output buffer size", buffer_size)
        settings.output_buffer_size = buffer_size

    sample_rate = fields.get("sample_rate", 0)
    if not 0 <= sample_rate <= 99:
        raise _invalid("sample rate", sample_rate)
    settings.sample_rate = sample_rate

    msg_timeout = fields.get("msg_timeout", 0)
    if msg_timeout != 0:
        if not 1000 <= msg_timeout <= policy.max_msg_timeout:
            raise _invalid("msg timeout", msg_timeout)
        settings.msg_timeout = msg_timeout

    if settings.feature_negotiation:
        settings.tls_v1 = bool(fields.get("tls_v1")) and policy.tls_available
        settings.snappy = bool(fields.get("snappy")) and policy.snappy_enabled
        settings.deflate = bool(fields.get("deflate")) and policy.deflate_enabled
        level = DEFAULT_DEFLATE_LEVEL
        if settings.deflate:
            requested = fields.get("deflate_level", 0)
            level = min(requested if requested > 0 else DEFAULT_DEFLATE_LEVEL, policy.max_deflate_level)
        settings.deflate_level = level
        if settings.snappy and settings.deflate:
            raise ProtocolError(E_IDENTIFY_FAILED, "cannot enable both deflate and snappy compression")
    return settings


def identify_response(settings: ClientSettings, policy: IdentifyPolicy) -> bytes:
    """The JSON body of the answer to a negotiating IDENTIFY, with nsqd's keys."""
    return json.dumps(
        {
            "max_rdy_count": policy.max_rdy_count,
            "version": policy.version,
            "max_msg_timeout": policy.max_msg_timeout,
            "msg_timeout": settings.msg_timeout,
            "tls_v1": settings.tls_v1,
            "deflate": settings.deflate,
            "deflate_level": settings.deflate_level,
            "max_deflate_level": policy.max_deflate_level,
            "snappy": settings.snappy,
            "sample_rate": settings.sample_rate,
            "auth_required": policy.auth_required,
            "output_buffer_size": settings.output_buffer_size,
            "output_buffer_timeout": settings.output_buffer_timeout,
        },
        separators=(",", ":"),
    ).encode()
