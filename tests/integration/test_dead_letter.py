"""Dead-letter topics on a real nsqd, consumed by gnsq, a client that knows
nothing of them: a message requeued past max_attempts reaches the dead-letter
topic with its body; the policy is set by flag or HTTP, shown in /stats and
/metrics, and survives a restart in nsqd.dat."""

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from nsqpy.diskqueue import DiskQueue
from nsqpy.localcluster import nsqd_process
from nsqpy.nsqd.message import Message
from nsqpy.nsqd.storage import DUE_SIZE
from nsqpy.protocol import commands as cmd
from nsqpy.protocol.message import MESSAGE_HEADER_SIZE
from tests.support.wire import WireConn, http, http_json, wait_until

PEER = Path(__file__).parent / "peers" / "gnsq_dead_letter_peer.py"


@pytest.fixture
def topic(topic):
    """Short enough for ``<topic>.dead`` to be a valid name (64 characters at most)."""
    return topic[:48]


def run_failing_consumer(nsqd, topic: str, dead_topic: str, expected_dead: int) -> dict:
    result = subprocess.run([sys.executable, str(PEER), nsqd.tcp_address, topic, "ch", dead_topic,
                             str(expected_dead)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def channel_stats(nsqd, topic: str) -> dict:
    _, stats = http_json("GET", f"{nsqd.http_url}/stats?format=json&topic={topic}")
    return stats["topics"][0]["channels"][0]


def test_flag_default_sends_a_message_to_topic_dead_after_max_attempts(start_nsqd, topic):
    nsqd = start_nsqd("--max-attempts=3")
    assert http("POST", f"{nsqd.http_url}/topic/create?topic={topic}")[0] == 200
    assert http("POST", f"{nsqd.http_url}/channel/create?topic={topic}&channel=ch")[0] == 200
    for body in (b"poison-1", b"poison-2"):
        assert http("POST", f"{nsqd.http_url}/pub?topic={topic}", body)[0] == 200

    report = run_failing_consumer(nsqd, topic, f"{topic}.dead", 2)
    assert report["attempts"] == {"poison-1": [1, 2, 3], "poison-2": [1, 2, 3]}
    assert sorted(report["dead"]) == ["poison-1", "poison-2"]
    channel = channel_stats(nsqd, topic)
    assert (channel["dead_letter_count"], channel["max_attempts"], channel["dead_letter_topic"]) == (
        2, 3, f"{topic}.dead")
    assert (channel["depth"], channel["in_flight_count"], channel["requeue_count"]) == (0, 0, 6)
    _, metrics, body = http("GET", f"{nsqd.http_url}/metrics")
    assert f'nsqd_channel_dead_lettered_total{{topic="{topic}",channel="ch"}} 2\n'.encode() in body


def test_http_config_names_the_topic_and_survives_a_restart(start_nsqd, tmp_path, topic):
    data_path = tmp_path / "kept"
    nsqd = start_nsqd(data_path=data_path)
    url = nsqd.http_url
    assert http("POST", f"{url}/topic/create?topic={topic}")[0] == 200
    assert http("POST", f"{url}/channel/create?topic={topic}&channel=ch")[0] == 200
    assert http_json("GET", f"{url}/channel/config?topic={topic}&channel=ch") == (
        200, {"max_attempts": 0, "dead_letter_topic": f"{topic}.dead", "ttl_ms": 0, "expire_action": "drop",
              "max_depth": 0, "full_policy": "reject"})
    assert http_json("POST", f"{url}/channel/config?topic={topic}&channel=ch&max_attempts=2"
                             f"&dead_letter_topic=graveyard")[1]["max_attempts"] == 2
    wait_until(lambda: b'"max_attempts":2' in (data_path / "nsqd.dat").read_bytes())
    saved = json.loads((data_path / "nsqd.dat").read_bytes())
    [entry] = [t for t in saved["topics"] if t["name"] == topic]
    assert entry["channels"] == [{"name": "ch", "paused": False, "max_attempts": 2,
                                  "dead_letter_topic": "graveyard"}]
    nsqd.stop()

    nsqd = start_nsqd(data_path=data_path)
    _, config = http_json("GET", f"{nsqd.http_url}/channel/config?topic={topic}&channel=ch")
    assert (config["max_attempts"], config["dead_letter_topic"]) == (2, "graveyard")
    assert http("POST", f"{nsqd.http_url}/pub?topic={topic}", b"bad news")[0] == 200
    report = run_failing_consumer(nsqd, topic, "graveyard", 1)
    assert report["attempts"] == {"bad news": [1, 2]}
    assert report["dead"] == ["bad news"]


def test_max_attempts_zero_requeues_forever_as_nsq_does(nsqd, topic):
    assert http("POST", f"{nsqd.http_url}/topic/create?topic={topic}")[0] == 200
    assert http("POST", f"{nsqd.http_url}/channel/create?topic={topic}&channel=ch")[0] == 200
    assert http("POST", f"{nsqd.http_url}/pub?topic={topic}", b"again")[0] == 200
    assert http("POST", f"{nsqd.http_url}/pub?topic={topic}.dead", b"marker")[0] == 200
    report = run_failing_consumer(nsqd, topic, f"{topic}.dead", 1)  # reads the marker, then stops
    assert report["dead"] == ["marker"]
    assert len(report["attempts"]["again"]) >= 1
    assert channel_stats(nsqd, topic)["dead_letter_count"] == 0


@pytest.mark.parametrize("query,message", [
    ("max_attempts=-1", "INVALID_MAX_ATTEMPTS"),
    ("max_attempts=65536", "INVALID_MAX_ATTEMPTS"),
    ("max_attempts=three", "INVALID_MAX_ATTEMPTS"),
    ("dead_letter_topic=bad/name", "INVALID_DEAD_LETTER_TOPIC"),
    ("dead_letter_topic=x%23ephemeral", "INVALID_DEAD_LETTER_TOPIC"),
    ("dead_letter_topic={topic}", "INVALID_DEAD_LETTER_TOPIC"),
])
def test_bad_values_are_refused_with_nsq_style_codes(shared_nsqd, topic, query, message):
    url = shared_nsqd.http_url
    assert http("POST", f"{url}/topic/create?topic={topic}")[0] == 200
    assert http("POST", f"{url}/channel/create?topic={topic}&channel=ch")[0] == 200
    assert http_json("POST", f"{url}/channel/config?topic={topic}&channel=ch&{query.format(topic=topic)}") == (
        400, {"message": message})
    assert http_json("GET", f"{url}/channel/config?topic={topic}&channel=ch")[1]["max_attempts"] == 0


def test_a_bad_flag_is_one_line(start_nsqd):
    with pytest.raises(Exception) as failure:
        start_nsqd("--max-attempts=70000")
    assert "--max-attempts 70000 must be in [0, 65535]" in str(failure.value)


def test_a_topic_too_long_for_its_default_dead_letter_name_needs_one_named(start_nsqd, request):
    nsqd = start_nsqd("--max-attempts=3")
    long_topic = ("long_" + request.node.name)[:64].ljust(64, "x")
    url = nsqd.http_url
    assert http("POST", f"{url}/topic/create?topic={long_topic}")[0] == 200
    assert http("POST", f"{url}/channel/create?topic={long_topic}&channel=ch")[0] == 200
    assert http_json("GET", f"{url}/channel/config?topic={long_topic}&channel=ch")[1]["max_attempts"] == 0
    assert http_json("POST", f"{url}/channel/config?topic={long_topic}&channel=ch&max_attempts=5") == (
        400, {"message": "INVALID_DEAD_LETTER_TOPIC"})
    _, config = http_json("POST", f"{url}/channel/config?topic={long_topic}&channel=ch&max_attempts=5"
                                  "&dead_letter_topic=long.dead")
    assert (config["max_attempts"], config["dead_letter_topic"]) == (5, "long.dead")


def offline_queue(data_path, name: str, header: int = MESSAGE_HEADER_SIZE) -> DiskQueue:
    """A channel's disk queue opened as nsqd opens it, while nsqd is stopped."""
    return DiskQueue(name, str(data_path), max_bytes_per_file=100 * 1024 * 1024, min_msg_size=header,
                     max_msg_size=1024 * 1024 + header, sync_every=1)


@pytest.mark.parametrize("held_on", ["queue", "deferred"])
@pytest.mark.parametrize("copy_made", [True, False], ids=["copy-made", "copy-not-made"])
def test_a_dead_letter_cut_short_by_a_crash_is_settled_at_startup(tmp_path, copy_made, held_on):
    """The state kill -9 leaves between the copy to the dead-letter topic and
    the release at the source, made by hand: the message is dead-lettered
    exactly once after the restart, whether the copy was made or not, and
    whether its record is on the channel's queue or on its deferred queue (a
    deferred publish come due keeps its record there until it is done)."""
    data = tmp_path / "data"
    data.mkdir()
    flags = ("--mem-queue-size=0", "--sync-every=1", "--max-attempts=1")
    with nsqd_process(str(data), *flags) as daemon:
        for path in ("topic/create?topic=poison", "channel/create?topic=poison&channel=ch",
                     "topic/create?topic=poison.dead", "channel/create?topic=poison.dead&channel=dl"):
            assert http("POST", f"{daemon.http_url}/{path}")[0] == 200
        if held_on == "queue":
            assert http("POST", f"{daemon.http_url}/pub?topic=poison", b"poison-pill")[0] == 200
            with WireConn(daemon.tcp_hostport) as c:  # delivered once, then the consumer goes away
                c.subscribe("poison", "ch", rdy=1)
                assert c.message(timeout=15).attempts == 1
    # nsqd stopped; "ch" holds the message with one attempt: next dispatch dead-letters it
    if held_on == "queue":
        source = offline_queue(data, "poison:ch")
    else:  # a deferred publish, due long ago, delivered once
        source = offline_queue(data, "poison:ch#deferred", MESSAGE_HEADER_SIZE + DUE_SIZE)
        source.put(struct.pack(">q", 1) + Message(b"%016d" % 1, b"poison-pill", 1, attempts=1).encode())
    record, token = source.get_with_token()
    source.begin_move(token)  # what the channel writes before it copies
    source.close()
    if copy_made:
        copy = Message.decode(record[DUE_SIZE:] if held_on == "deferred" else record)
        dead = offline_queue(data, "poison.dead:dl")
        dead.put(Message(copy.id, copy.body, copy.timestamp).encode())
        dead.close()

    with nsqd_process(str(data), *flags) as daemon:
        dead_letters = []
        for subscribe in ("dead-letter topic first", "then the source", "then the dead-letter topic again"):
            with WireConn(daemon.tcp_hostport) as c:
                if subscribe == "then the source":
                    c.subscribe("poison", "ch", rdy=10)
                    c.expect_nothing(1.0)  # dead-lettered now, or settled at startup
                else:
                    c.subscribe("poison.dead", "dl", rdy=10)
                    if subscribe.endswith("again") and not dead_letters:
                        # dead-lettered when the source was subscribed: wait for it, however slow
                        message = c.message(timeout=15)
                        c.send(cmd.fin(message.id))
                        dead_letters.append(message.body)
                    dead_letters += c.drain(quiet=1.0)
        assert dead_letters == [b"poison-pill"]
