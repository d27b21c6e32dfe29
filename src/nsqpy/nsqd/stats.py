"""``/stats``: NSQ's JSON schema (what nsqadmin and nsq_stat read) and the
text form people read."""

import gc
import json
import os
import time
from json.encoder import encode_basestring_ascii as _quote

from ..protocol import NSQ_VERSION
from .latency import summarize
from .retention import channel_log_position, log_extent

_compact = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode
_NO_LATENCY = _compact(summarize([], []))


def client_stats(client, topic_filter: str | None = None) -> dict:
    settings = client.settings
    stats = {
        "client_id": settings.client_id,
        "hostname": settings.hostname,
        "version": "V2",
        "remote_address": client.remote_address,
        "state": int(client.state),
        "ready_count": client.ready_count,
        "in_flight_count": client.in_flight_count,
        "message_count": client.message_count,
        "finish_count": client.finish_count,
        "requeue_count": client.requeue_count,
        "connect_ts": client.connect_ts,
        "sample_rate": settings.sample_rate,
        "deflate": settings.deflate,
        "snappy": settings.snappy,
        "user_agent": settings.user_agent,
        "tls": False,
        "tls_cipher_suite": "",
        "tls_version": "",
        "tls_negotiated_protocol": "",
        "tls_negotiated_protocol_is_mutual": False,
        **client.tls,
    }
    if client.auth is not None:
        stats.update(authed=True, auth_identity=client.auth.identity, auth_identity_url=client.auth.identity_url)
    pub_counts = [
        {"topic": topic, "count": count}
        for topic, count in sorted(client.pub_counts.items())
        if topic_filter is None or topic == topic_filter
    ]
    if pub_counts:
        stats["pub_counts"] = pub_counts
    return stats


def channel_config(channel) -> dict:
    """Beyond NSQ (dead_letter.py, expiry.py): the policies in force, as
    ``GET /channel/config`` shows them and ``/stats`` lists them."""
    return json.loads(f"{{{_channel_config_members(channel)}}}")


def topic_config(topic) -> dict:
    """Beyond NSQ (expiry.py): as ``GET /topic/config`` and ``/stats`` show it."""
    return json.loads(f"{{{_topic_config_members(topic)}}}")


def _channel_config_members(channel) -> str:
    return (f'"max_attempts":{channel.max_attempts},"dead_letter_topic":{_quote(channel.dead_letter_topic)},'
            f'"ttl_ms":{round(channel.message_ttl * 1000)},"expire_action":{_quote(channel.expire_action)},'
            f'{_limit_members(channel.limit)}')


def _topic_config_members(topic) -> str:
    return (f'"ttl_ms":{round(topic.message_ttl * 1000)},"expire_action":{_quote(topic.expire_action)},'
            f'"retention_ms":{round(topic.retention * 1000)},"retention_bytes":{topic.retention_bytes},'
            f'"publish_key_window_ms":{round(topic.publish_key_window * 1000)},{_limit_members(topic.limit)}')


def _limit_members(limit) -> str:
    return f'"max_depth":{limit.max_depth},"full_policy":{_quote(limit.policy)}'


def _latency_json(channels, quantiles: list[float]) -> str:
    """The e2e latency of ``channels`` merged (a topic merges its channels')."""
    if not quantiles:
        return _NO_LATENCY  # NSQ's shape when no percentiles are asked for
    return _compact(summarize([channel.latency for channel in channels if channel.latency], quantiles))


def _clients_json(clients, include_clients: bool) -> str:
    if not include_clients:
        return "null"
    return _compact([client_stats(client) for client in clients]) if clients else "[]"


def _at_risk_json(queue, held_elsewhere: int) -> str:
    """Beyond NSQ: what a crash (kill -9, power loss) would lose right now.
    ``memory_depth``: queued only in memory; ``memory_only_count``: that plus
    in-flight and deferred messages, which also live only in memory;
    ``unsynced_count``: written to disk but not yet fsynced."""
    memory = queue.memory_depth
    return (f'"memory_depth":{memory},"memory_only_count":{memory + held_elsewhere},'
            f'"unsynced_count":{queue.unsynced_count}')


