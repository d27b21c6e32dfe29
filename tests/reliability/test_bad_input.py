"""Findings 4, 6 and 7: bad input gets NSQ's answer (or, where ours is
deliberately stricter, a clear one), at most one log line, never a
traceback, a 500 for a client's mistake, or the client's bytes echoed."""

import json
import socket
import struct

import pytest

from nsqpy.protocol import commands
from nsqpy.protocol.commands import MAX_LINE_LENGTH, encode_mpub_body
from tests.reliability.conftest import assert_no_traceback
from tests.support.wire import Closed, WireConn, http, http_json

pytestmark = pytest.mark.reliability


def raw_http(address: str, request: bytes) -> bytes:
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=15) as sock:
        sock.sendall(request)  # the server closes after an error (no half-close: aiohttp drops those)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_deeply_nested_identify_is_refused_in_one_line(shared_nsqd):
    with WireConn(shared_nsqd.tcp_hostport) as conn:
        conn.send(commands.encode_command(b"IDENTIFY", body=b'{"a":' * 2000 + b"1" + b"}" * 2000))
        error = conn.error()
        assert error.code == "E_BAD_BODY" and "nested too deeply" in error.description
        conn.expect_closed()
    assert_no_traceback(shared_nsqd)


def test_deeply_nested_config_value_is_invalid(shared_nsqd):
    url = f"{shared_nsqd.http_url}/config/nsqlookupd_tcp_addresses"
    assert http_json("PUT", url, b"[" * 5000) == (400, {"message": "INVALID_VALUE"})
    assert_no_traceback(shared_nsqd)


def test_client_id_with_invalid_utf8_is_accepted_as_go_does(shared_nsqd, topic):
    with WireConn(shared_nsqd.tcp_hostport) as conn:
        conn.send(commands.encode_command(b"IDENTIFY", body=b'{"client_id":"bad\xff\xfeid"}'))
        assert conn.response() == b"OK"
        conn.publish(topic, b"still fine")


def test_mpub_with_fewer_messages_than_its_count_is_a_bad_message(shared_nsqd, topic):
    body = struct.pack(">i", 3) + encode_mpub_body([b"a", b"b"])[4:]
    with WireConn(shared_nsqd.tcp_hostport) as conn:
        conn.send(b"MPUB " + topic.encode() + b"\n" + struct.pack(">i", len(body)) + body)
        error = conn.error()
        assert (error.code, error.description) == ("E_BAD_MESSAGE", "MPUB failed to read message(2) body size")


def test_http_binary_mpub_ignores_bytes_after_the_last_message(shared_nsqd, topic):
    body = encode_mpub_body([b"one", b"two"]) + b"trailing"
    status, _, answer = http("POST", f"{shared_nsqd.http_url}/mpub?topic={topic}&binary=true", body)
    assert (status, answer) == (200, b"OK")


@pytest.mark.parametrize("length, processed", [(MAX_LINE_LENGTH - 1, True), (MAX_LINE_LENGTH, False)])
def test_a_command_line_must_fit_nsqds_read_buffer_with_its_newline(shared_nsqd, length, processed):
    line = b"NOP" + b" " * (length - 3)
    with WireConn(shared_nsqd.tcp_hostport) as conn:
        conn.send(line + b"\n" + commands.identify({}))
        if processed:
            assert conn.response() == b"OK"
        else:
            conn.expect_closed()


@pytest.mark.parametrize("header, code", [
    (b"PUB bad*topic\n", "E_BAD_TOPIC"),
    (b"PUB\n", "E_INVALID"),
    (b"DPUB fine_topic soon\n", "E_INVALID"),
    (b"DPUB fine_topic 99999999999\n", "E_INVALID"),
    (b"MPUB bad*topic\n", "E_BAD_TOPIC"),
])
def test_bad_parameters_are_refused_before_the_body_arrives(shared_nsqd, header, code):
    with WireConn(shared_nsqd.tcp_hostport) as conn:
        conn.send(header + struct.pack(">i", 100) + b"only part of the body")
        # at once, not at the read deadline (twice the default 30 s heartbeat) that a wait for the body would hit
        assert conn.error(timeout=10).code == code
        conn.expect_closed(timeout=10)


def test_long_urls_are_accepted_as_go_does(shared_nsqd):
    status, _, body = http("GET", f"{shared_nsqd.http_url}/ping?pad={'x' * 20000}")
    assert (status, body) == (200, b"OK")


def test_unreadable_stats_flags_mean_the_default(shared_nsqd):
    status, data = http_json("GET", f"{shared_nsqd.http_url}/stats?format=json&include_clients=maybe")
    assert status == 200 and "producers" in data


@pytest.mark.parametrize("request_bytes", [
    b"G\x01T /ping HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /ping HTTP/1.1\r\nHost: x\r\nBad Header Line ECHOME\r\n\r\n",
    b"POST /pub?topic=t HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzzECHOME\r\n",
    b"GET /" + b"ECHOME" * 200_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    b"ECHOME\r\n\r\n",
])
def test_malformed_http_costs_one_line_and_echoes_nothing(nsqd, request_bytes):
    answer = raw_http(nsqd.http_address, request_bytes)
    status = int(answer.split(b" ", 2)[1])
    assert 400 <= status < 500, answer[:200]
    assert b"ECHOME" not in answer and b"\x01" not in answer
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["message"]
    nsqd.wait_for_log("HTTP: bad request")
    assert len([line for line in nsqd.log_lines if "ERROR" in line]) == 1
    assert_no_traceback(nsqd)
