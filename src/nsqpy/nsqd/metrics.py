"""nsqd's Prometheus figures, read from the same state as ``/stats`` at
scrape time (see ``nsqpy.metrics``).

Names follow Prometheus' conventions: ``nsqd_`` prefix, counters end in
``_total``, times in seconds; topics and channels are labels, so one query
sums a topic across every nsqd.
"""

import time

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from ..metrics import TextFamily, label_text
from .latency import summarize
from .retention import channel_log_position

# (figure, help, how to read it from a topic or a channel)
_TOPIC_GAUGES = [
    ("depth", "Messages waiting for a channel: queued in the topic (memory and disk), or in a retained topic's "
     "log while it has no channel.", lambda t: t.depth),
    ("memory_depth", "Messages queued in the topic's memory.", lambda t: t.queue.memory_depth),
    ("backend_depth", "Messages queued in the topic's disk queue.", lambda t: t.queue.backend_depth),
    ("channels", "Channels of the topic.", lambda t: len(t.channels)),
    ("paused", "1 when the topic is paused.", lambda t: int(t.paused)),
    ("max_depth", "The most messages the topic holds (0: unbounded).", lambda t: t.limit.max_depth),
    ("publish_keys", "Keys of keyed publishes the topic holds within its window.",
     lambda t: 0 if t.publish_keys is None else len(t.publish_keys)),
]
_TOPIC_COUNTERS = [
    ("messages", "Messages published to the topic.", lambda t: t.message_count),
    ("message_bytes", "Bytes of message bodies published to the topic.", lambda t: t.message_bytes),
    ("dropped", "Messages dropped by the topic's drop-oldest limit.", lambda t: t.limit.dropped),
    ("publish_repeats", "Keyed publishes answered OK without queuing anything: repeats within the window.",
     lambda t: 0 if t.publish_keys is None else t.publish_keys.repeats),
]
# beyond NSQ, for retained topics (retention.py) and their channels only
_LOG_GAUGES = [
    ("log_earliest_offset", "The first offset the topic's log still holds.", lambda t: t.topic_log.earliest),
    ("log_latest_offset", "The offset the topic's next message will have (the log's end).",
     lambda t: t.topic_log.latest),
    ("log_bytes", "Bytes of the topic's log on disk.", lambda t: t.topic_log.bytes),
    ("log_segments", "Segment files of the topic's log.", lambda t: len(t.topic_log.segments)),
]
_CHANNEL_LOG_GAUGES = [
    ("log_lag", "Messages of the topic's log the channel has yet to deliver (queued, and not yet replayed).",
     lambda c: channel_log_position(c)["log_lag"]),
]
_CHANNEL_GAUGES = [
    ("depth", "Messages queued in the channel (memory and disk), not yet delivered.", lambda c: len(c.queue)),
    ("memory_depth", "Messages queued in the channel's memory.", lambda c: c.queue.memory_depth),
    ("backend_depth", "Messages queued in the channel's disk queue.", lambda c: c.queue.backend_depth),
    ("in_flight", "Messages delivered and not yet finished, requeued or timed out.", lambda c: len(c.in_flight)),
    ("deferred", "Messages deferred (DPUB or REQ with a delay), waiting to be due.", lambda c: len(c.deferred)),
    ("clients", "Consumers subscribed to the channel.", lambda c: len(c.clients)),
    ("paused", "1 when the channel is paused.", lambda c: int(c.paused)),
    ("max_attempts", "Deliveries before a message goes to the dead-letter topic (0: never).",
     lambda c: c.max_attempts),
    ("ttl_seconds", "Age past which a message is not delivered (0: none).", lambda c: c.message_ttl),
    ("max_depth", "The most messages the channel holds (0: unbounded).", lambda c: c.limit.max_depth),
]
_CHANNEL_COUNTERS = [
    ("messages", "Messages put into the channel.", lambda c: c.message_count),
    ("requeued", "Messages requeued by consumers (REQ).", lambda c: c.requeue_count),
    ("timed_out", "Messages whose in-flight timeout expired.", lambda c: c.timeout_count),
    ("dead_lettered", "Messages sent to the dead-letter topic after max_attempts deliveries.",
     lambda c: c.dead_letter_count),
    ("expired", "Messages not delivered because they outlived the TTL (dropped or dead-lettered).",
     lambda c: c.expired_count),
    ("dropped", "Messages dropped by the channel's drop-oldest limit.", lambda c: c.limit.dropped),
]


def _families(scope: str, gauges, counters) -> list[tuple[TextFamily, object]]:
    """One metric family per figure, each paired with how to read it."""
    return ([(TextFamily(f"nsqd_{scope}_{name}", "gauge", help_text), read) for name, help_text, read in gauges]
            + [(TextFamily(f"nsqd_{scope}_{name}_total", "counter", help_text), read)
               for name, help_text, read in counters])


