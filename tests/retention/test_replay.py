"""Replay into channels of a retained topic, read by gnsq (which knows
nothing of retention): from the earliest offset, from a time, from an
offset; what a rewound channel held is replaced, not doubled; a replay
outlives a restart."""

import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

from nsqpy.protocol import commands as cmd
from tests.support.wire import WireConn, http, http_json, wait_until

IDS_PEER = Path(__file__).parent / "peers" / "gnsq_ids_peer.py"


def consume(nsqd, topic: str, channel: str, count: int, seconds: float = 30.0) -> list[tuple[str, str, int]]:
    """[(id, body, timestamp)] as gnsq receives (and FINishes) them."""
    result = subprocess.run([sys.executable, str(IDS_PEER), nsqd.tcp_address, topic, channel, str(count),
                             str(seconds)], capture_output=True, text=True, timeout=seconds + 60)
    assert result.returncode == 0, result.stderr[-3000:]
    return [tuple(item) for item in json.loads(result.stdout)]


def publish(nsqd, topic: str, bodies: list[bytes]) -> None:
    """Half as MPUBs of 50, half as PUBs, over TCP."""
    with WireConn(nsqd.tcp_hostport) as c:
        half = len(bodies) // 2
        for start in range(0, half, 50):
            c.send(cmd.mpub(topic, bodies[start:min(start + 50, half)]))
            c.expect_ok()
        for body in bodies[half:]:
            c.send(cmd.pub(topic, body))
            c.expect_ok()


def mpub(nsqd, topic: str, bodies: list[bytes], per: int) -> None:
    """MPUBs of ``per`` over one TCP connection."""
    with WireConn(nsqd.tcp_hostport) as c:
        for start in range(0, len(bodies), per):
            c.send(cmd.mpub(topic, bodies[start:start + per]))
            c.expect_ok()


def post(nsqd, path: str) -> dict:
    status, answer = http_json("POST", f"{nsqd.http_url}{path}")
    assert status == 200, answer
    return answer


def channel_stats(nsqd, topic: str, channel: str) -> dict:
    _, stats = http_json("GET", f"{nsqd.http_url}/stats?format=json&topic={topic}&channel={channel}")
    return stats["topics"][0]["channels"][0]


def test_channels_replay_from_the_start_and_from_a_time_with_original_ids_then_live(start_nsqd, topic):
    nsqd = start_nsqd("--retention=1h")
    post(nsqd, f"/topic/create?topic={topic}")
    assert http("POST", f"{nsqd.http_url}/channel/create?topic={topic}&channel=live")[0] == 200
    assert http("POST", f"{nsqd.http_url}/channel/create?topic={topic}&channel=later")[0] == 200
    early = [b"early-%03d" % i for i in range(200)]
    late = [b"late-%03d" % i for i in range(200)]
    publish(nsqd, topic, early)
    time.sleep(0.05)
    middle = datetime.datetime.now(datetime.timezone.utc)
    time.sleep(0.05)
    publish(nsqd, topic, late)
    live = consume(nsqd, topic, "live", 400)
    assert [body for _, body, _ in live] == [b.decode() for b in early + late]

    answer = post(nsqd, f"/channel/create?topic={topic}&channel=replay&from=earliest")
    assert (answer["offset"], answer["earliest_offset"], answer["latest_offset"]) == (0, 0, 400)
    stamp = middle.isoformat().replace("+00:00", "Z")
    answer = post(nsqd, f"/channel/rewind?topic={topic}&channel=later&from={stamp}")
    assert answer["offset"] == 200  # the first message accepted after that time

    assert consume(nsqd, topic, "replay", 400) == live  # same ids, bodies, timestamps, order
    assert consume(nsqd, topic, "later", 200) == live[200:]

    publish(nsqd, topic, [b"after-1", b"after-2"])  # live again, once each
    for channel in ("live", "replay", "later"):
        assert [body for _, body, _ in consume(nsqd, topic, channel, 2)] == ["after-1", "after-2"]
        stats = channel_stats(nsqd, topic, channel)
        assert (stats["depth"], stats["log_lag"], stats["replay_offset"]) == (0, 0, None)


