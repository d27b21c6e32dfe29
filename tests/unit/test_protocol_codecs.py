"""The sans-IO codecs, driven with bytes (h11 style), property-based."""

import json
import struct

import pytest
from hypothesis import given, settings, strategies as st

from nsqpy.protocol import commands as cmd
from nsqpy.protocol.commands import ABORT, encode_mpub_body, parse_base10, parse_mpub_body, v2_reader
from nsqpy.protocol.errors import ProtocolError
from nsqpy.protocol.frames import FrameReader, encode_frame
from nsqpy.protocol.identify import ClientSettings, IdentifyPolicy, identify_response, negotiate
from nsqpy.protocol.message import decode_message, encode_message, message_frame_header
from nsqpy.protocol.names import is_valid_name

names = st.from_regex(r"[.a-zA-Z0-9_-]{1,54}(#ephemeral)?", fullmatch=True)
bodies = st.binary(min_size=1, max_size=300)
message_ids = st.from_regex(r"[0-9a-f]{16}", fullmatch=True).map(str.encode)

POLICY = IdentifyPolicy(version="1.3.0", max_rdy_count=2500, max_heartbeat_interval=60000,
                        max_output_buffer_size=65536, default_output_buffer_timeout=250,
                        min_output_buffer_timeout=25, max_output_buffer_timeout=30000,
                        default_msg_timeout=60000, max_msg_timeout=900000)


def split_feed(reader, data: bytes, cuts: list[int]):
    """Feed ``data`` in pieces cut at ``cuts``; the result must not depend on them."""
    out, last = [], 0
    for cut in sorted(set(c % (len(data) + 1) for c in cuts)) + [len(data)]:
        out.extend(reader.feed(data[last:cut]))
        last = cut
    return out


@given(st.lists(st.one_of(
    st.tuples(st.just("pub"), names, bodies),
    st.tuples(st.just("mpub"), names, st.lists(bodies, min_size=1, max_size=5)),
    st.tuples(st.just("dpub"), names, st.integers(0, 3600000), bodies),
    st.tuples(st.just("sub"), names, names),
    st.tuples(st.just("rdy"), st.integers(0, 2500)),
    st.tuples(st.just("fin"), message_ids),
    st.tuples(st.just("req"), message_ids, st.integers(0, 10**6)),
    st.tuples(st.just("touch"), message_ids),
    st.tuples(st.just("identify"), st.dictionaries(st.sampled_from(["client_id", "hostname"]), st.text())),
), min_size=1, max_size=10), st.lists(st.integers(0, 10**6), max_size=8))
def test_commands_round_trip_through_the_reader_whatever_the_chunking(items, cuts):
    wire = b""
    expected = []
    for kind, *args in items:
        if kind == "mpub":
            wire += cmd.mpub(args[0], args[1])
            expected.append((b"MPUB", [args[0].encode()], encode_mpub_body(args[1])))
        elif kind == "identify":
            wire += cmd.identify(args[0])
            expected.append((b"IDENTIFY", [], json.dumps(args[0]).encode()))
        else:
            wire += getattr(cmd, kind)(*args)
            name = kind.upper().encode()
            if kind in ("pub", "dpub"):
                params = [a if isinstance(a, bytes) else str(a).encode() for a in args[:-1]]
                expected.append((name, params, args[-1]))
            else:
                params = [a if isinstance(a, bytes) else str(a).encode() for a in args]
                expected.append((name, params, b""))
    reader = v2_reader(max_msg_size=1 << 20, max_body_size=5 << 20)
    parsed = split_feed(reader, wire, cuts)
    assert [(c.name, c.params[1:], c.body) for c in parsed] == expected
    assert all(c.body_error is None for c in parsed)


@settings(max_examples=300)
@given(st.binary(max_size=400), st.lists(st.integers(0, 500), max_size=6))
def test_reader_never_raises_on_garbage(data, cuts):
    reader = v2_reader(max_msg_size=100, max_body_size=200)
    for command in split_feed(reader, data, cuts):
        assert command is ABORT or isinstance(command.name, bytes)