class NsqdCollector:
    """nsqd's figures for one scrape: ``collect`` (prometheus_client's
    collector protocol) gives the daemon-wide ones, ``topic_families`` the
    per-topic and per-channel ones (see ``nsqpy.metrics.TextFamily``)."""

    def __init__(self, nsqd):
        self.nsqd = nsqd

    def collect(self):
        nsqd = self.nsqd
        yield GaugeMetricFamily("nsqd_healthy", "1 while nsqd is healthy (its disk writes succeed and, when "
                                "replicated, it can make the copies a publish needs).",
                                value=int(nsqd.health == "OK"))
        yield GaugeMetricFamily("nsqd_start_time_seconds", "When nsqd started, in unix seconds.",
                                value=nsqd.start_time)
        yield GaugeMetricFamily("nsqd_uptime_seconds", "Seconds since nsqd started.",
                                value=time.time() - nsqd.start_time)
        yield GaugeMetricFamily("nsqd_topics", "Topics on this nsqd.", value=len(nsqd.topics))
        yield GaugeMetricFamily("nsqd_client_connections", "Open TCP client connections (producers and consumers).",
                                value=len(nsqd.clients))
        if nsqd.replication is not None:
            yield from self._replication(nsqd.replication.stats())

    @staticmethod
    def _replication(stats: dict):
        """A replicated nsqd's peers, lag and takeovers (nsqd/replication)."""
        yield GaugeMetricFamily("nsqd_replication_etcd_ok", "1 while etcd answers this nsqd.",
                                value=int(stats["etcd_ok"]))
        yield GaugeMetricFamily("nsqd_replication_shadow_messages", "Copies held for other nsqd, not delivered.",
                                value=sum(shadow["messages"] for shadow in stats["shadows"]))
        yield CounterMetricFamily("nsqd_replication_takeovers", "Dead nsqd whose messages this one took over.",
                                  value=stats["takeovers"])
        yield CounterMetricFamily("nsqd_replication_adopted_messages", "Messages taken over from dead nsqd.",
                                  value=stats["adopted_messages"])
        yield CounterMetricFamily("nsqd_replication_under_replicated_messages",
                                  "Messages held by fewer nsqd than --replication-factor asks for.",
                                  value=stats["under_replicated_messages"])
        lost = CounterMetricFamily("nsqd_replication_lost_epochs", "Epochs of an nsqd that left the cluster "
                                   "together with every peer holding its copies, taken over by nobody.",
                                   labels=["origin"])
        for entry in stats["lost_epochs"]:
            lost.add_metric([entry["origin"]], entry["epochs"])
        yield lost
        connected = GaugeMetricFamily("nsqd_replication_peer_connected", "1 while the link to the peer is up.",
                                      labels=["peer"])
        lag_messages = GaugeMetricFamily("nsqd_replication_peer_lag_messages",
                                         "Messages sent to the peer and not yet acknowledged.", labels=["peer"])
        lag_seconds = GaugeMetricFamily("nsqd_replication_peer_lag_seconds",
                                        "Age of the oldest batch the peer has not acknowledged.", labels=["peer"])
        for peer in stats["peers"]:
            connected.add_metric([peer["node"]], int(peer["connected"]))
            lag_messages.add_metric([peer["node"]], peer["lag_messages"])
            lag_seconds.add_metric([peer["node"]], peer["lag_ms"] / 1000)
        yield from (connected, lag_messages, lag_seconds)

    def topic_families(self) -> list[TextFamily]:
        nsqd = self.nsqd
        topic_families = _families("topic", _TOPIC_GAUGES, _TOPIC_COUNTERS)
        channel_families = _families("channel", _CHANNEL_GAUGES, _CHANNEL_COUNTERS)
        quantiles = nsqd.options.e2e_processing_latency_percentiles
        latency = TextFamily("nsqd_channel_e2e_processing_latency_seconds", "gauge",
                             "Publish-to-finish latency quantiles over --e2e-processing-latency-window-time.")
        # NSQ's name rules ([.a-zA-Z0-9_-], #ephemeral) leave nothing to escape in these labels
        topics = [(topic, f'{{topic="{topic.name}"}}') for topic in list(nsqd.topics.values())]
        channels = [(channel, f'{{topic="{topic.name}",channel="{channel.name}"}}')
                    for topic, _ in topics for channel in list(topic.channels.values())]
        for family, read in topic_families:
            family.add_rows(topics, read)
        for family, read in channel_families:
            family.add_rows(channels, read)
        log_families = _families("topic", _LOG_GAUGES, []) + _families("channel", _CHANNEL_LOG_GAUGES, [])
        retained = [(topic, labels) for topic, labels in topics if topic.topic_log is not None]
        retained_channels = [(channel, labels) for channel, labels in channels if channel.topic.topic_log is not None]
        for family, read in log_families[:len(_LOG_GAUGES)]:
            family.add_rows(retained, read)
        for family, read in log_families[len(_LOG_GAUGES):]:
            family.add_rows(retained_channels, read)
        for channel, _ in channels:
            if channel.latency is not None:
                self._add_latency(latency, channel.topic.name, channel.name, summarize([channel.latency], quantiles))
        families = [family for family, _ in topic_families + channel_families + log_families]
        return families + [latency] if quantiles else families

    @staticmethod
    def _add_latency(family: TextFamily, topic: str, channel: str, summary: dict) -> None:
        """No samples in the window: no quantiles (a 0 would read as instant)."""
        if not summary["count"]:
            return
        for point in summary["percentiles"] or []:
            family.add(label_text(topic=topic, channel=channel, quantile=str(point["quantile"])), point["value"] / 1e9)
