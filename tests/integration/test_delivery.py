"""Delivery semantics through a real nsqd: fan-out, flow control, timeouts,
requeue, deferral, ephemeral lifetimes, backlog and disk overflow."""

import time
from urllib.parse import quote

import pytest

from nsqpy.protocol import commands as cmd
from tests.support.wire import WireConn, http, http_json, wait_until


def conn(daemon) -> WireConn:
    return WireConn(daemon.tcp_hostport)


def channel_stats(daemon, topic, channel):
    _, data = http_json("GET", f"{daemon.http_url}/stats?format=json&topic={topic}&channel={channel}")
    topics = data["topics"] or []
    return topics[0]["channels"][0] if topics else None


def test_every_channel_gets_every_message(shared_nsqd, topic):
    with conn(shared_nsqd) as a, conn(shared_nsqd) as b:
        a.subscribe(topic, "one", rdy=10)
        b.subscribe(topic, "two", rdy=10)
        a.send(cmd.mpub(topic, [b"1", b"2", b"3"]))
        a.expect_ok()
        for c in (a, b):
            messages = c.messages(3)
            assert [m.body for m in messages] == [b"1", b"2", b"3"]
            assert all(m.attempts == 1 for m in messages)


def test_channel_shares_messages_among_its_consumers(shared_nsqd, topic):
    with conn(shared_nsqd) as a, conn(shared_nsqd) as b:
        for c in (a, b):
            c.identify(msg_timeout=60_000)  # no redelivery however slowly this test runs
            c.subscribe(topic, "ch", rdy=100)
        bodies = [str(i).encode() for i in range(100)]
        a.send(cmd.mpub(topic, bodies))
        a.expect_ok()
        got_a, got_b = [], []
        deadline = time.monotonic() + 30
        while len(got_a) + len(got_b) < len(bodies) and time.monotonic() < deadline:
            for c, got in ((a, got_a), (b, got_b)):
                try:
                    while True:
                        got.append(c.message(timeout=0.1).body)
                except TimeoutError:
                    pass
        for c in (a, b):
            c.expect_nothing(0.3)  # nothing beyond the 100
        assert sorted(got_a + got_b) == sorted(bodies)  # each message exactly once
        assert got_a and got_b  # both consumers took part


def test_rdy_is_an_in_flight_window(shared_nsqd, topic):
    with conn(shared_nsqd) as c:
        c.identify(msg_timeout=60_000)  # none times out and frees a slot, however slowly this runs
        c.subscribe(topic, "ch", rdy=2)
        c.send(cmd.mpub(topic, [b"a", b"b", b"c", b"d"]))
        c.expect_ok()
        first = c.messages(2)
        c.expect_nothing(0.3)  # window full
        c.send(cmd.fin(first[0].id))
        assert c.message().body == b"c"  # one slot opened, one message
        c.expect_nothing(0.2)
        c.send(cmd.rdy(0))
        c.send(cmd.fin(first[1].id))
        c.expect_nothing(0.3)  # RDY 0 stops delivery
        c.send(cmd.rdy(5))
        assert c.message().body == b"d"


def test_in_flight_timeout_redelivers_with_attempts_counted(shared_nsqd, topic):
    with conn(shared_nsqd) as c:
        c.identify(msg_timeout=1000)
        c.subscribe(topic, "ch", rdy=1)
        c.publish(topic, b"slow")
        first = c.message()
        second = c.message(timeout=15)
        assert (second.id, second.body, second.attempts) == (first.id, b"slow", 2)
        assert second.timestamp == first.timestamp
        assert channel_stats(shared_nsqd, topic, "ch")["timeout_count"] == 1
        c.send(cmd.fin(first.id))  # owns it again, FIN works


def test_touch_keeps_a_message_past_its_timeout(shared_nsqd, topic):
    with conn(shared_nsqd) as c:
        c.identify(msg_timeout=2000)
        c.subscribe(topic, "ch", rdy=1)
        c.publish(topic, b"long job")
        message = c.message()
        delivered = time.monotonic()
        while time.monotonic() - delivered < 3.0:  # 3 s of work (past the 2 s timeout), touching every 0.4 s
            time.sleep(0.4)
            c.send(cmd.touch(message.id))
        c.send(cmd.fin(message.id))
        c.expect_nothing(0.5)
        stats = wait_until(lambda: (s := channel_stats(shared_nsqd, topic, "ch"))["in_flight_count"] == 0 and s)
        assert stats["timeout_count"] == 0


