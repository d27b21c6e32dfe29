"""Finding 1: a client that pipelines commands and never reads its replies
must not make nsqd read on and queue replies without bound. nsqd stops
reading it once its write buffer is past the high-water mark, as Go's nsqd
does once its writes block; other clients are unaffected.

Go nsqd 1.3.0 here: it stops taking bytes after ~200,000 bogus FINs
(21 bytes each) and ~550,000 tiny PUBs; its RSS stays within a few MB."""

import struct
import threading

import pytest

from nsqpy.protocol import commands
from tests.reliability.conftest import assert_no_traceback
from tests.reliability.memory import rss_kb, settled_rss_kb
from tests.reliability.probes import hostport_of, in_thread, pipeline_without_reading
from tests.support.wire import WireConn

pytestmark = pytest.mark.reliability

BOGUS_FIN = b"FIN 0123456789abcdef\n"  # a well-formed FIN for an id never in flight: E_FIN_FAILED, non-fatal
GROWTH_LIMIT_KB = 20_000


def _healthy_round_trip(nsqd, topic: str, count: int) -> list[bytes]:
    with WireConn(nsqd.tcp_hostport) as producer, WireConn(nsqd.tcp_hostport) as consumer:
        consumer.subscribe(topic, "healthy", rdy=count)
        for i in range(count):
            producer.publish(topic, b"%d" % i)
        received = []
        for message in consumer.messages(count, timeout=10):
            received.append(message.body)
            consumer.send(commands.fin(message.id))
        return received


@pytest.mark.parametrize("name, payload, setup, repeat", [
    ("bogus FINs", BOGUS_FIN, commands.sub("bp_fin", "ch"), 3_000_000),
    ("tiny PUBs", b"PUB bp_pub#ephemeral\n" + struct.pack(">i", 1) + b"x", b"", 2_000_000),
])
def test_a_client_that_never_reads_cannot_grow_nsqd(nsqd, topic, name, payload, setup, repeat):
    pid = nsqd.process.pid
    _healthy_round_trip(nsqd, topic, 10)  # warm: first-use allocations are not growth
    before = settled_rss_kb(nsqd)
    hostile = in_thread(pipeline_without_reading, nsqd.tcp_hostport, payload, repeat, 2.0, setup)
    received = _healthy_round_trip(nsqd, topic, 200)  # while the hostile client pushes
    sent = hostile(120)
    grown = rss_kb(pid) - before
    print(f"{name}: nsqd took {sent:,} of {repeat:,} pipelined commands, RSS +{grown / 1024:.1f} MB")
    assert received == [b"%d" % i for i in range(200)]
    assert sent < repeat  # reading stopped: the rest waits in the client's socket
    assert grown < GROWTH_LIMIT_KB
    assert _healthy_round_trip(nsqd, topic, 10)  # still serving
    assert_no_traceback(nsqd)


def test_a_client_that_never_reads_is_dropped_after_one_heartbeat_interval(nsqd):
    """nsqd's write deadline: replies blocked for one interval close the connection."""
    setup = commands.identify({"heartbeat_interval": 1000}) + commands.sub("bp_drop", "ch")
    done = threading.Event()
    hostile = in_thread(lambda: (pipeline_without_reading(nsqd.tcp_hostport, BOGUS_FIN, 3_000_000, 10.0, setup),
                                 done.set()))
    line = nsqd.wait_for_log("did not read its replies in time", timeout=30)
    assert "closing" in line
    hostile(60)
    assert done.is_set()


def test_an_nsqlookupd_peer_that_never_reads_cannot_grow_it(start_lookupd):
    lookupd = start_lookupd()
    pid = lookupd.process.pid
    before = settled_rss_kb(lookupd)
    sent = pipeline_without_reading(lookupd.tcp_hostport, b"PING\n", 3_000_000, 2.0, magic=b"  V1")
    grown = rss_kb(pid) - before
    print(f"nsqlookupd: took {sent:,} of 3,000,000 pipelined PINGs, RSS +{grown / 1024:.1f} MB")
    assert sent < 3_000_000
    assert grown < GROWTH_LIMIT_KB
    assert_no_traceback(lookupd)


def test_pipelined_http_requests_that_are_never_read_cannot_grow_nsqd(nsqd):
    pid = nsqd.process.pid
    before = settled_rss_kb(nsqd)
    request = b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"
    sent = pipeline_without_reading(hostport_of(nsqd.http_address), request, 2_000_000, 2.0, magic=b"")
    grown = rss_kb(pid) - before
    print(f"nsqd HTTP: took {sent:,} of 2,000,000 pipelined requests, RSS +{grown / 1024:.1f} MB")
    assert sent < 2_000_000
    assert grown < GROWTH_LIMIT_KB