def test_reader_refuses_oversized_bodies_before_reading_them():
    reader = v2_reader(max_msg_size=10, max_body_size=20)
    (command,) = reader.feed(b"PUB t\n" + struct.pack(">i", 11))
    assert command.body == b""
    assert (command.body_error.code, command.body_error.description) == \
        ("E_BAD_MESSAGE", "PUB message too big 11 > 10")
    assert reader.feed(b"anything after is ignored\n") == []


def test_reader_aborts_on_an_over_long_line():
    reader = v2_reader(max_msg_size=10, max_body_size=20)
    assert reader.feed(b"NOP\n" + b"x" * 20000)[-1] is ABORT


def test_a_line_and_its_newline_must_fit_nsqds_buffer():
    reader = v2_reader(max_msg_size=10, max_body_size=20)
    assert reader.feed(b"NOP" + b" " * (cmd.MAX_LINE_LENGTH - 4) + b"\n")[0].name == b"NOP"
    assert reader.feed(b"NOP" + b" " * (cmd.MAX_LINE_LENGTH - 3) + b"\n") == [ABORT]


@pytest.mark.parametrize("line", [b"PUB bad*topic\n", b"PUB\n", b"DPUB t soon\n", b"DPUB t 3600001\n",
                                  b"MPUB \n"])
def test_bad_body_command_parameters_do_not_wait_for_the_body(line):
    reader = v2_reader(max_msg_size=100, max_body_size=200, max_defer_ms=3_600_000)
    (command,) = reader.feed(line + struct.pack(">i", 50))
    assert command.body == b"" and command.body_error is None  # the handler refuses the parameters


def test_topics_a_connection_named_before_do_not_let_a_bad_name_through():
    """The reader remembers the valid topic names a connection used (a
    bounded few), never a refused one: a bad name after a hundred good ones
    is still refused before its body."""
    reader = v2_reader(max_msg_size=100, max_body_size=200)
    for index in range(100):
        for _ in range(2):
            (command,) = reader.feed(b"PUB t%d\n" % index + struct.pack(">i", 1) + b"x")
            assert command.body == b"x"
    for _ in range(2):
        (command,) = reader.feed(b"PUB bad*topic\n")
        assert command.body == b""


@pytest.mark.parametrize("cut, expected", [
    (b"PUB t\n", ("E_BAD_MESSAGE", "PUB failed to read message body size")),
    (b"PUB t\n\x00\x00\x00\x05ab", ("E_BAD_MESSAGE", "PUB failed to read message body")),
    (b"IDENTIFY\n\x00", ("E_BAD_BODY", "IDENTIFY failed to read body size")),
    (b"MPUB t\n" + struct.pack(">i", 50), ("E_BAD_BODY", "MPUB failed to read message count")),
    (b"MPUB t\n" + struct.pack(">ii", 50, 2) + struct.pack(">i", 1) + b"a\x00",
     ("E_BAD_MESSAGE", "MPUB failed to read message(1) body size")),
    (b"MPUB t\n" + struct.pack(">iii", 50, 2, 9) + b"abc", ("E_BAD_MESSAGE", "MPUB failed to read message(0) body")),
    (b"NOP\nPUB t", None),
    (b"NOP\n", None),
])
def test_a_stream_cut_inside_a_body_gets_nsqds_error(cut, expected):
    reader = v2_reader(max_msg_size=100, max_body_size=200)
    reader.feed(cut)
    error = reader.truncation_error()
    assert (error and (error.code, error.description)) == expected


def test_mpub_with_a_message_missing_its_size_is_a_bad_message():
    body = struct.pack(">i", 2) + struct.pack(">i", 1) + b"a"
    with pytest.raises(ProtocolError) as raised:
        parse_mpub_body(body, 100, 200)
    assert raised.value.code == "E_BAD_MESSAGE"


def test_mpub_body_may_carry_trailing_bytes_when_not_exact():
    body = encode_mpub_body([b"a", b"b"]) + b"tail"
    assert parse_mpub_body(body, 100, 200, exact=False) == [b"a", b"b"]
    with pytest.raises(ProtocolError):
        parse_mpub_body(body, 100, 200)


def test_reader_joins_a_large_body_once():
    reader = v2_reader(max_msg_size=1 << 20, max_body_size=5 << 20)
    body = bytes(range(256)) * 4000
    wire = cmd.pub("t", body)
    commands = []
    for i in range(0, len(wire), 1000):
        commands.extend(reader.feed(wire[i:i + 1000]))
    assert [c.body for c in commands] == [body]


