"""``GET /metrics`` on real daemons, parsed with prometheus_client's own
parser: the figures equal what ``/stats`` says at the same moment."""

import json

from prometheus_client.parser import text_string_to_metric_families

from nsqpy.localcluster import DaemonProcess
from nsqpy.protocol import commands as cmd
from tests.support.wire import WireConn, http, http_json, wait_until


def scrape(url: str) -> dict:
    """-> {(sample name, frozenset of labels): value} for one scrape."""
    status, headers, body = http("GET", f"{url}/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(body.decode())
            for sample in family.samples}


def channel_figure(samples: dict, name: str, topic: str, channel: str) -> float:
    return samples[(name, frozenset({"topic": topic, "channel": channel}.items()))]


def test_nsqd_metrics_match_stats(start_nsqd, topic):
    nsqd = start_nsqd("--e2e-processing-latency-percentile=0.99,0.5")
    url = nsqd.http_url
    with WireConn(nsqd.tcp_hostport) as consumer:
        consumer.identify()
        consumer.subscribe(topic, "ch", rdy=2)
        for index in range(5):
            assert http("POST", f"{url}/pub?topic={topic}", f"m{index}".encode())[0] == 200
        assert http("POST", f"{url}/pub?topic={topic}&defer=60000", b"later")[0] == 200
        first, second = consumer.messages(2)
        consumer.send(cmd.fin(first.id))
        consumer.send(cmd.req(second.id, 0))
        wait_until(lambda: json.loads(http("GET", f"{url}/stats?format=json")[2])
                   ["topics"][0]["channels"][0]["requeue_count"] == 1)
        consumer.messages(2)  # the requeued one and the next: two in flight again

        samples = scrape(url)
        _, stats = http_json("GET", f"{url}/stats?format=json")
        channel = stats["topics"][0]["channels"][0]
        for metric, key in [("nsqd_channel_depth", "depth"), ("nsqd_channel_backend_depth", "backend_depth"),
                            ("nsqd_channel_memory_depth", "memory_depth"),
                            ("nsqd_channel_in_flight", "in_flight_count"),
                            ("nsqd_channel_deferred", "deferred_count"), ("nsqd_channel_clients", "client_count"),
                            ("nsqd_channel_messages_total", "message_count"),
                            ("nsqd_channel_requeued_total", "requeue_count"),
                            ("nsqd_channel_timed_out_total", "timeout_count")]:
            assert channel_figure(samples, metric, topic, "ch") == channel[key], metric
        assert (channel["depth"], channel["in_flight_count"], channel["deferred_count"]) == (2, 2, 1)
        assert channel_figure(samples, "nsqd_channel_requeued_total", topic, "ch") == 1

    topic_labels = frozenset({"topic": topic}.items())
    assert samples[("nsqd_topic_messages_total", topic_labels)] == 6
    assert samples[("nsqd_topic_message_bytes_total", topic_labels)] == 5 * 2 + len(b"later")
    assert samples[("nsqd_topic_channels", topic_labels)] == 1
    assert samples[("nsqd_topic_paused", topic_labels)] == 0
    latency = {dict(labels)["quantile"]: value for (name, labels), value in samples.items()
               if name == "nsqd_channel_e2e_processing_latency_seconds"}
    assert set(latency) == {"0.99", "0.5"} and all(0 <= value < 60 for value in latency.values())
    assert samples[("nsqd_healthy", frozenset())] == 1
    assert samples[("nsqd_topics", frozenset())] == 1
    assert samples[("nsqd_build_info", frozenset({"version": "1.3.0"}.items()))] == 1
    assert samples[("process_resident_memory_bytes", frozenset())] > 0


def test_paused_channel_and_closed_consumer_show_at_the_next_scrape(nsqd, topic):
    url = nsqd.http_url
    assert http("POST", f"{url}/topic/create?topic={topic}")[0] == 200
    assert http("POST", f"{url}/channel/create?topic={topic}&channel=ch")[0] == 200
    assert http("POST", f"{url}/channel/pause?topic={topic}&channel=ch")[0] == 200
    with WireConn(nsqd.tcp_hostport) as consumer:
        consumer.identify()
        consumer.subscribe(topic, "ch", rdy=1)
        samples = scrape(url)
        assert channel_figure(samples, "nsqd_channel_paused", topic, "ch") == 1
        assert channel_figure(samples, "nsqd_channel_clients", topic, "ch") == 1
        assert samples[("nsqd_client_connections", frozenset())] == 1
    wait_until(lambda: scrape(url)[("nsqd_client_connections", frozenset())] == 0)
    assert channel_figure(scrape(url), "nsqd_channel_clients", topic, "ch") == 0


def test_nsqlookupd_and_nsqadmin_metrics(start_lookupd, start_nsqd, topic):
    lookupd = start_lookupd()
    nsqd = start_nsqd(f"--lookupd-tcp-address={lookupd.tcp_address}")
    assert http("POST", f"{nsqd.http_url}/topic/create?topic={topic}")[0] == 200
    assert http("POST", f"{nsqd.http_url}/channel/create?topic={topic}&channel=ch")[0] == 200

    def registered():
        samples = scrape(lookupd.http_url)
        return samples if samples[("nsqlookupd_channels", frozenset())] == 1 else None

    samples = wait_until(registered, timeout=30)
    assert samples[("nsqlookupd_nsqd_nodes", frozenset())] == 1
    assert samples[("nsqlookupd_topics", frozenset())] == 1
    assert samples[("nsqlookupd_topic_producers", frozenset({"topic": topic}.items()))] == 1
    assert samples[("nsqlookupd_build_info", frozenset({"version": "1.3.0"}.items()))] == 1

    with DaemonProcess("nsqadmin", ["--http-address=127.0.0.1:0",
                                    f"--lookupd-http-address={lookupd.http_address}"], ready=("HTTP",)) as admin:
        samples = scrape(admin.http_url)
        assert samples[("nsqadmin_build_info", frozenset({"version": "1.3.0"}.items()))] == 1
        assert samples[("process_open_fds", frozenset())] > 0
