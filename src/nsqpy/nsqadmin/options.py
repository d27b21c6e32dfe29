"""nsqadmin's options: NSQ's flag names, config keys and defaults, plus the
stats history nsqpy adds (``--history-interval``, ``--history-retention``)."""

import dataclasses
import ipaddress
import socket
from urllib.parse import urlsplit

from ..net import split_host_port
from ..options import option

LOG_LEVEL_CHOICES = ("debug", "info", "warn", "error", "fatal")


@dataclasses.dataclass
class NsqadminOptions:
    log_level: str = option("info", "set log verbosity: debug, info, warn, error, or fatal",
                            choices=LOG_LEVEL_CHOICES)
    log_prefix: str = option("[nsqadmin] ", "log message prefix")
    verbose: bool = option(False, "[deprecated] has no effect, use --log-level")
    http_address: str = option("0.0.0.0:4171", "<addr>:<port> to listen on for HTTP clients")
    base_path: str = option("/", "URL base path")
    dev_static_dir: str = option("", "(development use only) serve static files from this folder")
    graphite_url: str = option("", "graphite HTTP address")
    proxy_graphite: bool = option(False, "proxy HTTP requests to graphite")
    statsd_counter_format: str = option(
        "stats.counters.%s.count", "The counter stats key formatting applied by the implementation of "
        "statsd. If no formatting is desired, set this to an empty string.")
    statsd_gauge_format: str = option(
        "stats.gauges.%s", "The gauge stats key formatting applied by the implementation of statsd. "
        "If no formatting is desired, set this to an empty string.")
    statsd_prefix: str = option("nsq.%s", "prefix used for keys sent to statsd (%s for host replacement, "
                                "must match nsqd)")
    statsd_interval: float = option(60.0, "time interval nsqd is configured to push to statsd (must match "
                                    "nsqd)", duration=True)
    nsqlookupd_http_addresses: list[str] = option(
        [], "lookupd HTTP address (may be given multiple times)", flag="lookupd-http-address")
    nsqd_http_addresses: list[str] = option(
        [], "nsqd HTTP address (may be given multiple times)", flag="nsqd-http-address")
    http_client_connect_timeout: float = option(2.0, "timeout for HTTP connect", duration=True)
    http_client_request_timeout: float = option(5.0, "timeout for HTTP request", duration=True)
    http_client_tls_insecure_skip_verify: bool = option(
        False, "configure the HTTP client to skip verification of TLS certificates")
    http_client_tls_root_ca_file: str = option("", "path to CA file for the HTTP client")
    http_client_tls_cert: str = option("", "path to certificate file for the HTTP client")
    http_client_tls_key: str = option("", "path to key file for the HTTP client")
    allow_config_from_cidr: str = option("127.0.0.1/8", "A CIDR from which to allow HTTP requests to the "
                                         "/config endpoint")
    notification_http_endpoint: str = option(
        "", "HTTP endpoint (fully qualified) to which POST notifications of admin actions will be sent")
    acl_http_header: str = option("X-Forwarded-User", "HTTP header to check for authenticated admin users")
    admin_users: list[str] = option(
        [], "admin user (may be given multiple times; if specified, only these users will be able to "
        "perform privileged actions; acl-http-header is used to determine the authenticated user)",
        flag="admin-user")
    history_interval: float = option(5.0, "how often to sample every nsqd's /stats for the charts "
                                     "(0 disables the charts)", duration=True)
    history_retention: float = option(3600.0, "how long sampled stats are kept in memory for the charts",
                                      duration=True)
    hostname: str = dataclasses.field(default_factory=socket.gethostname)  # "via" in notifications

    def is_admin(self, headers) -> bool:
        """May the sender of these request headers take privileged actions?"""
        return not self.admin_users or headers.get(self.acl_http_header) in self.admin_users

    def validate(self) -> None:
        """Raise ValueError with one line an operator can act on."""
        if bool(self.nsqlookupd_http_addresses) == bool(self.nsqd_http_addresses):
            raise ValueError("use --lookupd-http-address or --nsqd-http-address (exactly one of them)")
        for address in self.nsqlookupd_http_addresses + self.nsqd_http_addresses:
            check_upstream_address(address)
        if bool(self.http_client_tls_cert) != bool(self.http_client_tls_key):
            raise ValueError("--http-client-tls-cert and --http-client-tls-key must be given together")
        try:
            ipaddress.ip_network(self.allow_config_from_cidr, strict=False)
        except ValueError:
            raise ValueError(f"--allow-config-from-cidr {self.allow_config_from_cidr!r} is not a CIDR "
                             "(e.g. 127.0.0.1/8)") from None
        for flag, url in (("--graphite-url", self.graphite_url),
                          ("--notification-http-endpoint", self.notification_http_endpoint)):
            if url and urlsplit(url).scheme not in ("http", "https"):
                raise ValueError(f"{flag} {url!r} must be a full http:// or https:// URL")
        if self.proxy_graphite and not self.graphite_url:
            raise ValueError("--proxy-graphite needs --graphite-url")
        if self.http_client_connect_timeout <= 0 or self.http_client_request_timeout <= 0:
            raise ValueError("--http-client-connect-timeout and --http-client-request-timeout must be > 0")
        if self.history_interval < 0 or self.history_retention <= 0:
            raise ValueError("--history-interval must be >= 0 and --history-retention > 0")
        if self.statsd_interval <= 0:
            raise ValueError("--statsd-interval must be > 0")
        self.base_path = normalize_base_path(self.base_path)


def check_upstream_address(address: str) -> None:
    """``host:port`` or a full ``http(s)://host:port`` URL."""
    if address.startswith(("http://", "https://")):
        if not urlsplit(address).netloc:
            raise ValueError(f"{address!r} is not a URL with a host")
        return
    try:
        split_host_port(address)
    except ValueError:
        raise ValueError(f"{address!r} is not host:port") from None


def normalize_base_path(path: str) -> str:
    """``/``, ``/admin`` or ``admin/`` -> ``""`` or ``/admin``: a prefix to put
    before every route."""
    return "/" + path.strip("/") if path.strip("/") else ""