def test_a_rewound_channel_holds_the_replay_only(start_nsqd, topic):
    nsqd = start_nsqd("--retention=1h")
    post(nsqd, f"/topic/create?topic={topic}")
    assert http("POST", f"{nsqd.http_url}/channel/create?topic={topic}&channel=c")[0] == 200
    bodies = [b"m%03d" % i for i in range(300)]
    publish(nsqd, topic, bodies)
    assert channel_stats(nsqd, topic, "c")["depth"] == 300
    with WireConn(nsqd.tcp_hostport) as c:  # ten in flight when the channel is rewound
        c.subscribe(topic, "c", rdy=10)
        held = c.messages(10)
        c.send(cmd.rdy(0))
        wait_until(lambda: channel_stats(nsqd, topic, "c")["clients"][0]["ready_count"] == 0)
        post(nsqd, f"/channel/rewind?topic={topic}&channel=c&from=250")
        c.send(cmd.fin(held[0].id))  # gone from flight, as /channel/empty leaves it
        assert c.error().code == "E_FIN_FAILED"
    wait_until(lambda: channel_stats(nsqd, topic, "c")["depth"] == 50)
    assert [body for _, body, _ in consume(nsqd, topic, "c", 50)] == [b.decode() for b in bodies[250:]]
    assert channel_stats(nsqd, topic, "c")["depth"] == 0


def replaying(start_nsqd, data, topic: str, count: int):
    """nsqd retaining ``topic`` in ``data``, ``count`` messages published
    (MPUBs of 1,000), and channel ``c`` replaying them from the earliest.
    -> (nsqd, the bodies)."""
    nsqd = start_nsqd("--retention=1h", data_path=data)
    post(nsqd, f"/topic/create?topic={topic}")
    bodies = [b"r%05d" % i for i in range(count)]
    mpub(nsqd, topic, bodies, 1000)
    post(nsqd, f"/channel/create?topic={topic}&channel=c&from=earliest")
    return nsqd, bodies


def test_a_replay_resumes_after_a_restart(start_nsqd, topic, tmp_path):
    data = tmp_path / "kept"
    nsqd, bodies = replaying(start_nsqd, data, topic, 30_000)
    # the replay fills the channel's window and waits for its consumers
    wait_until(lambda: channel_stats(nsqd, topic, "c")["depth"] >= 10_000)
    stats = channel_stats(nsqd, topic, "c")
    assert stats["replay_offset"] is not None and stats["log_lag"] == 30_000
    nsqd.stop()

    nsqd = start_nsqd("--retention=1h", data_path=data)
    received = consume(nsqd, topic, "c", 30_000, seconds=120)
    assert [body for _, body, _ in received] == [b.decode() for b in bodies]


def test_after_a_restart_in_a_replay_first_deliveries_keep_their_order_and_redeliveries_take_turns(
        start_nsqd, topic, tmp_path):
    """A consumer finishes 20,000 of a replay and leaves with up to 50 in flight;
    nsqd restarts cleanly. The 50 come again taking turns with the next
    records (as any redelivery does, so none waits behind a backlog), and
    every record delivered for the first time comes in the log's order."""
    data = tmp_path / "kept"
    nsqd, bodies = replaying(start_nsqd, data, topic, 50_000)
    with WireConn(nsqd.tcp_hostport) as c:
        c.subscribe(topic, "c", rdy=50)
        for _ in range(20_000):
            c.send(cmd.fin(c.message(timeout=30).id))
        c.send(cmd.rdy(0))
        c.answers_handled()  # those sent after the last FIN are in flight as it leaves
    nsqd.stop()

    nsqd = start_nsqd("--retention=1h", data_path=data)
    first, again = [], []
    with WireConn(nsqd.tcp_hostport) as c:
        c.subscribe(topic, "c", rdy=100)
        while len(first) + len(again) < 30_000:
            message = c.message(timeout=30)
            (first if message.attempts == 1 else again).append(message.body)
            c.send(cmd.fin(message.id))
        c.expect_nothing(1)
    assert 0 < len(again) <= 50 and sorted(again) == bodies[20_000:20_000 + len(again)]
    assert first == bodies[20_000 + len(again):]