@given(st.lists(bodies, min_size=1, max_size=20))
def test_mpub_body_round_trip(messages):
    assert parse_mpub_body(encode_mpub_body(messages), 1000, 100000) == messages


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_mpub_body_garbage_is_a_protocol_error(data):
    try:
        result = parse_mpub_body(data, 50, 150)
    except ProtocolError as error:
        assert error.code in ("E_BAD_BODY", "E_BAD_MESSAGE") and error.fatal
    else:
        assert encode_mpub_body(result) == data


@given(st.integers(-(2**63), 2**63 - 1), st.integers(0, 65535), message_ids, st.binary(max_size=100))
def test_message_layout_round_trip(timestamp, attempts, message_id, body):
    encoded = encode_message(timestamp, attempts, message_id, body)
    assert decode_message(encoded) == (timestamp, attempts, message_id, body)
    frame = message_frame_header(timestamp, attempts, message_id, len(body)) + body
    assert FrameReader().feed(frame) == [(2, encoded)]


def test_message_too_short_is_a_protocol_error():
    with pytest.raises(ProtocolError):
        decode_message(b"short")


@given(st.lists(st.tuples(st.integers(0, 2), st.binary(max_size=50)), max_size=10),
       st.lists(st.integers(0, 1000), max_size=6))
def test_frames_round_trip_whatever_the_chunking(frames, cuts):
    wire = b"".join(encode_frame(t, d) for t, d in frames)
    reader = FrameReader()
    out, last = [], 0
    for cut in sorted(set(c % (len(wire) + 1) for c in cuts)) + [len(wire)]:
        out.extend(reader.feed(wire[last:cut]))
        last = cut
    assert out == frames


def test_frame_reader_rejects_a_corrupt_size():
    with pytest.raises(ProtocolError):
        FrameReader().feed(struct.pack(">ii", 2, 0))


@given(st.text(max_size=70))
def test_name_rule(name):
    import re
    expected = 0 < len(name) <= 64 and re.fullmatch(r"[.a-zA-Z0-9_-]+(#ephemeral)?", name) is not None
    assert is_valid_name(name) == expected


def test_parse_base10_is_digits_only():
    assert parse_base10(b"123") == 123 and parse_base10(b"") == 0
    for bad in (b"-1", b"+1", b"1.0", b"x", b" 1"):
        with pytest.raises(ValueError):
            parse_base10(bad)


@settings(max_examples=300)
@given(st.one_of(st.binary(max_size=100), st.dictionaries(
    st.sampled_from(["heartbeat_interval", "output_buffer_size", "output_buffer_timeout", "sample_rate",
                     "msg_timeout", "feature_negotiation", "deflate", "deflate_level", "client_id"]),
    st.one_of(st.integers(-2, 10**6), st.booleans(), st.text(max_size=5), st.none()),
).map(lambda d: json.dumps(d).encode())))
def test_identify_negotiation_never_crashes(body):
    try:
        settings_ = negotiate(body, POLICY, ClientSettings())
    except ProtocolError as error:
        assert error.code == "E_BAD_BODY"
    else:
        assert json.loads(identify_response(settings_, POLICY))["max_rdy_count"] == 2500


def test_identify_special_values():
    s = negotiate(b'{"heartbeat_interval":-1,"output_buffer_size":-1,"output_buffer_timeout":100}',
                  POLICY, ClientSettings())
    assert (s.heartbeat_interval, s.output_buffer_size, s.output_buffer_timeout) == (0, 1, 0)
    s = negotiate(b'{"heartbeat_interval":0,"output_buffer_timeout":-1}', POLICY, ClientSettings())
    assert (s.heartbeat_interval, s.output_buffer_timeout) == (30000, 0)


@given(st.lists(st.text(alphabet="0123456789abcdef", min_size=16, max_size=16).map(str.encode), max_size=50))
def test_fin_many_is_the_fins_back_to_back_and_reads_back(ids):
    wire = cmd.fin_many(ids)
    assert wire == b"".join(cmd.fin(i) for i in ids)
    reader = v2_reader(1 << 20, 5 << 20)
    assert [c.params for c in reader.feed(wire)] == [[b"FIN", i] for i in ids]