def test_req_with_delay_defers_and_req_zero_requeues_at_once(shared_nsqd, topic):
    with conn(shared_nsqd) as c:
        c.subscribe(topic, "ch", rdy=1)
        c.publish(topic, b"retry me")
        message = c.message()
        c.send(cmd.req(message.id, 0))
        again = c.message(timeout=5)
        assert again.attempts == 2
        sent = time.monotonic()
        c.send(cmd.req(again.id, 600))
        c.expect_nothing(0.4)
        third = c.message(timeout=15)
        assert time.monotonic() - sent >= 0.55
        assert (third.body, third.attempts) == (b"retry me", 3)
        assert channel_stats(shared_nsqd, topic, "ch")["requeue_count"] == 2


def test_dpub_and_http_defer_deliver_after_the_delay(shared_nsqd, topic):
    # long enough for both to be still deferred when /stats is read, on a busy machine too
    delay = 2.0
    with conn(shared_nsqd) as c:
        c.subscribe(topic, "ch", rdy=5)
        sent = time.monotonic()
        c.send(cmd.dpub(topic, int(delay * 1000), b"later"))
        c.expect_ok()
        assert http("POST", f"{shared_nsqd.http_url}/pub?topic={topic}&defer={int(delay * 1000)}",
                    b"later too")[0] == 200
        assert channel_stats(shared_nsqd, topic, "ch")["deferred_count"] == 2
        c.expect_nothing(max(0.0, sent + delay - 0.1 - time.monotonic()))  # nothing before the delay
        bodies = sorted(m.body for m in c.messages(2, timeout=15))
        assert bodies == [b"later", b"later too"]
        assert time.monotonic() - sent >= delay - 0.05


def test_disconnect_requeues_in_flight_messages_at_once(shared_nsqd, topic):
    a = conn(shared_nsqd)
    a.identify(msg_timeout=60_000)
    a.subscribe(topic, "ch", rdy=5)
    a.send(cmd.mpub(topic, [b"x", b"y"]))
    a.expect_ok()
    a.messages(2)
    a.close()  # a's msg_timeout is 60 s; redelivery must not wait for it
    with conn(shared_nsqd) as b:
        b.subscribe(topic, "ch", rdy=5)
        started = time.monotonic()
        messages = b.messages(2, timeout=20)
        assert time.monotonic() - started < 20
        assert sorted(m.body for m in messages) == [b"x", b"y"]
        assert all(m.attempts == 2 for m in messages)


def test_topic_without_channel_keeps_messages_for_the_first_channel(shared_nsqd, topic):
    url = shared_nsqd.http_url
    assert http("POST", f"{url}/mpub?topic={topic}", b"1\n2\n3\n")[0] == 200
    with conn(shared_nsqd) as c:
        c.subscribe(topic, "first", rdy=10)
        assert [m.body for m in c.messages(3)] == [b"1", b"2", b"3"]
    with conn(shared_nsqd) as c:
        c.subscribe(topic, "second", rdy=10)  # a later channel sees only newer messages
        c.expect_nothing(0.3)


def test_ephemeral_channel_and_topic_go_away_with_their_last_client(shared_nsqd, topic):
    name = f"{topic[:40]}#ephemeral"
    c = conn(shared_nsqd)
    c.subscribe(name, "ch#ephemeral")
    _, data = http_json("GET", f"{shared_nsqd.http_url}/stats?format=json&topic={quote(name)}")
    assert data["topics"][0]["channels"][0]["channel_name"] == "ch#ephemeral"
    c.close()

    def gone():
        _, stats = http_json("GET", f"{shared_nsqd.http_url}/stats?format=json&topic={quote(name)}")
        return stats["topics"] is None

    wait_until(gone, timeout=15)


def test_ephemeral_channel_goes_away_but_durable_topic_stays(shared_nsqd, topic):
    c = conn(shared_nsqd)
    c.subscribe(topic, "tmp#ephemeral")
    c.close()

    def channel_gone():
        _, stats = http_json("GET", f"{shared_nsqd.http_url}/stats?format=json&topic={topic}")
        return stats["topics"] and stats["topics"][0]["channels"] == []

    wait_until(channel_gone, timeout=15)


