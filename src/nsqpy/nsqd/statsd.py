"""Push stats to a statsd daemon over UDP every ``--statsd-interval``.

Counters are deltas since the previous push; gauges are current values.
Lines are ``<prefix><stat>:<value>|c`` or ``|g``, packed into datagrams of at
most ``--statsd-udp-packet-size`` bytes.
"""

import asyncio
import socket

from ..net import split_host_port
from . import stats as stats_module


def host_key(broadcast_address: str, http_port: int) -> str:
    return f"{broadcast_address}:{http_port}".replace(".", "_").replace(":", "_")


def prefix(template: str, key: str) -> str:
    text = template.replace("%s", key) if "%s" in template else template
    if text and not text.endswith("."):
        text += "."
    return text


def pack(lines: list[str], packet_size: int) -> list[bytes]:
    packets, current = [], b""
    for line in lines:
        encoded = line.encode() + b"\n"
        if current and len(current) + len(encoded) > packet_size:
            packets.append(current)
            current = b""
        current += encoded
    if current:
        packets.append(current)
    return packets


class StatsdPusher:
    def __init__(self, nsqd):
        self.nsqd = nsqd
        self.last: dict[str, int] = {}

    def lines(self) -> list[str]:
        options = self.nsqd.options
        data = stats_module.stats(self.nsqd, include_clients=False, include_mem=options.statsd_mem_stats)
        out = []

        def counter(name: str, value: int) -> None:
            out.append(f"{name}:{value - self.last.get(name, 0)}|c")
            self.last[name] = value

        def gauge(name: str, value) -> None:
            out.append(f"{name}:{value}|g")

        def latency(name: str, stats: dict) -> None:
            for p in stats["e2e_processing_latency"]["percentiles"] or []:
                gauge(f"{name}.e2e_processing_latency_{round(p['quantile'] * 100)}", p["value"])

        for topic in data["topics"] or []:
            if options.statsd_exclude_ephemeral and topic["topic_name"].endswith("#ephemeral"):
                continue
            t = f"topic.{topic['topic_name']}"
            counter(f"{t}.message_count", topic["message_count"])
            counter(f"{t}.message_bytes", topic["message_bytes"])
            gauge(f"{t}.depth", topic["depth"])
            gauge(f"{t}.backend_depth", topic["backend_depth"])
            latency(t, topic)
            for channel in topic["channels"]:
                if options.statsd_exclude_ephemeral and channel["channel_name"].endswith("#ephemeral"):
                    continue
                c = f"{t}.channel.{channel['channel_name']}"
                counter(f"{c}.message_count", channel["message_count"])
                gauge(f"{c}.depth", channel["depth"])
                gauge(f"{c}.backend_depth", channel["backend_depth"])
                gauge(f"{c}.in_flight_count", channel["in_flight_count"])
                gauge(f"{c}.deferred_count", channel["deferred_count"])
                counter(f"{c}.requeue_count", channel["requeue_count"])
                counter(f"{c}.timeout_count", channel["timeout_count"])
                gauge(f"{c}.clients", channel["client_count"])
                latency(c, channel)
        memory = data.get("memory")
        if memory:
            for key in ("heap_objects", "heap_idle_bytes", "heap_in_use_bytes", "heap_released_bytes",
                        "gc_pause_usec_100", "gc_pause_usec_99", "gc_pause_usec_95", "next_gc_bytes"):
                gauge(f"mem.{key}", memory[key])
            counter("mem.gc_runs", memory["gc_total_runs"])
        return out

    async def run(self) -> None:
        options = self.nsqd.options
        host, port = split_host_port(options.statsd_address)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_DGRAM)
        sock.setblocking(False)
        try:
            while True:
                await asyncio.sleep(options.statsd_interval)
                key = host_key(options.broadcast_address,
                               options.broadcast_http_port or self.nsqd.http_port)
                head = prefix(options.statsd_prefix, key)
                lines = [head + line for line in self.lines()]
                for packet in pack(lines, options.statsd_udp_packet_size):
                    try:
                        sock.sendto(packet, (host, port))
                    except OSError as error:
                        self.nsqd.log.error("STATSD: failed to send to %s: %s", options.statsd_address, error)
                        break
        finally:
            sock.close()