def _channel_json(channel, include_clients: bool, quantiles: list[float]) -> str:
    queue = channel.queue
    in_flight = channel.in_flight_count
    deferred = channel.deferred_count
    clients = channel.clients
    return (
        f'{{"channel_name":{_quote(channel.name)},"depth":{channel.depth},"backend_depth":{queue.backend_depth},'
        f'"in_flight_count":{in_flight},"deferred_count":{deferred},"message_count":{channel.message_count},'
        f'"requeue_count":{channel.requeue_count},"timeout_count":{channel.timeout_count},'
        f'"client_count":{len(clients)},'
        f'"clients":{_clients_json(clients, include_clients)},"paused":{"true" if channel.paused else "false"},'
        f'"e2e_processing_latency":{_latency_json([channel], quantiles)},'
        f'{_channel_config_members(channel)},"dead_letter_count":{channel.dead_letter_count},'
        f'"expired_count":{channel.expired_count},"dropped_count":{channel.limit.dropped},'
        f'{_at_risk_json(queue, in_flight + deferred)}{_log_position_json(channel)}}}'
    )


def _log_position_json(channel) -> str:
    """Beyond NSQ, for a retained topic's channel only (retention.py)."""
    return "" if channel.topic.topic_log is None else "," + _compact(channel_log_position(channel))[1:-1]


def _topic_json(topic, channel_filter: str | None, include_clients: bool, quantiles: list[float]) -> str:
    channels = ",".join([
        _channel_json(channel, include_clients, quantiles)
        for name, channel in sorted(topic.channels.items())
        if channel_filter is None or name == channel_filter
    ])
    queue = topic.queue
    latency = _latency_json(topic.channels.values(), quantiles)
    return (
        f'{{"topic_name":{_quote(topic.name)},"channels":[{channels}],"depth":{topic.depth},'
        f'"backend_depth":{queue.backend_depth},"message_count":{topic.message_count},'
        f'"message_bytes":{topic.message_bytes},"paused":{"true" if topic.paused else "false"},'
        f'"e2e_processing_latency":{latency},{_topic_config_members(topic)},'
        f'"dropped_count":{topic.limit.dropped},{_at_risk_json(queue, 0)}{_log_json(topic)}{_keys_json(topic)}}}'
    )


def _keys_json(topic) -> str:
    """Beyond NSQ, for a topic that had keyed publishes (publish_keys.py)."""
    keys = topic.publish_keys
    return "" if keys is None else f',"publish_keys":{len(keys)},"publish_repeat_count":{keys.repeats}'


def _log_json(topic) -> str:
    """Beyond NSQ, for a retained topic only: what its log holds."""
    return "" if topic.topic_log is None else f',"log":{_compact(log_extent(topic.topic_log))}'


def memory_stats() -> dict:
    """Go runtime figures have no Python twin; these are the nearest honest ones."""
    try:
        with open("/proc/self/statm") as f:
            resident_pages = int(f.read().split()[1])
        resident = resident_pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        resident = 0
    collections = sum(generation["collections"] for generation in gc.get_stats())
    return {
        "heap_objects": sum(gc.get_count()),
        "heap_idle_bytes": 0,
        "heap_in_use_bytes": resident,
        "heap_released_bytes": 0,
        "gc_pause_usec_100": 0,
        "gc_pause_usec_99": 0,
        "gc_pause_usec_95": 0,
        "next_gc_bytes": 0,
        "gc_total_runs": collections,
    }


def stats_json(nsqd, topic_filter=None, channel_filter=None, include_clients=True, include_mem=True) -> bytes:
    """NSQ's ``/stats?format=json`` document, formatted straight from the
    topics and channels. A daemon with thousands of queues answers it often
    (nsqadmin, nsq_stat, monitoring): building a dict per queue and then
    dumping it took twice as long as this."""
    quantiles = nsqd.options.e2e_processing_latency_percentiles
    topics = []
    for name, topic in sorted(nsqd.topics.items()):
        if topic_filter is not None and name != topic_filter:
            continue
        if channel_filter is not None and channel_filter not in topic.channels:
            continue
        topics.append(_topic_json(topic, channel_filter, include_clients, quantiles))
    producers = None
    if include_clients:
        producers = [
            client_stats(client, topic_filter)
            for client in nsqd.clients.values()
            if client.pub_counts and (topic_filter is None or topic_filter in client.pub_counts)
        ] or None
    listed = f"[{','.join(topics)}]" if topics or topic_filter is None else "null"
    memory = f',"memory":{_compact(memory_stats())}' if include_mem else ""
    # beyond NSQ, only where it is switched on: a replicated nsqd's peers, lag, takeovers
    replication = "" if nsqd.replication is None else f',"replication":{_compact(nsqd.replication.stats())}'
    return (f'{{"version":{_quote(NSQ_VERSION)},"health":{_quote(nsqd.health)},"start_time":{nsqd.start_time},'
            f'"topics":{listed}{memory},"producers":{_compact(producers)}{replication}}}').encode()


def stats(nsqd, topic_filter=None, channel_filter=None, include_clients=True, include_mem=True) -> dict:
    """The same document as values, for the text form and statsd: one
    schema, the JSON one."""
    return json.loads(stats_json(nsqd, topic_filter, channel_filter, include_clients, include_mem))


