"""nsqd's ``/stats`` JSON turned into the shapes Go's nsqadmin answers with:
one entry per node (``node`` = ``<broadcast_address>:<http_port>``) and an
aggregate across nodes whose ``node`` is ``*``.

Pure functions over dicts: no I/O, so the figures can be checked by hand.
"""

import time

_CHANNEL_COUNTERS = ("depth", "memory_depth", "backend_depth", "in_flight_count", "deferred_count",
                     "requeue_count", "timeout_count", "message_count", "client_count")
_TOPIC_COUNTERS = ("depth", "memory_depth", "backend_depth", "message_count")
_LOCALITY_COUNTERS = ("zone_local_msg_count", "region_local_msg_count", "global_msg_count")
_CLIENT_FIELDS = (("remote_address", ""), ("version", ""), ("client_id", ""), ("hostname", ""),
                  ("user_agent", ""), ("connect_ts", 0))
_CLIENT_COUNTS = ("in_flight_count", "ready_count", "finish_count", "requeue_count", "message_count",
                  "sample_rate")
_CLIENT_FLAGS = (("deflate", False), ("snappy", False), ("authed", False), ("auth_identity", ""),
                 ("auth_identity_url", ""), ("tls", False), ("tls_cipher_suite", ""), ("tls_version", ""),
                 ("tls_negotiated_protocol", ""), ("tls_negotiated_protocol_is_mutual", False))
_CLIENT_TOPOLOGY = ("topology_zone", "topology_region")
# beyond NSQ: an nsqpy nsqd's policies (dead letters, TTL, bounded queues);
# absent from Go's nsqd, so copied only when a node reports them
_TOPIC_POLICY = ("ttl_ms", "expire_action", "max_depth", "full_policy", "dropped_count")
_CHANNEL_POLICY = ("max_attempts", "dead_letter_topic", "dead_letter_count", *_TOPIC_POLICY[:-1],
                   "expired_count", "dropped_count")
_POLICY_COUNTERS = ("dead_letter_count", "expired_count", "dropped_count")


def e2e_latency(raw, topic: str = "", channel: str = "", host: str = "") -> dict:
    """A node's e2e percentiles, each given the min/max/average/count an
    aggregate over nodes needs (for one node they are all its value)."""
    raw = raw or {}
    count = raw.get("count", 0)
    percentiles = None
    if raw.get("percentiles"):
        percentiles = [{"quantile": p["quantile"], "value": p["value"], "min": p["value"], "max": p["value"],
                        "average": p["value"], "count": count} for p in raw["percentiles"]]
    return {"count": count, "percentiles": percentiles, "topic": topic, "channel": channel, "host": host}


def merge_e2e(latencies: list[dict], topic: str, channel: str = "") -> dict:
    """Percentiles merged by quantile: min of mins, max of maxes, averages
    weighted by each node's sample count."""
    by_quantile: dict[float, dict] = {}
    for latency in latencies:
        for p in latency["percentiles"] or ():
            merged = by_quantile.get(p["quantile"])
            if merged is None:
                by_quantile[p["quantile"]] = dict(p)
                continue
            total = merged["count"] + p["count"]
            if total:
                merged["average"] = (merged["average"] * merged["count"] + p["average"] * p["count"]) / total
            merged["count"] = total
            merged["min"] = min(merged["min"], p["min"])
            merged["max"] = max(merged["max"], p["max"])
            merged["value"] = merged["average"]
    percentiles = sorted(by_quantile.values(), key=lambda p: p["quantile"], reverse=True) or None
    return {"count": sum(latency["count"] for latency in latencies), "percentiles": percentiles,
            "topic": topic, "channel": channel, "host": "*"}


def client_stats(node: str, raw: dict, now: float | None = None) -> dict:
    """One consumer connection as nsqadmin lists it (``connected`` in ns, whole seconds)."""
    now = time.time() if now is None else now
    client = {"node": node}
    for name, default in _CLIENT_FIELDS:
        client[name] = raw.get(name, default)
    client["connected"] = max(0, int(now) - int(client["connect_ts"])) * 1_000_000_000
    for name in _CLIENT_COUNTS:
        client[name] = raw.get(name, 0)
    for name, default in _CLIENT_FLAGS:
        client[name] = raw.get(name, default)
    for name in _CLIENT_TOPOLOGY:
        if raw.get(name):
            client[name] = raw[name]
    return client


def _copy_locality(target: dict, raw: dict) -> None:
    for name in _LOCALITY_COUNTERS:
        if raw.get(name):
            target[name] = raw[name]