@pytest.mark.parametrize("target", ["channel", "topic"])
def test_paused_topic_or_channel_holds_messages_until_unpaused(shared_nsqd, topic, target):
    query = f"topic={topic}&channel=ch" if target == "channel" else f"topic={topic}"
    url = shared_nsqd.http_url
    with conn(shared_nsqd) as c:
        c.subscribe(topic, "ch", rdy=5)
        assert http("POST", f"{url}/{target}/pause?{query}")[0] == 200
        c.publish(topic, b"held")
        c.expect_nothing(0.3)
        _, stats = http_json("GET", f"{url}/stats?format=json&topic={topic}")
        paused = stats["topics"][0] if target == "topic" else stats["topics"][0]["channels"][0]
        assert paused["paused"] is True
        assert http("POST", f"{url}/{target}/unpause?{query}")[0] == 200
        assert c.message().body == b"held"


def test_overflow_beyond_mem_queue_size_goes_to_disk_and_is_delivered(start_nsqd, topic):
    daemon = start_nsqd("--mem-queue-size=10", "--max-bytes-per-file=2048")
    bodies = [b"%04d" % i + b"." * 100 for i in range(200)]
    with conn(daemon) as c:
        c.send(cmd.mpub(topic, bodies))
        c.expect_ok()
        _, data = http_json("GET", f"{daemon.http_url}/stats?format=json&topic={topic}")
        assert data["topics"][0]["depth"] == 200
        assert data["topics"][0]["backend_depth"] == 190
        c.subscribe(topic, "ch", rdy=50)
        received = []
        while len(received) < 200:
            message = c.message(timeout=15)
            received.append(message.body)
            c.send(cmd.fin(message.id))
        assert sorted(received) == bodies
        stats = wait_until(lambda: (s := channel_stats(daemon, topic, "ch")) and s["in_flight_count"] == 0 and s)
        assert stats["depth"] == 0 and stats["backend_depth"] == 0


def test_sample_rate_delivers_a_fraction(shared_nsqd, topic):
    with conn(shared_nsqd) as c:
        c.identify(sample_rate=20, msg_timeout=60_000)  # nothing redelivered, however slowly this runs
        c.subscribe(topic, "ch", rdy=1000)
        c.send(cmd.mpub(topic, [b"s"] * 1000))
        c.expect_ok()
        # every message taken from the channel: delivered (in flight) or sampled out
        stats = wait_until(lambda: (s := channel_stats(shared_nsqd, topic, "ch")) and s["message_count"] == 1000
                           and s["depth"] == 0 and s, timeout=30)
        count = stats["in_flight_count"]
        c.messages(count, timeout=15)
        c.expect_nothing(0.5)  # and not one more than nsqd counts in flight
        assert 100 < count < 320  # about 21% (random int in [0,100) <= 20)


def test_max_channel_consumers(start_nsqd, topic):
    daemon = start_nsqd("--max-channel-consumers=1")
    with conn(daemon) as a, conn(daemon) as b:
        a.subscribe(topic, "ch")
        b.send(cmd.sub(topic, "ch"))
        error = b.error()
        assert error.code == "E_SUB_FAILED"
        assert "exceeds limit of 1" in error.description


def test_a_lone_message_is_not_held_for_the_output_buffer_timeout(shared_nsqd, topic):
    with conn(shared_nsqd) as consumer, conn(shared_nsqd) as producer:
        consumer.identify(output_buffer_timeout=30_000, output_buffer_size=65536)
        consumer.subscribe(topic, "ch", rdy=10)
        producer.publish(topic, b"now")
        # NSQ would flush after up to 30 s; the buffer only batches while more is queued
        assert consumer.message(timeout=15).body == b"now"


def test_unbuffered_client_gets_every_message(shared_nsqd, topic):
    with conn(shared_nsqd) as c:
        c.identify(output_buffer_size=-1)
        c.subscribe(topic, "ch", rdy=10)
        c.send(cmd.mpub(topic, [b"1", b"2", b"3"]))
        c.expect_ok()
        assert [m.body for m in c.messages(3)] == [b"1", b"2", b"3"]


