"""The V2 protocol against a real nsqd: every command, and every error with
its code and its fatal (connection closed) or non-fatal behaviour."""

import json
import socket
import struct

import pytest

from nsqpy.protocol import commands as cmd
from nsqpy.protocol.commands import encode_command
from nsqpy.protocol.frames import FRAME_TYPE_ERROR
from tests.support.wire import WireConn


def conn(daemon, **kw) -> WireConn:
    return WireConn(daemon.tcp_hostport, **kw)


def assert_fatal(c: WireConn, code: str, text: str | None = None):
    error = c.error()
    assert error.code == code, error
    if text is not None:
        assert text in error.description, error
    c.expect_closed()


def test_bad_magic_gets_E_BAD_PROTOCOL_and_close(shared_nsqd):
    with conn(shared_nsqd, magic=b"  V1") as c:
        assert_fatal(c, "E_BAD_PROTOCOL")


def test_identify_with_negotiation_returns_nsq_fields(shared_nsqd):
    with conn(shared_nsqd) as c:
        data = c.identify(feature_negotiation=True, client_id="x", heartbeat_interval=5000,
                          output_buffer_size=1024, output_buffer_timeout=50, msg_timeout=3000,
                          sample_rate=10, tls_v1=True, short_id="old")
        assert data == {
            "max_rdy_count": 2500, "version": "1.3.0", "max_msg_timeout": 900000, "msg_timeout": 3000,
            "tls_v1": False, "deflate": False, "deflate_level": 6, "max_deflate_level": 6,
            "snappy": False, "sample_rate": 10, "auth_required": False,
            "output_buffer_size": 1024, "output_buffer_timeout": 50,
        }


def test_identify_without_negotiation_answers_ok(shared_nsqd):
    with conn(shared_nsqd) as c:
        assert c.identify(client_id="plain") == b"OK"


@pytest.mark.parametrize("settings,text", [
    ({"heartbeat_interval": 999}, "heartbeat interval (999) is invalid"),
    ({"heartbeat_interval": 60001}, "heartbeat interval (60001) is invalid"),
    ({"output_buffer_size": 63}, "output buffer size (63) is invalid"),
    ({"output_buffer_timeout": 10}, "output buffer timeout (10) is invalid"),
    ({"sample_rate": 100}, "sample rate (100) is invalid"),
    ({"msg_timeout": 999}, "msg timeout (999) is invalid"),
    ({"heartbeat_interval": "1000"}, "failed to decode JSON body"),
    ({"feature_negotiation": 1}, "failed to decode JSON body"),
])
def test_identify_rejects_invalid_settings(shared_nsqd, settings, text):
    with conn(shared_nsqd) as c:
        c.send(cmd.identify(settings))
        assert_fatal(c, "E_BAD_BODY", text)


def test_identify_rejects_non_json_and_bad_sizes(shared_nsqd):
    with conn(shared_nsqd) as c:
        c.send(encode_command(b"IDENTIFY", body=b"{not json"))
        assert_fatal(c, "E_BAD_BODY", "failed to decode JSON body")
    with conn(shared_nsqd) as c:
        c.send(b"IDENTIFY\n" + struct.pack(">i", 0))
        assert_fatal(c, "E_BAD_BODY", "IDENTIFY invalid body size 0")
    with conn(shared_nsqd) as c:
        c.send(b"IDENTIFY\n" + struct.pack(">i", 5242881))
        assert_fatal(c, "E_BAD_BODY", "IDENTIFY body too big 5242881 > 5242880")


def test_identify_after_sub_is_invalid(shared_nsqd, topic):
    with conn(shared_nsqd) as c:
        c.subscribe(topic, "ch")
        c.send(cmd.identify({}))
        assert_fatal(c, "E_INVALID", "cannot IDENTIFY in current state")


def test_unknown_command(shared_nsqd):
    with conn(shared_nsqd) as c:
        c.send(b"FOO bar\n")
        assert_fatal(c, "E_INVALID", "invalid command FOO")