def _copy_policy(target: dict, raw: dict, fields) -> None:
    """``policy``: the node's policy settings and their counts, or None (Go's nsqd)."""
    target["policy"] = {name: raw[name] for name in fields if name in raw} or None


def topic_log(raw: dict) -> dict | None:
    """Beyond NSQ: what a retained topic's log holds on one node, how many
    messages that is, and the retention configured; None for a topic that
    keeps no log (and on Go's nsqd)."""
    log = raw.get("log")
    if log is None:
        return None
    return {**log, "messages": log["latest_offset"] - log["earliest_offset"],
            "retention_ms": raw.get("retention_ms", 0), "retention_bytes": raw.get("retention_bytes", 0)}


def merge_logs(logs: list[dict | None]) -> dict | None:
    """The logs of one topic over nodes. Offsets are left out (None): each
    nsqd numbers its own log, so they do not add up; messages, sizes and
    the span of time do."""
    kept = [log for log in logs if log]
    if not kept:
        return None
    starts = [log["earliest_timestamp"] for log in kept if log["earliest_timestamp"]]
    return {"earliest_offset": None, "latest_offset": None,
            "messages": sum(log["messages"] for log in kept),
            "earliest_timestamp": min(starts, default=0),
            "latest_timestamp": max(log["latest_timestamp"] for log in kept),
            "bytes": sum(log["bytes"] for log in kept), "segments": sum(log["segments"] for log in kept)}


def log_position(raw: dict) -> dict | None:
    """Beyond NSQ: how far a channel of a retained topic is behind its log
    (``replay_offset`` while it replays); None for other channels."""
    if "log_lag" not in raw:
        return None
    return {"log_lag": raw["log_lag"], "replay_offset": raw.get("replay_offset")}


def merge_log_positions(positions: list[dict | None]) -> dict | None:
    """The lag over nodes; where each replays is a node's own offset, so
    the aggregate names none."""
    lags = [position["log_lag"] for position in positions if position]
    return {"log_lag": sum(lags), "replay_offset": None} if lags else None


def channel_stats(node: str, hostname: str, topic_name: str, raw: dict, now: float | None = None) -> dict:
    depth, backend = raw.get("depth", 0), raw.get("backend_depth", 0)
    clients = raw.get("clients")
    channel = {
        "node": node, "hostname": hostname, "topic_name": topic_name, "channel_name": raw["channel_name"],
        "depth": depth, "memory_depth": depth - backend, "backend_depth": backend,
        "in_flight_count": raw.get("in_flight_count", 0), "deferred_count": raw.get("deferred_count", 0),
        "requeue_count": raw.get("requeue_count", 0), "timeout_count": raw.get("timeout_count", 0),
        "message_count": raw.get("message_count", 0), "client_count": raw.get("client_count", 0),
        "nodes": None,
        "clients": None if clients is None else [client_stats(node, c, now) for c in clients],
        "paused": raw.get("paused", False), "e2e_processing_latency": e2e_latency(raw.get("e2e_processing_latency")),
    }
    _copy_locality(channel, raw)
    _copy_policy(channel, raw, _CHANNEL_POLICY)
    channel["log_position"] = log_position(raw)
    return channel


def topic_stats(node: str, hostname: str, raw: dict, now: float | None = None) -> dict:
    depth, backend = raw.get("depth", 0), raw.get("backend_depth", 0)
    topic = {
        "node": node, "hostname": hostname, "topic_name": raw["topic_name"],
        "depth": depth, "memory_depth": depth - backend, "backend_depth": backend,
        "message_count": raw.get("message_count", 0), "nodes": None,
        "channels": [channel_stats(node, hostname, raw["topic_name"], c, now) for c in raw.get("channels") or ()],
        "paused": raw.get("paused", False), "e2e_processing_latency": e2e_latency(raw.get("e2e_processing_latency")),
    }
    _copy_locality(topic, raw)
    _copy_policy(topic, raw, _TOPIC_POLICY)
    topic["log"] = topic_log(raw)
    return topic


def _sum_into(total: dict, parts: list[dict], counters) -> None:
    for name in counters:
        total[name] = sum(part[name] for part in parts)
    for name in _LOCALITY_COUNTERS:
        value = sum(part.get(name, 0) for part in parts)
        if value:
            total[name] = value
    policies = [part["policy"] for part in parts if part.get("policy")]
    total["policy"] = {name: sum(policy.get(name, 0) for policy in policies)
                       for name in _POLICY_COUNTERS if any(name in policy for policy in policies)} or None