def test_a_retained_topic_without_channels_keeps_its_backlog_in_the_log_for_the_first_channel(
        start_nsqd, topic, tmp_path):
    data = tmp_path / "kept"
    nsqd = start_nsqd("--retention=1h", "--mem-queue-size=100", data_path=data)
    bodies = [b"b%04d" % i for i in range(1000)]
    publish(nsqd, topic, bodies)
    _, stats = http_json("GET", f"{nsqd.http_url}/stats?format=json&topic={topic}")
    (entry,) = stats["topics"]
    assert (entry["depth"], entry["backend_depth"], entry["memory_depth"]) == (1000, 0, 0)  # stored once: the log
    assert not list(data.glob(f"{topic}.diskqueue.*.dat"))
    nsqd.stop()
    nsqd = start_nsqd("--retention=1h", "--mem-queue-size=100", data_path=data)  # the backlog outlives a restart
    assert [body for _, body, _ in consume(nsqd, topic, "first", 1000)] == [b.decode() for b in bodies]
    assert http_json("GET", f"{nsqd.http_url}/stats?format=json&topic={topic}")[1]["topics"][0]["depth"] == 0
    post(nsqd, f"/channel/create?topic={topic}&channel=second")  # a later channel starts with the live ones
    publish(nsqd, topic, [b"live"])
    assert [body for _, body, _ in consume(nsqd, topic, "second", 1)] == ["live"]


def test_a_lagging_channel_reads_what_its_memory_cannot_hold_from_the_log(start_nsqd, topic, tmp_path):
    data = tmp_path / "kept"
    nsqd = start_nsqd("--retention=1h", "--mem-queue-size=1000", data_path=data)
    post(nsqd, f"/topic/create?topic={topic}")
    post(nsqd, f"/channel/create?topic={topic}&channel=slow")
    bodies = [b"o%05d" % i for i in range(20_000)]
    mpub(nsqd, topic, bodies, 500)
    with WireConn(nsqd.tcp_hostport) as c:
        c.send(cmd.dpub(topic, 1500, b"deferred"))  # a deferred publish while the channel reads from the log
        c.expect_ok()
    stats = channel_stats(nsqd, topic, "slow")
    assert (stats["depth"], stats["backend_depth"], stats["deferred_count"]) == (20_001, 0, 1)
    assert stats["memory_depth"] <= 1000 and stats["replay_offset"] is not None
    assert not list(data.glob(f"{topic}:slow.diskqueue.*.dat"))  # each message written once: the log
    received = [body for _, body, _ in consume(nsqd, topic, "slow", 15_000)]  # (gnsq may take a few more)
    ordered = [body for body in received if body != "deferred"]  # (the DPUB comes when due, wherever that falls)
    assert ordered == [b.decode() for b in bodies[:len(ordered)]]  # in order, from memory and from the log
    nsqd.stop()  # a clean stop mid-way: the channel's memory is kept (on disk), and where it was in the log
    nsqd = start_nsqd("--retention=1h", "--mem-queue-size=1000", data_path=data)
    received += [body for _, body, _ in consume(nsqd, topic, "slow", 20_001 - len(received))]
    # each once; the kept memory and the log's next records may interleave (a queue hands out
    # whichever of its memory and its disk was published first, and an MPUB's share one timestamp)
    assert sorted(received) == sorted([b.decode() for b in bodies] + ["deferred"])
    assert channel_stats(nsqd, topic, "slow")["depth"] == 0


