"""Client configuration: go-nsq's options, defaults and ranges, Python-named.

Durations are seconds (floats). A Config is validated when built and copied
into each Producer and Consumer, so changing one later changes nothing
already running.
"""

import dataclasses
import socket
import ssl
from typing import Any

from .. import __version__
from ..net import client_tls_context
from .errors import InvalidArgumentError


class ConfigError(InvalidArgumentError):
    """An option is out of its range; the message names it and the range."""


def _range(low: float, high: float) -> dict[str, tuple[float, float]]:
    return {"range": (low, high)}


@dataclasses.dataclass(frozen=True)
class Config:
    """The options of a Producer or Consumer: go-nsq's, by their Python
    names, with go-nsq's defaults and ranges (a value out of range raises
    ``ConfigError``). ``replace(**changes)`` makes a changed copy."""

    # connections
    dial_timeout: float = dataclasses.field(default=1.0, metadata=_range(0.001, 300))
    read_timeout: float = dataclasses.field(default=60.0, metadata=_range(0.1, 300))
    write_timeout: float = dataclasses.field(default=1.0, metadata=_range(0.1, 300))
    heartbeat_interval: float = 30.0  # seconds; -1 disables (then a consumer cannot SUB)
    output_buffer_size: int = 16384  # -1 unbuffered
    output_buffer_timeout: float = 0.25  # -1 disables timed flushes
    sample_rate: int = dataclasses.field(default=0, metadata=_range(0, 99))
    msg_timeout: float = 0.0  # 0: the server's default
    client_id: str = dataclasses.field(default_factory=lambda: socket.gethostname().split(".")[0])
    hostname: str = dataclasses.field(default_factory=socket.gethostname)
    user_agent: str = f"nsqpy/{__version__}"

    # consuming
    max_in_flight: int = dataclasses.field(default=1, metadata=_range(0, 2**31 - 1))
    max_attempts: int = dataclasses.field(default=5, metadata=_range(0, 65535))
    default_requeue_delay: float = dataclasses.field(default=90.0, metadata=_range(0, 3600))
    max_requeue_delay: float = dataclasses.field(default=900.0, metadata=_range(0, 3600))
    backoff_strategy: str = "exponential"  # or "full_jitter"
    backoff_multiplier: float = dataclasses.field(default=1.0, metadata=_range(0, 3600))
    max_backoff_duration: float = dataclasses.field(default=120.0, metadata=_range(0, 3600))
    low_rdy_idle_timeout: float = dataclasses.field(default=10.0, metadata=_range(1, 300))
    low_rdy_timeout: float = dataclasses.field(default=30.0, metadata=_range(1, 300))
    rdy_redistribute_interval: float = dataclasses.field(default=5.0, metadata=_range(0.001, 5))

    # discovery
    lookupd_poll_interval: float = dataclasses.field(default=60.0, metadata=_range(0.01, 300))
    lookupd_poll_jitter: float = dataclasses.field(default=0.3, metadata=_range(0, 1))
    lookupd_poll_timeout: float = dataclasses.field(default=60.0, metadata=_range(0.001, 300))

    # transport security and compression (negotiated with nsqd; see the transport issue)
    tls_v1: bool = False
    tls_root_ca_file: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    tls_insecure_skip_verify: bool = False
    snappy: bool = False
    deflate: bool = False
    deflate_level: int = dataclasses.field(default=6, metadata=_range(1, 9))
    auth_secret: str = ""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            bounds = field.metadata.get("range")
            value = getattr(self, field.name)
            if bounds and not bounds[0] <= value <= bounds[1]:
                raise ConfigError(f"{field.name} must be in [{bounds[0]}, {bounds[1]}] (got {value!r})")
        if self.backoff_strategy not in ("exponential", "full_jitter"):
            raise ConfigError(f"backoff_strategy must be 'exponential' or 'full_jitter' "
                              f"(got {self.backoff_strategy!r})")
        if self.heartbeat_interval != -1 and not 1 <= self.heartbeat_interval < self.read_timeout:
            raise ConfigError(f"heartbeat_interval must be -1 or in [1, read_timeout) "
                              f"(got {self.heartbeat_interval!r}, read_timeout {self.read_timeout!r})")
        if self.output_buffer_size != -1 and not 64 <= self.output_buffer_size:
            raise ConfigError(f"output_buffer_size must be -1 or >= 64 (got {self.output_buffer_size!r})")
        if self.msg_timeout and self.msg_timeout < 1:
            raise ConfigError(f"msg_timeout must be 0 (server default) or >= 1 (got {self.msg_timeout!r})")
        if self.snappy and self.deflate:
            raise ConfigError("snappy and deflate cannot both be enabled")
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ConfigError("tls_cert and tls_key must be given together")

    def replace(self, **changes: Any) -> "Config":
        """A copy with ``changes`` (options by name), validated again."""
        return dataclasses.replace(self, **changes)

    def identify_body(self) -> dict[str, object]:
        """What IDENTIFY tells nsqd about this client (milliseconds on the wire)."""
        def ms(seconds: float) -> int:
            return -1 if seconds == -1 else int(seconds * 1000)

        return {
            "client_id": self.client_id,
            "hostname": self.hostname,
            "user_agent": self.user_agent,
            "feature_negotiation": True,
            "heartbeat_interval": ms(self.heartbeat_interval),
            "output_buffer_size": self.output_buffer_size,
            "output_buffer_timeout": ms(self.output_buffer_timeout),
            "sample_rate": self.sample_rate,
            "msg_timeout": ms(self.msg_timeout),
            "tls_v1": self.tls_v1,
            "snappy": self.snappy,
            "deflate": self.deflate,
            "deflate_level": self.deflate_level,
        }


def tls_context(config: Config) -> ssl.SSLContext:
    """Verify nsqd against ``tls_root_ca_file`` (or the system CAs) and the
    host dialled, unless ``tls_insecure_skip_verify``; present ``tls_cert``."""
    context: ssl.SSLContext = client_tls_context(config.tls_root_ca_file, config.tls_cert, config.tls_key,
                                                 config.tls_insecure_skip_verify)
    return context
