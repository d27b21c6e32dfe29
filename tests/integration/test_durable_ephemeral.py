"""Ephemeral channels in durable mode (--mem-queue-size=0): they keep
nothing, in memory or on disk, so a message goes straight to a consumer
ready for it and is dropped when none is, as NSQ's unbuffered channel hands
it to a waiting consumer or to a backend that discards it. Looking at a
topic with nsq_tail (ours or NSQ's) shows every message published while it
waits, on plain and retained topics alike."""

import subprocess
from pathlib import Path

import pytest

from nsqpy.protocol import commands as cmd
from tests.support.gonsqd import GO_NSQ_TAIL
from tests.support.wire import WireConn, http, http_json, wait_until
from tests.tools.helpers import lines, tool_command

COUNT = 20
SETUPS = {
    "plain": (("--mem-queue-size=0",), ()),
    "retained": (("--mem-queue-size=0", "--retention=24h"), ()),
    "retained beside a durable channel": (("--mem-queue-size=0", "--retention=24h"), ("kept",)),
}


def wait_for_a_ready_consumer(daemon, topic: str) -> None:
    """Until a consumer of one of ``topic``'s ephemeral channels has RDY above 0."""
    def ready() -> bool:
        _, stats = http_json("GET", f"{daemon.http_url}/stats?format=json&topic={topic}")
        return any(channel["channel_name"].endswith("#ephemeral") and client["ready_count"] > 0
                   for topic_stats in stats["topics"] or [] for channel in topic_stats["channels"] or []
                   for client in channel["clients"] or [])
    wait_until(ready, timeout=30)


def publish_one_by_one(daemon, topic: str, bodies: list[bytes]) -> None:
    with WireConn(daemon.tcp_hostport) as conn:
        for body in bodies:
            conn.publish(topic, body)


def channel_depth(daemon, topic: str, channel: str) -> int:
    _, stats = http_json("GET", f"{daemon.http_url}/stats?format=json&topic={topic}&channel={channel}")
    return stats["topics"][0]["channels"][0]["depth"]


def tail_shows_everything(daemon, tail_command: list[str], durable: tuple[str, ...], shown: Path) -> None:
    """``tail_command`` subscribed first, then COUNT messages published one
    by one: it prints them all (to ``shown``), and ``durable`` channels
    keep their own copies."""
    topic = "watched"
    assert http("POST", f"{daemon.http_url}/topic/create?topic={topic}")[0] == 200
    for channel in durable:
        assert http("POST", f"{daemon.http_url}/channel/create?topic={topic}&channel={channel}")[0] == 200
    with shown.open("wb") as out:
        tail = subprocess.Popen(tail_command + [f"--topic={topic}", f"--nsqd-tcp-address={daemon.tcp_address}"],
                                stdout=out, stderr=subprocess.DEVNULL)
    try:
        wait_for_a_ready_consumer(daemon, topic)
        bodies = [b"message %02d" % i for i in range(COUNT)]
        publish_one_by_one(daemon, topic, bodies)
        try:
            wait_until(lambda: len(lines(shown.read_bytes())) >= COUNT, timeout=15)
        except TimeoutError:
            pass  # the assertion says what was shown
        assert lines(shown.read_bytes()) == bodies
        for channel in durable:
            assert channel_depth(daemon, topic, channel) == COUNT
    finally:
        tail.kill()
        tail.wait(10)


@pytest.mark.parametrize("setup", SETUPS.values(), ids=SETUPS.keys())
def test_nsq_tail_shows_every_message_published_while_it_waits(start_nsqd, setup, tmp_path):
    flags, durable = setup
    tail_shows_everything(start_nsqd(*flags), tool_command("nsq_tail"), durable, tmp_path / "shown")


@pytest.mark.parametrize("setup", SETUPS.values(), ids=SETUPS.keys())
def test_nsqs_own_nsq_tail_shows_every_message_published_while_it_waits(start_nsqd, setup, tmp_path):
    if not GO_NSQ_TAIL.exists():
        pytest.skip(f"NSQ's nsq_tail is not at {GO_NSQ_TAIL} (../shared/reference)")
    flags, durable = setup
    tail_shows_everything(start_nsqd(*flags), [str(GO_NSQ_TAIL)], durable, tmp_path / "shown")


@pytest.mark.parametrize("flags", [SETUPS["plain"][0], SETUPS["retained"][0]], ids=["plain", "retained"])
def test_what_no_consumer_was_ready_for_is_dropped(start_nsqd, flags):
    daemon = start_nsqd(*flags)
    with WireConn(daemon.tcp_hostport) as watcher:
        watcher.subscribe("watched", "watch#ephemeral", rdy=0)
        publish_one_by_one(daemon, "watched", [b"unseen %d" % i for i in range(5)])
        watcher.expect_nothing(1.0)
        watcher.send(cmd.rdy(5))
        watcher.expect_nothing(1.0)  # dropped, as NSQ drops them: not kept for later
        publish_one_by_one(daemon, "watched", [b"seen"])
        assert watcher.message().body == b"seen"
