"""``GET /channel/deferred`` on a real nsqd: lists what DPUB and REQ
deferred, in due order, and leaves every message to come due untouched."""

import base64
import time

import pytest

from nsqpy.protocol import commands as cmd
from tests.support.wire import WireConn, http, http_json, wait_until


def listing(nsqd, topic: str, query: str = ""):
    return http_json("GET", f"{nsqd.http_url}/channel/deferred?topic={topic}&channel=ch{query}")


def listing_once_deferred(nsqd, topic: str, count: int, query: str = "") -> dict:
    """The listing, once the channel holds ``count`` deferred messages."""
    def ready():
        status, data = listing(nsqd, topic, query)
        assert status == 200
        return data if data["deferred_count"] == count else None
    return wait_until(ready)


def test_lists_deferred_messages_in_due_order_without_disturbing_them(nsqd, topic):
    """Requeued for 2.5 s, then "second due" deferred 3 s: listed before
    either comes due (within 2.5 s, on a busy machine too), due in that order."""
    with WireConn(nsqd.tcp_hostport) as producer:
        producer.identify()
        producer.send(cmd.encode_command(b"SUB", topic, "ch"))
        producer.expect_ok()
        producer.send(cmd.dpub(topic, 60_000, b"last due"))
        producer.expect_ok()
        producer.send(cmd.pub(topic, b"requeued"))
        producer.expect_ok()
        producer.send(cmd.rdy(1))
        requeued = producer.message()
        published = time.time()
        producer.send(cmd.req(requeued.id, 2500))
        producer.send(cmd.dpub(topic, 3000, b"second due"))
        producer.expect_ok()

        data = listing_once_deferred(nsqd, topic, 3, "&body=true")
        assert (data["topic_name"], data["channel_name"]) == (topic, "ch")
        entries = data["messages"]
        assert [base64.b64decode(e["body"]) for e in entries] == [b"requeued", b"second due", b"last due"]
        assert entries[0]["id"] == requeued.id.decode()
        assert [e["attempts"] for e in entries] == [1, 0, 0]
        assert [e["body_size"] for e in entries] == [8, 10, 8]
        assert published + 2.0 < entries[0]["due_at"] / 1e9 < published + 5
        assert entries[2]["due_at"] / 1e9 > published + 55
        assert all(e["timestamp"] / 1e9 <= time.time() for e in entries)

        status, data = listing(nsqd, topic, "&limit=1")
        assert [e["id"] for e in data["messages"]] == [entries[0]["id"]] and "body" not in data["messages"][0]
        assert data["deferred_count"] == 3

        # the listing moved nothing: the near two come due in order, attempts counted as before
        again = producer.message(timeout=15)
        assert (again.id, again.attempts) == (requeued.id, 2)
        producer.send(cmd.fin(again.id))
        later = producer.message(timeout=15)
        assert (later.body, later.attempts) == (b"second due", 1)
        producer.send(cmd.fin(later.id))
        data = listing_once_deferred(nsqd, topic, 1)
        assert [e["id"] for e in data["messages"]] == [entries[2]["id"]]


def test_an_empty_channel_lists_nothing(shared_nsqd, topic):
    nsqd = shared_nsqd
    assert http("POST", f"{nsqd.http_url}/topic/create?topic={topic}")[0] == 200
    assert http("POST", f"{nsqd.http_url}/channel/create?topic={topic}&channel=ch")[0] == 200
    assert listing(nsqd, topic) == (200, {"topic_name": topic, "channel_name": "ch", "deferred_count": 0,
                                          "messages": []})


@pytest.mark.parametrize("query,status,message", [
    ("?topic={topic}&channel=ch&limit=0", 400, "INVALID_LIMIT"),
    ("?topic={topic}&channel=ch&limit=x", 400, "INVALID_LIMIT"),
    ("?topic={topic}&channel=ch&limit=10001", 400, "INVALID_LIMIT"),
    ("?topic={topic}", 400, "MISSING_ARG_CHANNEL"),
    ("?channel=ch", 400, "MISSING_ARG_TOPIC"),
    ("?topic={topic}&channel=nope", 404, "CHANNEL_NOT_FOUND"),
    ("?topic=no_such_topic&channel=ch", 404, "TOPIC_NOT_FOUND"),
])
def test_bad_requests_get_nsq_style_errors(shared_nsqd, topic, query, status, message):
    nsqd = shared_nsqd
    assert http("POST", f"{nsqd.http_url}/topic/create?topic={topic}")[0] == 200
    assert http("POST", f"{nsqd.http_url}/channel/create?topic={topic}&channel=ch")[0] == 200
    assert http_json("GET", f"{nsqd.http_url}/channel/deferred{query.format(topic=topic)}") == (
        status, {"message": message})