def test_a_paused_topic_holds_back_a_lagging_channel_and_delivers_each_message_once(start_nsqd, topic):
    nsqd = start_nsqd("--retention=1h", "--mem-queue-size=100")
    post(nsqd, f"/topic/create?topic={topic}")
    post(nsqd, f"/channel/create?topic={topic}&channel=slow")
    publish(nsqd, topic, [b"a%04d" % i for i in range(1000)])  # beyond memory: the channel reads the log
    assert channel_stats(nsqd, topic, "slow")["replay_offset"] is not None
    post(nsqd, f"/topic/pause?topic={topic}")
    publish(nsqd, topic, [b"p%04d" % i for i in range(300)])  # waits in the paused topic's queue
    post(nsqd, f"/topic/unpause?topic={topic}")
    received = [body for _, body, _ in consume(nsqd, topic, "slow", 1300)]
    assert sorted(received) == sorted([f"a{i:04d}" for i in range(1000)] + [f"p{i:04d}" for i in range(300)])


def test_retention_keeps_what_a_lagging_channel_has_yet_to_receive(start_nsqd, topic):
    nsqd = start_nsqd("--retention=1h", "--mem-queue-size=100", "--max-bytes-per-file=4096")
    post(nsqd, f"/topic/create?topic={topic}")
    post(nsqd, f"/channel/create?topic={topic}&channel=slow")
    bodies = [b"k%04d" % i for i in range(5000)]
    publish(nsqd, topic, bodies)
    with WireConn(nsqd.tcp_hostport) as c:
        c.subscribe(topic, "slow", rdy=2500)
        first = c.messages(2500)
        c.send(cmd.rdy(0))
        for message in first:
            c.send(cmd.fin(message.id))
        wait_until(lambda: channel_stats(nsqd, topic, "slow")["in_flight_count"] == 0)
    post(nsqd, f"/topic/config?topic={topic}&retention_bytes=1")  # as little as it may keep
    owed = channel_stats(nsqd, topic, "slow")["replay_offset"]
    wait_until(lambda: http_json("GET", f"{nsqd.http_url}/topic/offsets?topic={topic}")[1]["earliest_offset"] > 0)
    time.sleep(1.5)  # another look of the retention loop: it stops at what the channel is owed
    assert 0 < http_json("GET", f"{nsqd.http_url}/topic/offsets?topic={topic}")[1]["earliest_offset"] <= owed
    rest = [body for _, body, _ in consume(nsqd, topic, "slow", 2500)]
    assert sorted([m.body.decode() for m in first] + rest) == [b.decode() for b in bodies]



def test_a_deferred_publish_a_channel_gets_from_the_log_waits_as_long_as_it_asked(start_nsqd, topic):
    """Deferred publishes the topic's first channel did not get live (they
    waited in the log as its backlog): one due in a minute is deferred
    until then, one whose delay has passed comes at once, with the rest."""
    nsqd = start_nsqd("--retention=1h")
    post(nsqd, f"/topic/create?topic={topic}")
    with WireConn(nsqd.tcp_hostport) as c:
        for command in (cmd.dpub(topic, 60_000, b"in a minute"), cmd.dpub(topic, 1, b"due already"),
                        cmd.pub(topic, b"now")):
            c.send(command)
            c.expect_ok()
    time.sleep(0.1)  # the 1 ms delay has passed
    post(nsqd, f"/channel/create?topic={topic}&channel=first")
    wait_until(lambda: channel_stats(nsqd, topic, "first")["replay_offset"] is None, timeout=30)
    stats = channel_stats(nsqd, topic, "first")
    assert (stats["depth"], stats["deferred_count"]) == (2, 1)
    with WireConn(nsqd.tcp_hostport) as c:
        c.subscribe(topic, "first", rdy=10)
        assert sorted(message.body for message in c.messages(2)) == [b"due already", b"now"]
        c.expect_nothing(1.0)
