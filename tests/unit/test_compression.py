"""The stream codecs: whatever the chunking, what goes in comes out."""

import zlib

import pytest
import snappy
from hypothesis import given, strategies as st

from nsqpy.protocol.compression import CompressionError, DeflateCodec, SnappyCodec

writes = st.lists(st.binary(max_size=70_000), min_size=1, max_size=6)
cuts = st.lists(st.integers(0, 10**6), max_size=8)


def pieces(data: bytes, at: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in at}) + [len(data)]
    out, last = [], 0
    for point in points:
        out.append(data[last:point])
        last = point
    return out


@pytest.mark.parametrize("codec", [DeflateCodec, SnappyCodec])
@given(writes, cuts)
def test_round_trip_whatever_the_chunking(codec, chunks, at):
    sender, receiver = codec(), codec()
    wire = b"".join(sender.encode(chunk) for chunk in chunks)
    assert b"".join(receiver.decode(piece) for piece in pieces(wire, at)) == b"".join(chunks)


def test_snappy_reads_what_python_snappy_writes_and_the_reverse():
    data = b"nsq message " * 5000
    stream = snappy.StreamCompressor()
    assert SnappyCodec().decode(stream.add_chunk(data[:7000]) + stream.add_chunk(data[7000:])) == data
    assert snappy.StreamDecompressor().decompress(SnappyCodec().encode(data)) == data


def test_deflate_is_raw_and_sync_flushed():
    encoded = DeflateCodec(3).encode(b"hello")
    assert zlib.decompressobj(-15).decompress(encoded) == b"hello"  # decodable at once, no header
    assert encoded.endswith(b"\x00\x00\xff\xff")  # the sync flush marker


@pytest.mark.parametrize("codec,garbage", [(SnappyCodec, b"\x05\x01\x00\x00x"),
                                           (SnappyCodec, b"\x00\x09\x00\x00\x00\x00\x00\x00garbage"),
                                           (DeflateCodec, b"\xff\xff\xff\xff")])
def test_garbage_is_a_compression_error(codec, garbage):
    with pytest.raises(CompressionError):
        codec().decode(garbage)
