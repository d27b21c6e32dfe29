"""A turn's PUBs to a topic are queued as one publish, and no OK reaches a
connection's transport before the message it answers is in the channel:
a real nsqd in this process, its connections given transports that record
what they are handed and the channel's depth at that moment."""

import asyncio
from unittest import mock

from nsqpy.eventloop import new_event_loop
from nsqpy.nsqd.options import NsqdOptions
from nsqpy.nsqd.server import NSQD
from nsqpy.nsqd.tcp import V2Protocol
from nsqpy.protocol import commands as cmd
from nsqpy.protocol.frames import OK_FRAME


def recording_transport(depth):
    """A transport recording what a V2Protocol writes, with ``depth()`` when
    it was written; every other call is accepted and ignored."""
    written: list[tuple[bytes, int]] = []
    transport = mock.Mock()
    transport.get_extra_info.side_effect = lambda name, default=None: (
        ("127.0.0.1", 4150) if name == "peername" else default)
    transport.write.side_effect = lambda data: written.append((bytes(data), depth()))
    transport.writelines.side_effect = lambda parts: written.append((b"".join(parts), depth()))
    transport.get_write_buffer_size.return_value = 0
    transport.is_closing.return_value = False
    transport.written = written
    return transport


def run_nsqd(tmp_path, scenario):
    """``scenario(nsqd, channel, connect)`` on a started nsqd with topic
    ``t`` and channel ``ch``; ``connect()`` -> (protocol, transport)."""
    async def main():
        nsqd = NSQD(NsqdOptions(tcp_address="127.0.0.1:0", http_address="127.0.0.1:0", data_path=str(tmp_path),
                                busy_poll=0))
        await nsqd.start()
        try:
            channel = nsqd.get_topic("t").get_channel("ch")

            def connect():
                protocol, transport = V2Protocol(nsqd), recording_transport(lambda: channel.depth)
                protocol.connection_made(transport)
                protocol.data_received(b"  V2")
                return protocol, transport

            return await scenario(nsqd, channel, connect)
        finally:
            await nsqd.stop()

    loop = new_event_loop()
    try:
        return loop.run_until_complete(asyncio.wait_for(main(), 30))
    finally:
        loop.close()


def test_the_pubs_of_a_turn_are_one_publish_answered_after_it(tmp_path):
    async def scenario(nsqd, channel, connect):
        connections = [connect() for _ in range(20)]
        for number, (protocol, _) in enumerate(connections):
            protocol.data_received(cmd.pub("t", b"m%d" % number))
        during = (channel.depth, len(nsqd.topics["t"].turn), [list(t.written) for _, t in connections])
        await asyncio.sleep(0)  # the turn ends: its answers are written
        return during, channel.depth, [transport.written for _, transport in connections]

    (depth_during, in_turn, written_during), depth_after, written = run_nsqd(tmp_path, scenario)
    assert (depth_during, in_turn) == (0, 20)
    assert written_during == [[]] * 20
    assert depth_after == 20
    assert written == [[(OK_FRAME, 20)]] * 20


def test_an_answer_written_before_the_turn_ends_waits_for_the_turns_pubs(tmp_path):
    """A heartbeat's timer or a full buffer writes a client's answers before
    the turn's run of writes: the turn's PUBs are queued first."""
    async def scenario(nsqd, channel, connect):
        (first, first_transport), (second, second_transport) = connect(), connect()
        first.data_received(cmd.pub("t", b"a"))
        second.data_received(cmd.pub("t", b"b"))
        first.client.flush()
        early = list(first_transport.written)
        await asyncio.sleep(0)
        return early, second_transport.written

    early, later = run_nsqd(tmp_path, scenario)
    assert early == [(OK_FRAME, 2)]
    assert later == [(OK_FRAME, 2)]


def test_another_publish_to_the_topic_comes_after_the_turns_pubs(tmp_path):
    async def scenario(nsqd, channel, connect):
        (protocol, _), (other, _) = connect(), connect()
        protocol.data_received(cmd.pub("t", b"1"))
        other.data_received(cmd.mpub("t", [b"2", b"3"]) + cmd.pub("t", b"4"))
        await asyncio.sleep(0)
        return [channel.queue.pop().body for _ in range(channel.depth)]

    assert run_nsqd(tmp_path, scenario) == [b"1", b"2", b"3", b"4"]