def test_auth_is_disabled(shared_nsqd):
    with conn(shared_nsqd) as c:
        c.send(cmd.auth(b"secret"))
        assert_fatal(c, "E_AUTH_DISABLED", "AUTH disabled")


@pytest.mark.parametrize("line,code,text", [
    (b"SUB\n", "E_INVALID", "SUB insufficient number of parameters"),
    (b"SUB onlytopic\n", "E_INVALID", "SUB insufficient number of parameters"),
    (b"SUB bad*topic ch\n", "E_BAD_TOPIC", 'SUB topic name "bad*topic" is not valid'),
    (b"SUB " + b"t" * 65 + b" ch\n", "E_BAD_TOPIC", "is not valid"),
    (b"SUB good bad:channel\n", "E_BAD_CHANNEL", 'SUB channel name "bad:channel" is not valid'),
])
def test_sub_errors(shared_nsqd, line, code, text):
    with conn(shared_nsqd) as c:
        c.send(line)
        assert_fatal(c, code, text)


def test_second_sub_is_invalid(shared_nsqd, topic):
    with conn(shared_nsqd) as c:
        c.subscribe(topic, "a")
        c.send(cmd.sub(topic, "b"))
        assert_fatal(c, "E_INVALID", "cannot SUB in current state")


def test_sub_with_heartbeats_disabled_is_invalid(shared_nsqd, topic):
    with conn(shared_nsqd) as c:
        c.identify(heartbeat_interval=-1)
        c.send(cmd.sub(topic, "ch"))
        assert_fatal(c, "E_INVALID", "cannot SUB with heartbeats disabled")


def test_rdy_before_sub_is_invalid(shared_nsqd):
    with conn(shared_nsqd) as c:
        c.send(cmd.rdy(1))
        assert_fatal(c, "E_INVALID", "cannot RDY in current state")


@pytest.mark.parametrize("name", ["FIN", "REQ", "TOUCH"])
def test_in_flight_commands_before_sub_are_invalid(shared_nsqd, name):
    with conn(shared_nsqd) as c:
        c.send(f"{name} 0123456789abcdef 0\n".encode())
        assert_fatal(c, "E_INVALID", f"cannot {name} in current state")


@pytest.mark.parametrize("line,text", [
    (b"RDY -1\n", "RDY could not parse count -1"),
    (b"RDY x\n", "RDY could not parse count x"),
    (b"RDY 2501\n", "RDY count 2501 out of range 0-2500"),
    (b"FIN\n", "FIN insufficient number of params"),
    (b"FIN short\n", "invalid message ID"),
    (b"REQ 0123456789abcdef\n", "REQ insufficient number of params"),
    (b"REQ 0123456789abcdef -5\n", "REQ could not parse timeout -5"),
    (b"TOUCH\n", "TOUCH insufficient number of params"),
])
def test_bad_params_of_a_subscriber_are_fatal(shared_nsqd, topic, line, text):
    with conn(shared_nsqd) as c:
        c.subscribe(topic, "ch")
        c.send(line)
        assert_fatal(c, "E_INVALID", text)


@pytest.mark.parametrize("name,code", [("FIN", "E_FIN_FAILED"), ("REQ", "E_REQ_FAILED"),
                                       ("TOUCH", "E_TOUCH_FAILED")])
def test_unknown_message_id_is_not_fatal(shared_nsqd, topic, name, code):
    with conn(shared_nsqd) as c:
        c.subscribe(topic, "ch", rdy=1)
        c.send(f"{name} 0123456789abcdef 0\n".encode())
        error = c.error()
        assert error.code == code
        assert error.description == f"{name} 0123456789abcdef failed ID not in flight"
        # the connection still works
        c.publish(topic, b"after")
        message = c.message()
        assert message.body == b"after"


