"""nsqd's options: NSQ's flag names, config keys and defaults."""

import dataclasses
import hashlib
import socket
import zlib

from ..net import split_host_port
from ..options import format_duration, option
from .bounds import MAX_DEPTH_LIMIT
from .dead_letter import MAX_ATTEMPTS_LIMIT
from .expiry import MAX_TTL_MS
from .publish_keys import MAX_KEYS as MAX_PUBLISH_KEYS, MAX_WINDOW as MAX_KEY_WINDOW
from .retention import MAX_RETENTION, MAX_RETENTION_BYTES


def default_node_id() -> int:
    """NSQ's default: crc32 of the md5 of the hostname, modulo 1024."""
    digest = hashlib.md5(socket.gethostname().encode()).digest()
    return zlib.crc32(digest) % 1024


def _is_etcd_url(text: str) -> bool:
    """``http(s)://host:port`` (a missing scheme is http, as etcd's own clients take it)."""
    import urllib.parse  # only a replicated nsqd names etcd: never on the way to a plain one's listening

    url = urllib.parse.urlsplit(text if "://" in text else f"http://{text}")
    try:
        return url.scheme in ("http", "https") and bool(url.hostname) and bool(url.port) and url.path in ("", "/")
    except ValueError:  # a port that is not a number
        return False


MAX_BUSY_POLL = 0.01  # longer than this is no longer a moment: a spinning loop