def _uptime(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes}m{secs}s" if hours else f"{minutes}m{secs}s" if minutes else f"{secs}s"


def _e2e_text(e2e: dict) -> str:
    return ", ".join(f"{p['quantile'] * 100:.1f}%={p['value'] / 1e6:.1f}ms" for p in e2e["percentiles"] or [])


def _client_line(c: dict) -> str:
    return (
        f"        [{c['version']} {c['client_id']:<16}] state: {c['state']} inflt: {c['in_flight_count']:<4} "
        f"rdy: {c['ready_count']:<4} fin: {c['finish_count']:<8} re-q: {c['requeue_count']:<8} "
        f"msgs: {c['message_count']:<8} connected: {_uptime(int(time.time()) - c['connect_ts'])}"
    )


def _replication_lines(r: dict) -> list[str]:
    """A replicated nsqd's state, as the JSON's ``replication`` says it."""
    lines = [f"Replication: node {r['node']} epoch {r['epoch']} factor {r['replication_factor']} "
             f"etcd {'ok' if r['etcd_ok'] else 'UNAVAILABLE'} takeovers {r['takeovers']} "
             f"adopted {r['adopted_messages']} under-replicated {r['under_replicated_messages']}"]
    for p in r["peers"]:
        lines.append(f"    peer {p['node']:<21} {'connected' if p['connected'] else 'DISCONNECTED'}"
                     f"{' replica' if p['replica'] else ''} sent: {p['sent_messages']:<8} "
                     f"lag: {p['lag_messages']} msgs {p['lag_ms']:.0f}ms")
    for shadow in r["shadows"]:
        lines.append(f"    holds {shadow['messages']} copies for {shadow['origin']} epoch {shadow['epoch']}")
    for lost in r["lost_epochs"]:
        lines.append(f"    LOST {lost['epochs']} epoch(s) of {lost['origin']} with every peer holding its copies")
    for gone in r["departed"]:
        left_at = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(gone["left_at"]))
        lines.append(f"    departed {gone['node']} epoch {gone['epoch']} at {left_at}, taken over by "
                     f"{gone['taken_over_by'] or 'nobody yet'}, {gone['messages_adopted']} adopted here")
    return [*lines, ""]


def _log_line(topic: dict) -> str:
    """Beyond NSQ: a retained topic's log (retention.py), under its topic."""
    log = topic["log"]
    lags = ", ".join(f"{channel['channel_name']}={channel['log_lag']}" for channel in topic["channels"]) or "-"
    return (f"      log: offsets {log['earliest_offset']}-{log['latest_offset']} bytes: {log['bytes']} "
            f"segments: {log['segments']} lag: {lags}")


def render_text(data: dict, version_line: str) -> str:
    lines = [
        version_line,
        f"start_time {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(data['start_time']))}",
        f"uptime {_uptime(int(time.time()) - data['start_time'])}",
        "",
        f"Health: {data['health']}",
        "",
    ]
    replication = data.get("replication")
    if replication:
        lines.extend(_replication_lines(replication))
    memory = data.get("memory")
    if memory:
        lines.append("Memory:")
        lines.extend(f"   {key:<26}{value}" for key, value in memory.items())
        lines.append("")
    topics = data["topics"] or []
    if not topics:
        lines.append("Topics: None")
    else:
        lines.append("Topics:")
    for t in topics:
        paused = "*P " if t["paused"] else "   "
        lines.append(f"{paused}[{t['topic_name']:<15}] depth: {t['depth']:<5} be-depth: {t['backend_depth']:<5} "
                     f"msgs: {t['message_count']:<8} e2e%: {_e2e_text(t['e2e_processing_latency'])}")
        if t.get("log"):
            lines.append(_log_line(t))
        for ch in t["channels"]:
            paused = "*P " if ch["paused"] else "   "
            lines.append(
                f"    {paused}[{ch['channel_name']:<25}] depth: {ch['depth']:<5} be-depth: {ch['backend_depth']:<5} "
                f"inflt: {ch['in_flight_count']:<4} def: {ch['deferred_count']:<4} re-q: {ch['requeue_count']:<5} "
                f"timeout: {ch['timeout_count']:<5} msgs: {ch['message_count']:<8} "
                f"e2e%: {_e2e_text(ch['e2e_processing_latency'])}"
            )
            lines.extend(_client_line(c) for c in ch["clients"] or [])
    lines.append("")
    producers = data.get("producers") or []
    if not producers:
        lines.append("Producers: None")
    else:
        lines.append("Producers:")
        lines.extend(_client_line(c) for c in producers)
    return "\n".join(lines) + "\n"