def test_fin_of_another_clients_message_says_so(shared_nsqd, topic):
    with conn(shared_nsqd) as a, conn(shared_nsqd) as b:
        a.subscribe(topic, "ch", rdy=1)
        b.subscribe(topic, "ch")
        b.publish(topic, b"m")
        message = a.message()
        b.send(cmd.fin(message.id))
        error = b.error()
        assert error.code == "E_FIN_FAILED"
        assert "client does not own message" in error.description


@pytest.mark.parametrize("line,body,code,text", [
    (b"PUB\n", None, "E_INVALID", "PUB insufficient number of parameters"),
    (b"PUB bad$topic\n", b"x", "E_BAD_TOPIC", 'PUB topic name "bad$topic" is not valid'),
    (b"PUB ok\n", b"", "E_BAD_MESSAGE", "PUB invalid message body size 0"),
    (b"DPUB ok\n", b"x", "E_INVALID", "DPUB insufficient number of parameters"),
    (b"DPUB ok x\n", b"x", "E_INVALID", "DPUB could not parse timeout x"),
    (b"DPUB ok 3600001\n", b"x", "E_INVALID", "DPUB timeout 3600001 out of range 0-3600000"),
    (b"MPUB\n", None, "E_INVALID", "MPUB insufficient number of parameters"),
    (b"MPUB bad$topic\n", b"x", "E_BAD_TOPIC", 'E_BAD_TOPIC MPUB topic name "bad$topic" is not valid'),
    (b"MPUB ok\n", struct.pack(">i", 0), "E_BAD_BODY", "MPUB invalid message count 0"),
    (b"MPUB ok\n", struct.pack(">ii", 1, 0), "E_BAD_MESSAGE", "MPUB invalid message(0) body size 0"),
])
def test_publish_errors(shared_nsqd, line, body, code, text):
    with conn(shared_nsqd) as c:
        c.send(line + (b"" if body is None else struct.pack(">i", len(body)) + body))
        assert_fatal(c, code, text)


@pytest.mark.parametrize("name,quoted", [  # as Go's nsqd v1.3.0 answers (its %q)
    ("h\u00e9llo".encode(), '"h\u00e9llo"'.encode()),  # UTF-8 as it came, not encoded twice
    ("\U0001F600\U000E0001".encode(), '"\U0001F600\\U000e0001"'.encode()),
    (b"a\xffb", b'"a\\xffb"'),
    (b"\xed\xa0\x80\xe2\x80", b'"\\xed\\xa0\\x80\\xe2\\x80"'),  # a surrogate, a cut sequence: not UTF-8
    (b'a"b\\', b'"a\\"b\\\\"'),
    (b"a\x01b\x7f\t\x0b", b'"a\\x01b\\x7f\\t\\v"'),
    ("a\u200bb\u00a0".encode(), b'"a\\u200bb\\u00a0"'),
])
@pytest.mark.parametrize("command,body,prefix", [
    (b"PUB %s\n", struct.pack(">i", 1) + b"x", b"E_BAD_TOPIC PUB"),
    (b"DPUB %s 0\n", struct.pack(">i", 1) + b"x", b"E_BAD_TOPIC DPUB"),
    (b"MPUB %s\n", struct.pack(">iii", 9, 1, 1) + b"x", b"E_BAD_TOPIC E_BAD_TOPIC MPUB"),  # sic, as nsqd
    (b"SUB %s ch\n", b"", b"E_BAD_TOPIC SUB"),
])
def test_bad_topic_name_is_quoted_byte_for_byte_as_nsqd_does(shared_nsqd, name, quoted, command, body, prefix):
    with conn(shared_nsqd) as c:
        c.send(command % name + body)
        assert c.read_frame() == (FRAME_TYPE_ERROR, prefix + b" topic name " + quoted + b" is not valid")
        c.expect_closed()


def test_bad_channel_name_is_quoted_as_nsqd_does(shared_nsqd):
    with conn(shared_nsqd) as c:
        c.send("SUB good h\u00e9llo\n".encode())
        assert c.read_frame() == (FRAME_TYPE_ERROR, 'E_BAD_CHANNEL SUB channel name "h\u00e9llo" is not valid'.encode())
        c.expect_closed()