def test_big_and_small_bodies_in_one_burst_arrive_whole_and_in_order(shared_nsqd, topic):
    """A burst of big bodies is written as its parts, unjoined; small ones
    are joined into one buffer: both ways give the same bytes on the wire."""
    bodies = [bytes([65 + i % 26]) * (200_000 if i % 3 == 0 else 100) for i in range(30)]
    with conn(shared_nsqd) as c:
        c.send(cmd.mpub(topic, bodies))
        c.expect_ok()
        c.subscribe(topic, "ch", rdy=100)
        assert [m.body for m in c.messages(30, timeout=30)] == bodies


def test_req_beyond_max_req_timeout_is_clamped_not_refused(start_nsqd, topic):
    daemon = start_nsqd("--max-req-timeout=1s")
    with conn(daemon) as c:
        c.subscribe(topic, "ch", rdy=1)
        c.publish(topic, b"clamped")
        message = c.message()
        sent = time.monotonic()
        c.send(cmd.req(message.id, 600_000))  # asks for 10 minutes
        again = c.message(timeout=10)  # clamped to 1 s: back long before the 10 minutes
        assert again.id == message.id and time.monotonic() - sent < 10


def test_a_touch_clamped_by_max_msg_timeout_times_out_before_later_messages(start_nsqd, topic):
    """msg_timeout 3 s, max 3.5 s: A delivered at 0, B at 1.5, A touched at
    2.0. A's deadline (3.5, the clamp; 5.0 unclamped) is a second before B's
    (4.5): A comes back first, even from a late scan that finds both due."""
    daemon = start_nsqd("--max-msg-timeout=3500ms")
    with conn(daemon) as c:
        c.identify(msg_timeout=3000)
        c.subscribe(topic, "ch", rdy=2)
        c.publish(topic, b"A")
        a = c.message()
        delivered = time.monotonic()
        time.sleep(1.5)
        c.publish(topic, b"B")
        b = c.message()
        time.sleep(max(0.0, delivered + 2.0 - time.monotonic()))
        c.send(cmd.touch(a.id))
        first = c.message(timeout=15)
        assert (first.body, first.attempts) == (b"A", 2)
        assert c.message(timeout=15).id == b.id


def test_touch_cannot_extend_past_max_msg_timeout(start_nsqd, topic):
    """msg_timeout 2 s, touched every 0.4 s, max 4 s: back after 4 s (2 s if
    the touches did nothing; never if nothing capped them)."""
    daemon = start_nsqd("--max-msg-timeout=4s")
    with conn(daemon) as c:
        c.identify(msg_timeout=2000)
        c.subscribe(topic, "ch", rdy=1)
        c.publish(topic, b"capped")
        message = c.message()
        delivered = time.monotonic()
        redelivered = None
        while redelivered is None and time.monotonic() - delivered < 15:
            c.send(cmd.touch(message.id))
            try:
                redelivered = c.message(timeout=0.4)
            except TimeoutError:
                pass
        assert redelivered is not None and redelivered.attempts == 2
        assert 3.0 <= time.monotonic() - delivered < 15


def test_a_worker_pool_at_rdy_1_gets_one_message_each_whatever_the_arrival(shared_nsqd, topic):
    """A dispatch looks at no more ready clients than it has messages: one
    message at a time must still reach every worker, and a burst of them
    must reach as many workers as it has messages."""
    workers = [conn(shared_nsqd) for _ in range(6)]
    try:
        for worker in workers:
            worker.subscribe(topic, "pool", rdy=1)
        wait_until(lambda: (channel_stats(shared_nsqd, topic, "pool") or {}).get("client_count") == 6, timeout=10)
        with conn(shared_nsqd) as producer:
            for i in range(3):  # one at a time
                producer.publish(topic, b"single %d" % i)
            producer.send(cmd.mpub(topic, [b"burst %d" % i for i in range(3)]))
            producer.expect_ok()
        bodies = sorted(worker.message(timeout=10).body for worker in workers)
        assert bodies == sorted([b"single %d" % i for i in range(3)] + [b"burst %d" % i for i in range(3)])
    finally:
        for worker in workers:
            worker.close()
