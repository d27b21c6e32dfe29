"""nsq_to_nsq between real nsqd: JSON filters, modes, and FIN only once the
destination acknowledged."""

import json

import pytest

from tests.support.proxy import Proxy
from tests.tools.helpers import channel_stats, create_channel, drain, eventually, publish

FAST_RETRY = ["--consumer-opt=default_requeue_delay,100ms", "--consumer-opt=backoff_multiplier,10ms",
              "--consumer-opt=max_backoff_duration,100ms"]


def settled_source(nsqd, topic, finished: int):
    """Wait until ``finished`` messages are FINished at the source channel."""
    def check():
        stats = channel_stats(nsqd, topic, "nsq_to_nsq")
        done = stats and stats["message_count"] - stats["depth"] - stats["in_flight_count"] - stats["deferred_count"]
        return stats if done == finished else None
    return eventually(check)


def test_json_filters_between_two_nsqd(start_nsqd, topic, start_tool):
    source, destination = start_nsqd(), start_nsqd()
    create_channel(destination, "filtered", "c")
    documents = [{"kind": "keep", "n": 1, "secret": "s"}, {"kind": "drop", "n": 2}, {"kind": "keep", "n": 3.5},
                 {"kind": 5}, {"n": 4}]
    publish(source, topic, [json.dumps(d).encode() for d in documents] + [b"not json"])
    tool = start_tool("nsq_to_nsq", f"--topic={topic}", f"--nsqd-tcp-address={source.tcp_address}",
                      f"--destination-nsqd-tcp-address={destination.tcp_address}", "--destination-topic=filtered",
                      "--require-json-field=kind", "--require-json-value=keep", "--whitelist-json-field=n",
                      "--whitelist-json-field=kind", *FAST_RETRY)
    settled_source(source, topic, 5)  # all but {"n": 4}: its missing field backs off and stays
    assert tool.stop() == 0
    assert drain(destination, "filtered", "c") == [b'{"kind":"keep","n":1}', b'{"kind":"keep","n":3.5}']
    assert drain(source, topic, "nsq_to_nsq") == [b'{"n": 4}']
    assert b"missing field 'kind' to check required value" in tool.stderr


def test_numeric_required_value(start_nsqd, topic, start_tool):
    source, destination = start_nsqd(), start_nsqd()
    create_channel(destination, topic, "c")
    publish(source, topic, [b'{"v": 2}', b'{"v": 2.0}', b'{"v": "2"}', b'{"v": 3}', b'{"v": true}'])
    tool = start_tool("nsq_to_nsq", f"--topic={topic}", f"--nsqd-tcp-address={source.tcp_address}",
                      f"--destination-nsqd-tcp-address={destination.tcp_address}", "--require-json-field=v",
                      "--require-json-value=2")
    settled_source(source, topic, 5)
    assert tool.stop() == 0
    assert drain(destination, topic, "c") == [b'{"v": 2}', b'{"v": 2.0}', b'{"v": "2"}']


def test_round_robin_over_destinations_and_several_topics(start_nsqd, topic, start_tool):
    source = start_nsqd()
    destinations = [start_nsqd(), start_nsqd()]
    other = topic[:60] + "_b"
    for node in destinations:
        create_channel(node, topic, "c")
        create_channel(node, other, "c")
    publish(source, topic, [b"a%d" % i for i in range(100)])
    tool = start_tool("nsq_to_nsq", f"--topic={topic}", f"--topic={other}", f"--nsqd-tcp-address={source.tcp_address}",
                      *(f"--destination-nsqd-tcp-address={n.tcp_address}" for n in destinations),
                      "--mode=round-robin", "--producer-opt=client_id,bridge")
    settled_source(source, topic, 100)
    publish(source, other, [b"b"])
    settled_source(source, other, 1)
    assert tool.stop() == 0
    copies = [drain(node, topic, "c", quiet=0.5) for node in destinations]
    assert sorted(copies[0] + copies[1]) == sorted(b"a%d" % i for i in range(100))
    assert all(copies)  # both destinations had a share
    assert sum(len(drain(node, other, "c", quiet=0.5)) for node in destinations) == 1


def test_a_refusing_destination_keeps_the_message_at_the_source(start_nsqd, topic, start_tool):
    source, destination = start_nsqd(), start_nsqd("--max-msg-size=100")
    create_channel(destination, topic, "c")
    publish(source, topic, [b"small 1", b"x" * 500, b"small 2"])
    tool = start_tool("nsq_to_nsq", f"--topic={topic}", f"--nsqd-tcp-address={source.tcp_address}",
                      f"--destination-nsqd-tcp-address={destination.tcp_address}", *FAST_RETRY)
    settled_source(source, topic, 2)
    eventually(lambda: b"E_BAD_MESSAGE" in tool.stderr)
    assert tool.stop() == 0
    assert sorted(drain(destination, topic, "c")) == [b"small 1", b"small 2"]
    assert drain(source, topic, "nsq_to_nsq") == [b"x" * 500]
    assert b"Traceback" not in tool.stderr


@pytest.mark.parametrize("keyed", [True, False], ids=["publish-keys", "unkeyed"])
def test_killed_between_the_destinations_ok_and_the_source_fin(start_nsqd, topic, start_tool, keyed):
    """The FINs never reach the source (held by a proxy), nsq_to_nsq is
    killed -9, and a new one republishes what the source delivers again:
    with --publish-keys the destination queues each message once."""
    source, destination = start_nsqd(), start_nsqd()
    create_channel(destination, topic, "c")
    create_channel(source, topic, "nsq_to_nsq")
    bodies = [b"m%d" % i for i in range(100)]
    keys_flag = ["--publish-keys"] if keyed else []
    with Proxy(*source.tcp_hostport) as proxy:
        first = start_tool("nsq_to_nsq", f"--topic={topic}", f"--nsqd-tcp-address={proxy.address}",
                           f"--destination-nsqd-tcp-address={destination.tcp_address}", *keys_flag)
        eventually(lambda: channel_stats(source, topic, "nsq_to_nsq")["clients"])
        eventually(lambda: channel_stats(source, topic, "nsq_to_nsq")["clients"][0]["ready_count"] > 0)
        proxy.hold_requests()
        publish(source, topic, bodies)
        eventually(lambda: channel_stats(destination, topic, "c")["depth"] == len(bodies))
        first.kill()
    start_tool("nsq_to_nsq", f"--topic={topic}", f"--nsqd-tcp-address={source.tcp_address}",
               f"--destination-nsqd-tcp-address={destination.tcp_address}", *keys_flag)
    settled_source(source, topic, len(bodies))
    received = drain(destination, topic, "c")
    if keyed:
        assert sorted(received) == sorted(bodies)
    else:  # NSQ's at-least-once, which the keys take away
        assert sorted(received) == sorted(bodies * 2)