def test_message_too_big_is_refused_before_reading_it(shared_nsqd):
    with conn(shared_nsqd) as c:
        c.send(b"PUB big\n" + struct.pack(">i", 1048577))
        assert_fatal(c, "E_BAD_MESSAGE", "PUB message too big 1048577 > 1048576")
    with conn(shared_nsqd) as c:
        c.send(cmd.mpub("big", [b"x" * 1048577]))
        assert_fatal(c, "E_BAD_MESSAGE", "MPUB message too big 1048577 > 1048576")
    with conn(shared_nsqd) as c:
        c.send(b"MPUB big\n" + struct.pack(">i", 5242881))
        assert_fatal(c, "E_BAD_BODY", "MPUB body too big 5242881 > 5242880")


def test_pub_mpub_dpub_answer_ok_in_order(shared_nsqd, topic):
    with conn(shared_nsqd) as c:
        c.send(cmd.pub(topic, b"a") + cmd.mpub(topic, [b"b", b"c"]) + cmd.dpub(topic, 0, b"d") + cmd.NOP)
        for _ in range(3):
            c.expect_ok()
        c.subscribe(topic, "ch", rdy=10)
        assert sorted(m.body for m in c.messages(4)) == [b"a", b"b", b"c", b"d"]


def test_cls_answers_close_wait_and_stops_delivery(shared_nsqd, topic):
    with conn(shared_nsqd) as c:
        c.subscribe(topic, "ch", rdy=5)
        c.publish(topic, b"one")
        message = c.message()
        c.send(cmd.CLS)
        assert c.response() == b"CLOSE_WAIT"
        c.send(cmd.rdy(5))  # ignored while closing
        c.send(cmd.fin(message.id))  # still allowed while closing
        c.publish(topic, b"two")
        c.expect_nothing(0.3)
        c.send(cmd.CLS)
        assert_fatal(c, "E_INVALID", "cannot CLS in current state")


def test_line_longer_than_the_read_buffer_closes_without_error(shared_nsqd):
    with conn(shared_nsqd) as c:
        c.send(b"PUB " + b"x" * 20000)
        c.expect_closed()


def test_heartbeats_are_sent_and_silence_disconnects(shared_nsqd, topic):
    with conn(shared_nsqd) as c:
        c.identify(heartbeat_interval=1000)
        # heartbeats arrive on a producer connection too, as a ticker
        assert c.read_frame(10, skip_heartbeats=False) == (0, b"_heartbeat_")
        c.send(cmd.NOP)
        assert c.read_frame(10, skip_heartbeats=False) == (0, b"_heartbeat_")
        # then stop answering: after two intervals without a command the server closes
        c.expect_closed(timeout=15)


def test_identify_json_shape_is_what_go_nsq_reads(shared_nsqd):
    with conn(shared_nsqd) as c:
        c.send(cmd.identify({"feature_negotiation": True}))
        raw = c.response()
        assert raw.startswith(b"{")  # go-nsq tells JSON from OK by the first byte
        assert json.loads(raw)["max_rdy_count"] == 2500


def test_connection_close_mid_command_is_harmless(shared_nsqd, topic):
    with conn(shared_nsqd) as c:
        c.send(b"PUB " + topic.encode() + b"\n" + struct.pack(">i", 100) + b"partial")
    with conn(shared_nsqd) as c:
        c.publish(topic, b"fine")


@pytest.mark.parametrize("count", [1, 3])
def test_a_client_that_stops_sending_still_hears_every_answer(shared_nsqd, topic, count):
    """Answers wait for the end of the event loop's turn: a client that shuts
    its sending side right after its commands must still get all of them."""
    with conn(shared_nsqd) as c:
        c.send(b"".join(cmd.pub(topic, b"m%d" % i) for i in range(count)))
        c.sock.shutdown(socket.SHUT_WR)
        assert [c.response(timeout=10) for _ in range(count)] == [b"OK"] * count
        c.expect_closed(timeout=10)
