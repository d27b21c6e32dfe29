"""Fuzzing nsqd's V2 protocol: mutated valid sessions (seeded) and
hypothesis-built command streams, each on its own short connection, while a
healthy producer and consumer run on others. Afterwards the daemon is up,
the healthy consumer got every message once, /stats holds no negative count
and no message in flight, and the log holds no traceback."""

import json
import struct

import pytest
from hypothesis import strategies as st

from nsqpy.protocol import commands
from nsqpy.protocol.frames import MAGIC_V2
from tests.reliability.conftest import assert_no_traceback
from tests.reliability.fuzzing import Mutator, nested_json, play_all, play_generated
from tests.reliability.healthy import HealthyTraffic, assert_stats_consistent

pytestmark = pytest.mark.reliability

MUTATED_CASES = 18_000
HYPOTHESIS_CASES = 2_500
SEED = 11

ID = b"0123456789abcdef"
TOPICS = ["fz_a", "fz_b#ephemeral", "fz_c"]


def _session(*parts: bytes) -> bytes:
    return b"".join(parts)


def v2_corpus() -> list[bytes]:
    identify_bodies = [
        {}, {"client_id": "fz", "hostname": "h", "user_agent": "fuzz/1"},
        {"feature_negotiation": True, "heartbeat_interval": 1000, "output_buffer_size": 16384,
         "output_buffer_timeout": 250, "msg_timeout": 5000, "sample_rate": 10},
        {"feature_negotiation": True, "snappy": True}, {"feature_negotiation": True, "deflate": True,
                                                        "deflate_level": 3},
        {"heartbeat_interval": -1}, {"tls_v1": True, "feature_negotiation": True},
        {"client_id": [["fz"]], "user_agent": {"a": {"b": None}}},
    ]
    corpus = [commands.identify(body) for body in identify_bodies]
    corpus += [
        _session(commands.sub("fz_a", "ch"), commands.rdy(10), commands.fin(ID), commands.req(ID, 100),
                 commands.touch(ID), commands.NOP, commands.CLS),
        _session(commands.pub("fz_a", b"hello"), commands.pub("fz_b#ephemeral", b"x" * 300)),
        _session(commands.mpub("fz_c", [b"one", b"two", b"three"]), commands.NOP),
        _session(commands.dpub("fz_a", 50, b"later"), commands.dpub("fz_c", 0, b"now")),
        _session(commands.identify({"feature_negotiation": True}), commands.sub("fz_c", "ch#ephemeral"),
                 commands.rdy(2500), commands.NOP),
        _session(commands.auth(b"secret"), commands.pub("fz_a", b"after auth")),
        _session(commands.sub("fz_a", "ch"), commands.rdy(1), b"REQ " + ID + b" -1\n", b"RDY 99999999\n"),
        _session(commands.pub("fz_c", b"y" * 2000), commands.sub("fz_c", "ch2"), commands.rdy(5)),
    ]
    return corpus


@pytest.fixture
def fuzzed_nsqd(start_nsqd):
    # short in-flight timeouts, so messages fuzz clients took come back quickly
    return start_nsqd("--msg-timeout=2s", "--max-msg-size=65536", "--max-body-size=262144")



names = st.sampled_from([*TOPICS, "", "bad*name", "x" * 65, "fz_a#ephemeral"])
int32s = st.one_of(st.integers(-10, 5000), st.sampled_from([2**31 - 1, -(2**31)]))
numbers = st.one_of(int32s, st.just(10**12))  # as text: one past what any field holds
identify_values = st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=20), st.lists(st.integers(), max_size=3))
identify_keys = st.sampled_from(["client_id", "hostname", "user_agent", "feature_negotiation", "heartbeat_interval",
                                 "output_buffer_size", "output_buffer_timeout", "msg_timeout", "sample_rate",
                                 "snappy", "deflate", "deflate_level", "tls_v1", "long_id", "short_id"])
v2_commands = st.one_of(
    st.dictionaries(identify_keys, identify_values, max_size=6).map(
        lambda body: commands.encode_command(b"IDENTIFY", body=json.dumps(body).encode())),
    st.tuples(names, names).map(lambda tc: commands.sub(*tc)),
    numbers.map(lambda n: b"RDY %d\n" % n),
    st.sampled_from([b"FIN", b"REQ", b"TOUCH"]).flatmap(
        lambda name: st.tuples(st.binary(max_size=20), numbers).map(
            lambda args: name + b" " + args[0] + (b" %d" % args[1] if name == b"REQ" else b"") + b"\n")),
    st.tuples(names, st.binary(max_size=100)).map(lambda tb: commands.pub(tb[0], tb[1])),
    st.tuples(names, numbers, st.binary(min_size=1, max_size=50)).map(lambda a: commands.dpub(*a)),
    st.tuples(names, st.lists(st.binary(max_size=30), max_size=5), int32s).map(
        lambda a: b"MPUB " + a[0].encode() + b"\n" + struct.pack(">i", len(commands.encode_mpub_body(a[1])))
        + struct.pack(">i", a[2]) + commands.encode_mpub_body(a[1])[4:]),
    st.tuples(st.sampled_from([b"PUB", b"MPUB", b"DPUB", b"IDENTIFY", b"AUTH"]), names, int32s,
              st.binary(max_size=40)).map(
        lambda a: a[0] + b" " + a[1].encode() + b"\n" + struct.pack(">i", a[2]) + a[3]),
    st.sampled_from([commands.NOP, commands.CLS, b"\n", b" \n", b"\r\n"]),
    st.binary(max_size=64),
    nested_json.map(lambda body: commands.encode_command(b"IDENTIFY", body=body)),
)


def test_nsqd_survives_20000_fuzzed_v2_sessions(fuzzed_nsqd, topic):
    address = fuzzed_nsqd.tcp_hostport
    with HealthyTraffic(fuzzed_nsqd, topic) as healthy:
        report = play_all(address, Mutator(v2_corpus(), SEED).cases(MUTATED_CASES), prefix=MAGIC_V2)
        play_generated(address, MAGIC_V2, st.lists(v2_commands, min_size=1, max_size=8), HYPOTHESIS_CASES)
    print(f"V2 fuzz: {report['cases']:,} mutated + {HYPOTHESIS_CASES:,} hypothesis cases; "
          f"healthy traffic: {len(healthy.published):,} messages")
    assert report["cases"] == MUTATED_CASES
    assert report["hung"] == 0, report["problems"]
    assert fuzzed_nsqd.process.poll() is None
    healthy.check()
    assert_stats_consistent(fuzzed_nsqd)
    assert_no_traceback(fuzzed_nsqd)
