"""Fuzzing nsqlookupd's V1 protocol (what nsqd speaks to it): mutated valid
sessions and hypothesis-built streams on short connections, while a healthy
peer stays registered. Afterwards the daemon is up, the healthy registration
is intact, nothing the fuzz registered outlives its connection, and the log
holds no traceback."""


import pytest
from hypothesis import strategies as st

from nsqpy.protocol import commands, lookup
from tests.reliability.conftest import assert_no_traceback
from tests.reliability.fuzzing import Mutator, nested_json, play_all, play_generated
from tests.support.wire import LookupConn, http_json, wait_until

pytestmark = pytest.mark.reliability

MAGIC_V1 = b"  V1"
MUTATED_CASES = 6_000
HYPOTHESIS_CASES = 1_000
SEED = 11

PEER = {"broadcast_address": "127.0.0.1", "tcp_port": 4150, "http_port": 4151, "version": "1.3.0",
        "hostname": "fuzz"}


def v1_corpus() -> list[bytes]:
    return [
        lookup.identify(PEER) + lookup.register("fz_a", "ch") + lookup.register("fz_b") + b"PING\n",
        lookup.identify(PEER) + lookup.unregister("fz_a", "ch") + lookup.unregister("fz_b"),
        b"PING\n" * 3,
        lookup.identify({**PEER, "tcp_port": -1}) + lookup.register("fz_c#ephemeral", "ch#ephemeral"),
        lookup.register("fz_a") + lookup.identify(PEER) + lookup.identify(PEER),
        b"IDENTIFY\n\x00\x00\x00\x02{}" + b"REGISTER fz_a ch extra\n",
    ]


stream_items = st.one_of(
    st.dictionaries(st.sampled_from([*PEER, "extra"]),
                    st.one_of(st.none(), st.integers(-5, 70000), st.text(max_size=20), st.booleans()),
                    max_size=6).map(lambda body: lookup.identify(body)),
    st.tuples(st.sampled_from(["REGISTER", "UNREGISTER"]),
              st.lists(st.sampled_from(["fz_a", "ch", "bad*name", "", "x" * 70, "fz_b#ephemeral"]), max_size=3))
    .map(lambda a: " ".join([a[0], *a[1]]).encode() + b"\n"),
    st.sampled_from([b"PING\n", b"\n", b"  \n", b"IDENTIFY\n"]),
    st.binary(max_size=64),
    nested_json.map(lambda body: commands.encode_command(b"IDENTIFY", body=body)),
)


def test_nsqlookupd_survives_fuzzed_v1_sessions(start_lookupd):
    lookupd = start_lookupd()
    address = lookupd.tcp_hostport
    with LookupConn(address) as healthy:
        healthy.request(lookup.identify({**PEER, "hostname": "healthy", "tcp_port": 5150}))
        assert healthy.request(lookup.register("healthy_topic", "healthy_channel")) == b"OK"
        report = play_all(address, Mutator(v1_corpus(), SEED).cases(MUTATED_CASES), prefix=MAGIC_V1)
        play_generated(address, MAGIC_V1, st.lists(stream_items, min_size=1, max_size=8), HYPOTHESIS_CASES)
        assert healthy.request(b"PING\n") == b"OK"
        _, found = http_json("GET", f"{lookupd.http_url}/lookup?topic=healthy_topic")
        assert [p["hostname"] for p in found["producers"]] == ["healthy"]
        assert found["channels"] == ["healthy_channel"]
        # what the fuzz registered went with its connections
        wait_until(lambda: all(p["hostname"] == "healthy"
                               for p in http_json("GET", f"{lookupd.http_url}/nodes")[1]["producers"]))
    print(f"V1 fuzz: {report['cases']:,} mutated + {HYPOTHESIS_CASES:,} hypothesis cases")
    assert report["cases"] == MUTATED_CASES
    assert report["hung"] == 0, report["problems"]
    assert lookupd.process.poll() is None
    assert_no_traceback(lookupd)