def aggregate_channel(topic_name: str, channel_name: str, per_node: list[dict]) -> dict:
    """``per_node``: one channel_stats() per node that has the channel."""
    per_node = sorted(per_node, key=lambda c: c["node"])
    channel = {"node": "*", "hostname": "", "topic_name": topic_name, "channel_name": channel_name}
    _sum_into(channel, per_node, _CHANNEL_COUNTERS)
    clients = [client for c in per_node for client in c["clients"] or ()]
    channel.update({
        "nodes": per_node,
        "clients": sorted(clients, key=lambda c: (c["hostname"], c["remote_address"])),
        "paused": any(c["paused"] for c in per_node),
        "e2e_processing_latency": merge_e2e([c["e2e_processing_latency"] for c in per_node],
                                            topic_name, channel_name),
        "log_position": merge_log_positions([c["log_position"] for c in per_node]),
    })
    return channel



def aggregate_topic(topic_name: str, per_node: list[dict]) -> dict:
    """``per_node``: one topic_stats() per node that has the topic."""
    per_node = sorted(per_node, key=lambda t: t["node"])
    topic = {"node": "*", "hostname": "", "topic_name": topic_name}
    _sum_into(topic, per_node, _TOPIC_COUNTERS)
    by_channel: dict[str, list[dict]] = {}
    for node_topic in per_node:
        for channel in node_topic["channels"]:
            by_channel.setdefault(channel["channel_name"], []).append(channel)
    channels = []
    for name in sorted(by_channel):
        channel = aggregate_channel(topic_name, name, by_channel[name])
        channel["clients"] = None  # the topic view lists channels, not their consumers
        channels.append(channel)
    topic.update({
        "nodes": per_node,
        "channels": channels,
        "paused": any(t["paused"] for t in per_node),
        "e2e_processing_latency": merge_e2e([t["e2e_processing_latency"] for t in per_node], topic_name),
        "log": merge_logs([t["log"] for t in per_node]),
    })
    return topic


def node_summary(node: str, topics: list[dict], replication: dict | None = None) -> dict:
    """``/api/nodes/:node``: one node's topics with their channels and
    clients; for a replicated nsqd, its ``replication`` state too."""
    summary = {"node": node, "topics": topics,
               "total_messages": sum(t["message_count"] for t in topics),
               "total_clients": sum(c["client_count"] for t in topics for c in t["channels"])}
    if replication is not None:
        summary["replication"] = replication
    return summary


def replication_brief(state: dict | None) -> dict | None:
    """A replicated nsqd's ``replication`` (its /stats) in one row of the
    nodes list: whether it makes the copies asked for, and what it holds
    for others; the node page has the whole of it."""
    if state is None:
        return None
    peers = state["peers"]
    return {"epoch": state["epoch"], "replication_factor": state["replication_factor"], "etcd_ok": state["etcd_ok"],
            "replicas_connected": sum(1 for peer in peers if peer["connected"] and peer["replica"]),
            "peers_connected": sum(1 for peer in peers if peer["connected"]), "peers": len(peers),
            "held_messages": sum(shadow["messages"] for shadow in state["shadows"]),
            "under_replicated_messages": state["under_replicated_messages"], "takeovers": state["takeovers"],
            "lost_epochs": sum(lost["epochs"] for lost in state["lost_epochs"])}


def departed_nodes(states: list[dict | None]) -> list[dict]:
    """The members that left the cluster, as every replicated nsqd saw them
    (``replication.departed`` of their /stats), one row per (node, epoch),
    newest first: each survivor saw it go (the earliest is shown), one
    names its owner once somebody claimed it, and the owner counts what it
    adopted (the others 0: summed). ``node`` is the departed nsqd's TCP
    host:port, the name it had among the members."""
    found: dict[tuple[str, int], dict] = {}
    for state in states:
        for departure in (state or {}).get("departed") or ():
            key = (departure["node"], departure["epoch"])
            row = found.setdefault(key, {**departure, "messages_adopted": 0})
            row["left_at"] = min(row["left_at"], departure["left_at"])
            row["taken_over_by"] = row["taken_over_by"] or departure["taken_over_by"]
            row["messages_adopted"] += departure["messages_adopted"]
    return sorted(found.values(), key=lambda row: row["left_at"], reverse=True)


def channel_counters(node_topics: list[dict]) -> dict:
    """``/api/counter``: message_count per channel per node."""
    stats = {}
    for topic in node_topics:
        for channel in topic["channels"]:
            key = f"{topic['topic_name']}:{channel['channel_name']}:{topic['node']}"
            stats[key] = {"node": topic["node"], "topic_name": topic["topic_name"],
                          "channel_name": channel["channel_name"], "message_count": channel["message_count"]}
    return stats
