"""The wire format's fast paths, checked against plain codecs: reading nsqd's
stream (client/inbound.py against protocol/'s FrameReader) and encoding MPUB
and FIN runs (protocol/commands.py against the format written out by hand)."""

import struct

import pytest

from nsqpy.client.inbound import InboundReader
from nsqpy.protocol import commands
from nsqpy.protocol.errors import ProtocolError
from nsqpy.protocol.frames import (FRAME_TYPE_ERROR, FRAME_TYPE_MESSAGE, FRAME_TYPE_RESPONSE, FrameReader,
                                   encode_frame)
from nsqpy.protocol.message import encode_message, message_fields

pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")  # the client is a library: no deprecated calls


def message_frame(number: int, body: bytes) -> bytes:
    return encode_frame(FRAME_TYPE_MESSAGE, encode_message(1_700_000_000_000_000_000 + number, number % 7 + 1,
                                                           b"%016x" % number, body))


STREAM = b"".join([
    encode_frame(FRAME_TYPE_RESPONSE, b"OK"),
    message_frame(1, b"first"),
    message_frame(2, b""),
    encode_frame(FRAME_TYPE_RESPONSE, b"_heartbeat_"),
    message_frame(3, b"x" * 5000),
    encode_frame(FRAME_TYPE_ERROR, b"E_FIN_FAILED FIN 0000000000000001 failed"),
    message_frame(4, bytes(range(256))),
])


def by_protocol(stream: bytes):
    """What protocol/'s FrameReader and message decoder make of ``stream``."""
    messages, others = [], []
    for frame_type, data in FrameReader().feed(stream):
        if frame_type == FRAME_TYPE_MESSAGE:
            messages.append(message_fields(data))
        else:
            others.append((frame_type, data))
    return messages, others


def fed_in_pieces(stream: bytes, *cuts: int):
    reader, messages, others = InboundReader(), [], []
    for start, end in zip((0, *cuts), (*cuts, len(stream))):
        got_messages, got_others = reader.feed(stream[start:end])
        messages += got_messages
        others += got_others
    assert reader.take_rest() == b""
    return messages, others


def test_a_stream_read_at_once_gives_what_the_protocol_reader_gives():
    assert fed_in_pieces(STREAM) == by_protocol(STREAM)


@pytest.mark.parametrize("step", [1, 3, 8, 29, 30, 31, 1000])
def test_any_split_of_the_stream_gives_the_same_frames(step):
    assert fed_in_pieces(STREAM, *range(step, len(STREAM), step)) == by_protocol(STREAM)


def test_every_single_cut_gives_the_same_frames():
    expected = by_protocol(STREAM)
    for cut in range(1, len(STREAM)):
        assert fed_in_pieces(STREAM, cut) == expected, cut


def test_a_large_message_in_many_reads_comes_out_whole_once_complete():
    body = bytes(range(256)) * 4096  # 1 MiB
    frame = message_frame(9, body)
    reader, reads = InboundReader(), [frame[start:start + 65536] for start in range(0, len(frame), 65536)]
    for read in reads[:-1]:
        assert reader.feed(read) == ([], [])
    (message,), others = reader.feed(reads[-1])
    assert message[2:] == (b"%016x" % 9, body) and others == []


def test_a_limit_leaves_the_rest_buffered_for_take_rest():
    reader = InboundReader()
    ok = encode_frame(FRAME_TYPE_RESPONSE, b"OK")
    assert reader.feed(ok + STREAM, limit=1) == ([], [(FRAME_TYPE_RESPONSE, b"OK")])
    assert reader.feed(b"", limit=0) == ([], [])
    assert reader.take_rest() == STREAM
    assert reader.feed(b"") == ([], [])


@pytest.mark.parametrize("frame, error", [
    (b"\x00\x00\x00\x02\x00\x00", "invalid frame size 2"),
    (b"\x7f\xff\xff\xff\x00\x00\x00\x00", "invalid frame size"),
    (encode_frame(FRAME_TYPE_MESSAGE, b"short message"), "message frame too short"),
])
def test_a_corrupt_frame_is_a_protocol_error(frame, error):
    with pytest.raises(ProtocolError, match=error):
        InboundReader(max_size=1024 * 1024).feed(frame + STREAM)


@pytest.mark.parametrize("bodies", [
    [],
    [b""],
    [b"a" * 200] * 200,
    [b"x" * size for size in (0, 1, 4095, 4096, 4097, 70_000)],
    [bytes([n % 256]) * n for n in range(300)],
])
def test_mpub_is_the_format_written_out(bodies):
    body = struct.pack(">i", len(bodies)) + b"".join(struct.pack(">i", len(b)) + b for b in bodies)
    expected = b"MPUB topic_1\n" + struct.pack(">i", len(body)) + body
    assert commands.mpub("topic_1", bodies) == expected
    assert commands.mpub("topic_1", bodies) == expected  # sizes once seen come from the table
    assert commands.encode_mpub_body(bodies) == body


def test_mpub_reads_back_through_nsqds_parser():
    bodies = [b"m%d" % n * n for n in range(1, 51)]
    line, _, rest = commands.mpub("t", bodies).partition(b"\n")
    assert line == b"MPUB t"
    assert commands.parse_mpub_body(rest[4:], 1024 * 1024, 5 * 1024 * 1024) == bodies


@pytest.mark.parametrize("count", [0, 1, 3])
def test_a_fin_run_is_one_fin_per_id(count):
    ids = [b"%016x" % n for n in range(count)]
    assert commands.fin_many(ids) == b"".join(commands.fin(i) for i in ids)
