"""nsqlookupd's options: NSQ's flag names, config keys and defaults."""

import dataclasses
import socket

from ..options import option


@dataclasses.dataclass
class NsqlookupdOptions:
    log_level: str = option("info", "set log verbosity: debug, info, warn, error, or fatal",
                            choices=("debug", "info", "warn", "error", "fatal"))
    log_prefix: str = option("[nsqlookupd] ", "log message prefix")
    verbose: bool = option(False, "[deprecated] has no effect, use --log-level")
    tcp_address: str = option("0.0.0.0:4160", "<addr>:<port> to listen on for TCP clients")
    http_address: str = option("0.0.0.0:4161", "<addr>:<port> to listen on for HTTP clients")
    broadcast_address: str = option(socket.gethostname, "address of this lookupd node, "
                                    "(default to the OS hostname)")
    inactive_producer_timeout: float = option(300.0, "duration of time a producer will remain in the "
                                              "active list since its last ping", duration=True)
    tombstone_lifetime: float = option(45.0, "duration of time a producer will remain tombstoned if "
                                       "registration remains", duration=True)
    max_body_size: int = 5 * 1024 * 1024  # bounds an IDENTIFY body; NSQ reads any size

    def validate(self) -> None:
        if self.inactive_producer_timeout <= 0 or self.tombstone_lifetime <= 0:
            raise ValueError("--inactive-producer-timeout and --tombstone-lifetime must be > 0")
