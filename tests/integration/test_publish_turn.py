"""A loop turn's PUBs to a topic are queued together at its end, before any
answer leaves (``Topic.publish_in_turn``): what publishers see must be what
they saw when each PUB was queued on arrival. Order on a connection, limits
that count the turn's PUBs, a channel made in the same write, a crowd of
connections, and a full disk that takes the OKs back."""

import asyncio
import shutil

from nsqpy.protocol import commands as cmd
from nsqpy.protocol.frames import FRAME_TYPE_ERROR, FRAME_TYPE_RESPONSE
from tests.integration.nsqd_policies import channel_stats, create
from tests.support.wire import WireConn, http, http_json, wait_until


def test_one_write_of_mixed_publishes_is_delivered_in_its_order(nsqd, topic):
    create(nsqd, topic, "ch")
    with WireConn(nsqd.tcp_hostport) as producer:
        producer.send(cmd.pub(topic, b"1") + cmd.mpub(topic, [b"2", b"3"]) + cmd.pub(topic, b"4")
                      + cmd.dpub(topic, 0, b"5") + cmd.pub(topic, b"6"))
        for _ in range(5):
            producer.expect_ok()
    with WireConn(nsqd.tcp_hostport) as consumer:
        consumer.subscribe(topic, "ch", rdy=10)
        assert [message.body for message in consumer.messages(6)] == [b"1", b"2", b"3", b"4", b"5", b"6"]


def test_a_limit_counts_the_pubs_of_the_same_turn(start_nsqd, topic):
    nsqd = start_nsqd()
    create(nsqd, topic, "ch")
    assert http_json("POST", f"{nsqd.http_url}/channel/config?topic={topic}&channel=ch&max_depth=3")[1][
        "max_depth"] == 3
    with WireConn(nsqd.tcp_hostport) as producer:
        producer.send(b"".join(cmd.pub(topic, b"m%d" % index) for index in range(5)))
        for _ in range(3):
            producer.expect_ok()
        assert str(producer.error()) == (f"E_PUB_FAILED PUB failed channel {topic}/ch is full "
                                         "(depth 3, max_depth 3)")
        producer.expect_closed()
    assert channel_stats(nsqd, topic, "ch")["depth"] == 3


def test_a_channel_made_after_a_pub_in_the_same_write_does_not_take_it(nsqd, topic):
    create(nsqd, topic, "before")
    with WireConn(nsqd.tcp_hostport) as client:
        client.send(cmd.pub(topic, b"earlier") + cmd.sub(topic, "after"))
        client.expect_ok()
        client.expect_ok()
    assert channel_stats(nsqd, topic, "before")["depth"] == 1
    assert channel_stats(nsqd, topic, "after")["depth"] == 0


def test_a_crowd_of_publishers_each_keeps_its_order(nsqd, topic):
    """200 connections with one PUB in flight each, as the crowd benchmark
    publishes: every message arrives once, in its publisher's order."""
    create(nsqd, topic, "ch")
    publishers, each = 200, 25

    async def publisher(number: int) -> None:
        reader, writer = await asyncio.open_connection(*nsqd.tcp_hostport)
        writer.write(b"  V2")
        for index in range(each):
            writer.write(cmd.pub(topic, b"%d:%d" % (number, index)))
            size = int.from_bytes(await reader.readexactly(4), "big")
            frame = await reader.readexactly(size)
            assert frame == FRAME_TYPE_RESPONSE.to_bytes(4, "big") + b"OK", frame
        writer.close()
        await writer.wait_closed()

    async def crowd() -> None:
        await asyncio.wait_for(asyncio.gather(*(publisher(number) for number in range(publishers))), 120)

    asyncio.run(crowd())
    with WireConn(nsqd.tcp_hostport) as consumer:
        consumer.subscribe(topic, "ch", rdy=200)
        bodies = consumer.drain()
    assert len(bodies) == publishers * each
    seen: dict[bytes, list[int]] = {}
    for body in bodies:
        number, index = body.split(b":")
        seen.setdefault(number, []).append(int(index))
    assert len(seen) == publishers
    assert all(indexes == list(range(each)) for indexes in seen.values())


def test_a_full_disk_takes_back_the_oks_of_a_turns_pubs(start_nsqd, small_filesystem):
    """The turn's batch is written once; the disk refusing it refuses every
    PUB in it, and none of them is answered OK."""
    data = small_filesystem / "data"
    data.mkdir()
    nsqd = start_nsqd("--mem-queue-size=0", "--max-bytes-per-file=65536", data_path=data)
    create(nsqd, "full", "ch")
    filler = small_filesystem / "filler"
    filler.write_bytes(b"\0" * (shutil.disk_usage(small_filesystem).free - 16 * 1024))
    wait_until(lambda: http("POST", f"{nsqd.http_url}/pub?topic=full", b"." * 1024)[0] != 200)

    with WireConn(nsqd.tcp_hostport) as producer:
        producer.send(b"".join(cmd.pub("full", b"x" * 1024) for _ in range(8)))
        frame_type, answer = producer.read_frame()
        assert frame_type == FRAME_TYPE_ERROR and answer.startswith(b"E_PUB_FAILED PUB failed"), answer
        producer.expect_closed()
    assert nsqd.process.poll() is None
    filler.unlink()
    assert http("POST", f"{nsqd.http_url}/pub?topic=full", b"after")[0] == 200
    assert http("GET", f"{nsqd.http_url}/ping")[:3:2] == (200, b"OK")
