"""Message TTL on a real nsqd, consumed by gnsq, a client that knows nothing
of it: messages older than the TTL are not delivered, but dropped or
dead-lettered and counted; a channel may override its topic's TTL; the
settings come from flags or HTTP and survive a restart."""

import json
import time

import pytest

from tests.integration.nsqd_policies import channel_stats, consume, consuming, create
from tests.support.wire import http, http_json

# Far longer than nsqd takes to hand a fresh message to a subscribed consumer,
# even on a machine busy with other work; "fresh" is published only once its
# consumer is subscribed, so how long gnsq takes to start does not count.
TTL_MS = 2000


def sleep_past_ttl(published: float) -> None:
    """Until what was published at ``published`` (time.monotonic()) is older than the TTL."""
    time.sleep(max(0.0, published + TTL_MS / 1000 + 0.2 - time.monotonic()))


@pytest.fixture
def topic(topic):
    """Short enough for ``<topic>.dead`` to be a valid name."""
    return topic[:48]


def publish(nsqd, topic: str, *bodies: bytes) -> None:
    for body in bodies:
        assert http("POST", f"{nsqd.http_url}/pub?topic={topic}", body)[0] == 200


def test_expired_messages_are_dropped_and_counted(nsqd, topic):
    create(nsqd, topic, "ch", "keeps_all")
    assert http_json("POST", f"{nsqd.http_url}/topic/config?topic={topic}&ttl_ms={TTL_MS}") == (
        200, {"ttl_ms": TTL_MS, "expire_action": "drop", "retention_ms": 0, "retention_bytes": 0,
              "publish_key_window_ms": 120_000, "max_depth": 0, "full_policy": "reject"})
    assert http_json("POST", f"{nsqd.http_url}/channel/config?topic={topic}&channel=keeps_all&ttl_ms=0")[0] == 200
    publish(nsqd, topic, b"stale-1", b"stale-2")
    sleep_past_ttl(time.monotonic())
    with consuming(nsqd, topic, "ch", 1) as received:
        publish(nsqd, topic, b"fresh")

    assert received == ["fresh"]
    stats = channel_stats(nsqd, topic, "ch")
    assert (stats["expired_count"], stats["depth"], stats["ttl_ms"]) == (2, 0, TTL_MS)
    assert sorted(consume(nsqd, topic, "keeps_all", 3)) == ["fresh", "stale-1", "stale-2"]
    assert channel_stats(nsqd, topic, "keeps_all")["expired_count"] == 0
    _, _, body = http("GET", f"{nsqd.http_url}/metrics")
    assert f'nsqd_channel_expired_total{{topic="{topic}",channel="ch"}} 2\n'.encode() in body


def test_flag_defaults_dead_letter_expired_messages(start_nsqd, topic):
    nsqd = start_nsqd(f"--message-ttl={TTL_MS}ms", "--expire-action=dead-letter")
    create(nsqd, topic, "ch")
    create(nsqd, f"{topic}.dead", "dlq")  # the defaults apply to every topic: this one keeps what it gets
    assert http("POST", f"{nsqd.http_url}/topic/config?topic={topic}.dead&ttl_ms=0")[0] == 200
    publish(nsqd, topic, b"stale")
    sleep_past_ttl(time.monotonic())
    with consuming(nsqd, topic, "ch", 1) as received:
        publish(nsqd, topic, b"fresh")
    assert received == ["fresh"]
    assert consume(nsqd, f"{topic}.dead", "dlq", 1) == ["stale"]
    assert channel_stats(nsqd, topic, "ch")["expired_count"] == 1


def test_settings_survive_a_restart(start_nsqd, tmp_path, topic):
    data_path = tmp_path / "kept"
    nsqd = start_nsqd(data_path=data_path)
    create(nsqd, topic, "ch", "other")
    assert http("POST", f"{nsqd.http_url}/topic/config?topic={topic}&ttl_ms=90000&expire_action=dead-letter")[0] == 200
    assert http("POST", f"{nsqd.http_url}/channel/config?topic={topic}&channel=other&ttl_ms=1500")[0] == 200
    nsqd.stop()
    saved = json.loads((data_path / "nsqd.dat").read_bytes())
    [entry] = [t for t in saved["topics"] if t["name"] == topic]
    assert (entry["ttl_ms"], entry["expire_action"]) == (90000, "dead-letter")

    nsqd = start_nsqd(data_path=data_path)
    _, config = http_json("GET", f"{nsqd.http_url}/topic/config?topic={topic}")
    assert (config["ttl_ms"], config["expire_action"]) == (90000, "dead-letter")
    _, config = http_json("GET", f"{nsqd.http_url}/channel/config?topic={topic}&channel=other")
    assert (config["ttl_ms"], config["expire_action"]) == (1500, "dead-letter")
    assert channel_stats(nsqd, topic, "ch")["ttl_ms"] == 90000
