"""Fuzzing the HTTP APIs of nsqd and nsqlookupd: mutated valid requests (bad
methods, broken request lines and headers, wrong lengths, chunking, odd
queries and bodies) on short connections. Every answer is a complete HTTP
response below 500 that never repeats the marker the request carried; the
daemon stays up, healthy traffic is untouched, and the log holds no traceback."""

import re

import pytest

from tests.reliability.conftest import assert_no_traceback
from tests.reliability.fuzzing import Mutator, play_all
from tests.reliability.probes import hostport_of
from tests.reliability.healthy import HealthyTraffic, assert_stats_consistent
from tests.support.wire import http

pytestmark = pytest.mark.reliability

CASES = 4_000
SEED = 11
MARKER = b"QZXMARK"
_STATUS = re.compile(rb"^HTTP/\d\.\d (\d{3}) ")

NSQD_REQUESTS = [
    ("GET", "/ping", b""), ("GET", "/info", b""), ("GET", "/stats?format=json&include_clients=maybe", b""),
    ("GET", "/stats?topic=fz_a&channel=ch", b""), ("POST", "/pub?topic=fz_a", MARKER),
    ("POST", "/pub?topic=fz_a&defer=100", MARKER), ("POST", "/mpub?topic=fz_b", b"one\ntwo\n" + MARKER),
    ("POST", "/mpub?topic=fz_b&binary=true", b"\x00\x00\x00\x01\x00\x00\x00\x03abc"),
    ("POST", "/topic/create?topic=fz_c", b""), ("POST", "/topic/pause?topic=fz_c", b""),
    ("POST", "/topic/unpause?topic=fz_c", b""), ("POST", "/topic/empty?topic=fz_c", b""),
    ("POST", "/channel/create?topic=fz_c&channel=ch", b""), ("POST", "/channel/pause?topic=fz_c&channel=ch", b""),
    ("POST", "/channel/empty?topic=fz_c&channel=ch", b""), ("POST", "/channel/delete?topic=fz_c&channel=ch", b""),
    ("POST", "/topic/delete?topic=fz_c", b""), ("GET", "/config/mem_queue_size", b""),
    ("GET", "/config/..%2f..", b""), ("PUT", "/config/nsqlookupd_tcp_addresses", b"[[[[" + MARKER),
]
LOOKUPD_REQUESTS = [
    ("GET", "/ping", b""), ("GET", "/info", b""), ("GET", "/lookup?topic=fz_a", b""), ("GET", "/topics", b""),
    ("GET", "/channels?topic=fz_a", b""), ("GET", "/nodes", b""), ("GET", "/debug", b""),
    ("POST", "/topic/create?topic=fz_a", b""), ("POST", "/channel/create?topic=fz_a&channel=ch", b""),
    ("POST", "/channel/delete?topic=fz_a&channel=ch", b""), ("POST", "/topic/tombstone?topic=fz_a&node=x:1", b""),
    ("POST", "/topic/delete?topic=fz_a", b""),
]


def http_corpus(requests) -> list[bytes]:
    corpus = []
    for method, path, body in requests:
        marked = path + ("&" if "?" in path else "?") + "m=" + MARKER.decode()
        headers = f"Host: 127.0.0.1\r\nUser-Agent: fuzz {MARKER.decode()}\r\nConnection: close\r\n"
        corpus.append(f"{method} {marked} HTTP/1.1\r\n{headers}Content-Length: {len(body)}\r\n\r\n".encode() + body)
        chunked = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
        corpus.append(f"{method} {path} HTTP/1.1\r\n{headers}Transfer-Encoding: chunked\r\n\r\n".encode() + chunked)
    return corpus


def check_answer(case: bytes, answer: bytes) -> str | None:
    if not answer:
        return None  # closed without an answer (a request cut short by the half-close)
    match = _STATUS.match(answer)
    if match is None:
        return f"not an HTTP response: {answer[:120]!r} for {case[:200]!r}"
    if int(match.group(1)) >= 500:
        return f"{match.group(1).decode()} for {case[:300]!r}: {answer[:300]!r}"
    if MARKER in answer and int(match.group(1)) >= 400:
        return f"request bytes echoed: {answer[:300]!r}"
    return None


def test_nsqd_http_survives_fuzzed_requests(start_nsqd, topic):
    nsqd = start_nsqd("--max-msg-size=65536", "--max-body-size=262144")
    with HealthyTraffic(nsqd, topic) as healthy:
        report = play_all(hostport_of(nsqd.http_address),
                          Mutator(http_corpus(NSQD_REQUESTS), SEED).cases(CASES), check=check_answer)
    print(f"nsqd HTTP fuzz: {report['cases']:,} cases; healthy traffic: {len(healthy.published):,} messages")
    assert report["cases"] == CASES
    assert report["hung"] == 0 and not report["problems"], report["problems"]
    assert nsqd.process.poll() is None
    healthy.check()
    assert_stats_consistent(nsqd)
    assert_no_traceback(nsqd)


def test_nsqlookupd_http_survives_fuzzed_requests(start_lookupd):
    lookupd = start_lookupd()
    report = play_all(hostport_of(lookupd.http_address), Mutator(http_corpus(LOOKUPD_REQUESTS), SEED).cases(CASES),
                      check=check_answer)
    print(f"nsqlookupd HTTP fuzz: {report['cases']:,} cases")
    assert report["cases"] == CASES
    assert report["hung"] == 0 and not report["problems"], report["problems"]
    assert http("GET", f"{lookupd.http_url}/ping")[0] == 200
    assert_no_traceback(lookupd)