@dataclasses.dataclass
class NsqdOptions:
    log_level: str = option("info", "set log verbosity: debug, info, warn, error, or fatal",
                            choices=("debug", "info", "warn", "error", "fatal"))
    log_prefix: str = option("[nsqd] ", "log message prefix")
    verbose: bool = option(False, "[deprecated] has no effect, use --log-level")
    node_id: int = option(default_node_id, "unique part for message IDs, (int) in range [0,1024) "
                          "(default is hash of hostname)", cfg="id")

    tcp_address: str = option("0.0.0.0:4150", "<addr>:<port> to listen on for TCP clients")
    http_address: str = option("0.0.0.0:4151", "<addr>:<port> to listen on for HTTP clients")
    https_address: str = option("0.0.0.0:4152", "<addr>:<port> to listen on for HTTPS clients")
    broadcast_address: str = option(socket.gethostname, "address that will be registered with lookupd "
                                    "(defaults to the OS hostname)")
    broadcast_tcp_port: int = option(0, "TCP port that will be registered with lookupd "
                                     "(defaults to the TCP port that this nsqd is listening on)")
    broadcast_http_port: int = option(0, "HTTP port that will be registered with lookupd "
                                      "(defaults to the HTTP port that this nsqd is listening on)")
    nsqlookupd_tcp_addresses: list[str] = option([], "lookupd TCP address (may be given multiple times)",
                                                 flag="lookupd-tcp-address")
    auth_http_addresses: list[str] = option([], "<addr>:<port> or a full url to query auth server "
                                            "(may be given multiple times)", flag="auth-http-address")
    auth_http_request_method: str = option("get", "HTTP method to use for auth server requests",
                                           choices=("get", "post"))
    http_client_connect_timeout: float = option(2.0, "timeout for HTTP connect", duration=True)
    http_client_request_timeout: float = option(5.0, "timeout for HTTP request", duration=True)

    data_path: str = option("", "path to store disk-backed messages")
    mem_queue_size: int = option(10000, "number of messages to keep in memory (per topic/channel)")
    max_bytes_per_file: int = option(104857600, "number of bytes per diskqueue file before rolling")
    sync_every: int = option(2500, "number of messages per diskqueue fsync")
    sync_timeout: float = option(2.0, "duration of time per diskqueue fsync", duration=True)

    busy_poll: float = option(50e-6, "beyond NSQ: how long at most the event loop keeps polling the network "
                              "after input before it sleeps, adapted to how soon input comes (lower latency "
                              "for request-response clients; 0 = off)",
                              duration=True)

    queue_scan_interval: float = 0.1
    queue_scan_worker_pool_max: int = option(4, "max concurrency for checking in-flight and deferred "
                                             "message timeouts")
    queue_scan_selection_count: int = option(20, "number of channels to check per cycle "
                                             "(every 100ms) for in-flight and deferred timeouts")

    msg_timeout: float = option(60.0, "default duration to wait before auto-requeing a message",
                                duration=True)
    max_msg_timeout: float = option(900.0, "maximum duration before a message will timeout", duration=True)
    max_msg_size: int = option(1048576, "maximum size of a single message in bytes")
    max_req_timeout: float = option(3600.0, "maximum requeuing timeout for a message", duration=True)
    max_body_size: int = option(5242880, "maximum size of a single command body")

    max_heartbeat_interval: float = option(60.0, "maximum client configurable duration of time between "
                                           "client heartbeats", duration=True)
    max_rdy_count: int = option(2500, "maximum RDY count for a client")
    max_output_buffer_size: int = option(65536, "maximum client configurable size (in bytes) for a "
                                         "client output buffer")
    max_output_buffer_timeout: float = option(30.0, "maximum client configurable duration of time "
                                              "between flushing to a client", duration=True)
    min_output_buffer_timeout: float = option(0.025, "minimum client configurable duration of time "
                                              "between flushing to a client", duration=True)
    output_buffer_timeout: float = option(0.25, "default duration of time between flushing data to "
                                          "clients", duration=True)
    max_channel_consumers: int = option(0, "maximum channel consumer connection count per nsqd "
                                        "instance (default 0, i.e., unlimited)")

    statsd_address: str = option("", "UDP <addr>:<port> of a statsd daemon for pushing stats")
    statsd_prefix: str = option("nsq.%s", "prefix used for keys sent to statsd "
                                "(%s for host replacement)")
    statsd_interval: float = option(60.0, "duration between pushing to statsd", duration=True)
    statsd_mem_stats: bool = option(True, "toggle sending memory and GC stats to statsd")
    statsd_udp_packet_size: int = option(508, "the size in bytes of statsd UDP packets")
    statsd_exclude_ephemeral: bool = option(False, "skip ephemeral topics and channels when sending "
                                            "stats to statsd")

    max_attempts: int = option(0, "beyond NSQ: default for every channel; a message delivered this many "
                               "times goes to its dead-letter topic (<topic>.dead) instead of being delivered "
                               "again (0 = never)")

    message_ttl: float = option(0.0, "beyond NSQ: default for every topic; a message older than this "
                                "is not delivered (0 = never expires)", duration=True)
    expire_action: str = option("drop", "beyond NSQ: default for every topic; what happens to an expired "
                                "message ('drop' or 'dead-letter')", choices=("drop", "dead-letter"))

    max_depth: int = option(0, "beyond NSQ: default for every topic and channel; the most messages "
                            "(memory and disk) it holds (0 = unbounded)")
    full_policy: str = option("reject", "beyond NSQ: default for every topic and channel; at max-depth, "
                              "'reject' publishes or 'drop-oldest' queued messages",
                              choices=("reject", "drop-oldest"))

    retention: float = option(0.0, "beyond NSQ: default for every topic; keep every accepted message in the "
                              "topic's log this long, for replay and offset reads (0 = no log unless "
                              "--retention-bytes)", duration=True)
    retention_bytes: int = option(0, "beyond NSQ: default for every topic; the most bytes a topic's log keeps "
                                  "(whole segments of --max-bytes-per-file go first; 0 = no limit by size)")

    publish_key_window: float = option(120.0, "beyond NSQ: default for every topic; how long a keyed publish's "
                                       "key (KPUB, KMPUB, KDPUB, /kpub, /kmpub) makes a repeat of it harmless "
                                       "(0 = keyed publishes refused)", duration=True)
    max_publish_keys: int = option(1_000_000, "beyond NSQ: the most keys a topic holds within its window; a "
                                   "keyed publish of a new key beyond it is refused until older keys leave")

    export_for_go: bool = option(False, "beyond NSQ: move every deferred message of --data-path into its "
                                 "channel's ordinary queue, so that NSQ's own nsqd loads them, then exit")

    replication_factor: int = option(1, "beyond NSQ: how many nsqd hold each message before a publish is "
                                     "answered OK (1 = no replication; 2 or 3 need --etcd-endpoint)")
    etcd_endpoints: list[str] = option([], "beyond NSQ: etcd client URL (http://host:2379) for replicated "
                                       "nsqd's membership and takeovers (may be given multiple times)",
                                       flag="etcd-endpoint")
    replication_min_copies: int = option(0, "beyond NSQ: the fewest nsqd (this one included) that must hold a "
                                         "message before a publish is answered OK; a publish that cannot have "
                                         "them gets E_PUB_FAILED, which a publisher may retry "
                                         "(0 = --replication-factor: never fewer copies than asked for)")
    replication_secret_file: str = option("", "beyond NSQ: a file holding the secret that proves a peer is a "
                                          "member of this cluster (the same file on every nsqd, at least 16 "
                                          "bytes); needed with --replication-factor above 1 unless "
                                          "--replication-secret-in-etcd")
    replication_secret_in_etcd: bool = option(False, "beyond NSQ: without --replication-secret-file, keep the "
                                              "cluster's secret in etcd under --replication-prefix (made by the "
                                              "first nsqd): whoever can read that etcd can then act as a member")
    replication_ack: str = option("memory", "beyond NSQ: where a peer holds a copy before the publish is "
                                  "answered: 'memory', or 'disk' (fsynced under --data-path/replication)",
                                  choices=("memory", "disk"))
    replication_prefix: str = option("/nsqpy", "beyond NSQ: the etcd key prefix shared by one replicated "
                                     "cluster's nsqd")
    replication_lease: float = option(3.0, "beyond NSQ: how long a replicated nsqd stays a member without "
                                      "renewing its etcd lease (a dead node is taken over after this)",
                                      duration=True)

    e2e_processing_latency_percentiles: list[float] = option(
        [], "message processing time percentiles (as float (0, 1.0]) to track "
        "(can be specified multiple times or comma separated '1.0,0.99,0.95', default none)",
        flag="e2e-processing-latency-percentile")
    e2e_processing_latency_window_time: float = option(600.0, "calculate end to end latency quantiles "
                                                       "for this duration of time", duration=True)

    tls_cert: str = option("", "path to certificate file")
    tls_key: str = option("", "path to key file")
    tls_client_auth_policy: str = option("", "client certificate auth policy "
                                         "('require' or 'require-verify')")
    tls_root_ca_file: str = option("", "path to certificate authority file")
    tls_required: str = option("false", "require TLS for client connections "
                               "(true, false, tcp-https)", choices=("true", "false", "tcp-https"))
    tls_min_version: str = option("tls1.0", "minimum SSL/TLS version acceptable "
                                  "('ssl3.0', 'tls1.0', 'tls1.1', 'tls1.2' or 'tls1.3')")

    deflate: bool = option(True, "enable deflate feature negotiation (client compression)")
    max_deflate_level: int = option(6, "max deflate compression level a client can negotiate "
                                    "(> values == > nsqd CPU usage)")
    snappy: bool = option(True, "enable snappy feature negotiation (client compression)")

    def validate(self) -> None:
        """Raise ``ValueError`` with one line naming the option and the fix."""
        if not 0 <= self.node_id < 1024:
            raise ValueError(f"--node-id {self.node_id} must be in [0,1024)")
        if not 1 <= self.max_deflate_level <= 9:
            raise ValueError(f"--max-deflate-level {self.max_deflate_level} must be in [1,9]")
        if self.mem_queue_size < 0:
            raise ValueError(f"--mem-queue-size {self.mem_queue_size} must be >= 0")
        if self.max_msg_size <= 0 or self.max_body_size <= 0:
            raise ValueError("--max-msg-size and --max-body-size must be > 0")
        if self.max_bytes_per_file <= 0:
            raise ValueError(f"--max-bytes-per-file {self.max_bytes_per_file} must be > 0")
        for address in self.nsqlookupd_tcp_addresses:
            try:
                split_host_port(address)
            except ValueError:
                raise ValueError(f"--lookupd-tcp-address {address!r} must be host:port") from None
        if self.statsd_address:
            try:
                split_host_port(self.statsd_address)
            except ValueError:
                raise ValueError(f"--statsd-address {self.statsd_address!r} must be host:port") from None
        # the policies' defaults: the ranges /topic/config and /channel/config take
        if not 0 <= self.max_attempts <= MAX_ATTEMPTS_LIMIT:
            raise ValueError(f"--max-attempts {self.max_attempts} must be in [0, {MAX_ATTEMPTS_LIMIT}]")
        if not 0 <= self.max_depth <= MAX_DEPTH_LIMIT:
            raise ValueError(f"--max-depth {self.max_depth} must be in [0, {MAX_DEPTH_LIMIT}]")
        if not 0 <= self.message_ttl * 1000 <= MAX_TTL_MS:
            raise ValueError(f"--message-ttl {format_duration(self.message_ttl)} must be in "
                             f"[0, {format_duration(MAX_TTL_MS / 1000)}]")
        if not 0 <= self.retention <= MAX_RETENTION:
            raise ValueError(f"--retention {format_duration(self.retention)} must be in [0, 87600h]")
        if not 0 <= self.retention_bytes <= MAX_RETENTION_BYTES:
            raise ValueError(f"--retention-bytes {self.retention_bytes} must be in [0, {MAX_RETENTION_BYTES}]")
        if (self.retention or self.retention_bytes) and self.replication_factor > 1:
            raise ValueError("--retention cannot be used with --replication-factor above 1 yet "
                             "(a retained topic's log is not replicated)")
        if not 0 <= self.publish_key_window <= MAX_KEY_WINDOW:
            raise ValueError(f"--publish-key-window {format_duration(self.publish_key_window)} must be in "
                             "[0, 168h] (0: keyed publishes refused)")
        if not 1 <= self.max_publish_keys <= MAX_PUBLISH_KEYS:
            raise ValueError(f"--max-publish-keys {self.max_publish_keys} must be in [1, {MAX_PUBLISH_KEYS}]")
        if not 0 <= self.busy_poll <= MAX_BUSY_POLL:
            raise ValueError(f"--busy-poll {format_duration(self.busy_poll)} must be in [0, 10ms]")
        for p in self.e2e_processing_latency_percentiles:
            if not 0 < p <= 1:
                raise ValueError(f"--e2e-processing-latency-percentile {p} must be in (0, 1.0]")
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ValueError("--tls-cert and --tls-key must be given together")
        if self.tls_client_auth_policy not in ("", "require", "require-verify"):
            raise ValueError(f"--tls-client-auth-policy {self.tls_client_auth_policy!r} must be "
                             "'require' or 'require-verify'")
        if self.tls_client_auth_policy and self.tls_required == "false":
            self.tls_required = "true"  # as NSQ: a client certificate policy implies TLS
        if self.tls_required != "false" and not self.tls_cert:
            raise ValueError("--tls-required needs --tls-cert and --tls-key")
        if self.tls_min_version not in ("ssl3.0", "tls1.0", "tls1.1", "tls1.2", "tls1.3"):
            raise ValueError(f"--tls-min-version {self.tls_min_version!r} must be one of ssl3.0, tls1.0, "
                             "tls1.1, tls1.2, tls1.3")
        if self.replication_factor not in (1, 2, 3):
            raise ValueError(f"--replication-factor {self.replication_factor} must be 1, 2 or 3")
        if self.replication_factor > 1 and not self.etcd_endpoints:
            raise ValueError("--replication-factor above 1 needs --etcd-endpoint (replicas coordinate through etcd)")
        if self.replication_factor > 1 and not self.replication_secret_file and not self.replication_secret_in_etcd:
            raise ValueError("--replication-factor above 1 needs --replication-secret-file (the same file on every "
                             "nsqd, e.g. the output of `openssl rand -hex 32`), or --replication-secret-in-etcd to "
                             "keep one in etcd, where whoever can read etcd has it")
        if not 0 <= self.replication_min_copies <= self.replication_factor:
            raise ValueError(f"--replication-min-copies {self.replication_min_copies} must be in "
                             f"[1, --replication-factor {self.replication_factor}] (0: the replication factor)")
        self.replication_min_copies = self.replication_min_copies or self.replication_factor
        for endpoint in self.etcd_endpoints:
            if not _is_etcd_url(endpoint):
                raise ValueError(f"--etcd-endpoint {endpoint!r} is not an etcd client URL like http://127.0.0.1:2379")
        if not 2 <= self.replication_lease <= 60:
            raise ValueError(f"--replication-lease {format_duration(self.replication_lease)} must be in [2s, 60s]")
