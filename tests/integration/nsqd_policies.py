"""Helpers shared by the tests of nsqd's policies beyond NSQ (TTL, bounded
queues): set up topics over HTTP, read /stats, consume with gnsq."""

import contextlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support.wire import http, http_json, wait_until

COLLECT_PEER = Path(__file__).parent / "peers" / "gnsq_collect_peer.py"


def _peer_command(nsqd, topic: str, channel: str, count: int, seconds: float) -> list[str]:
    return [sys.executable, str(COLLECT_PEER), nsqd.tcp_address, topic, channel, str(count), str(seconds)]


def consume(nsqd, topic: str, channel: str, count: int, seconds: float = 15.0) -> list[str]:
    """The bodies gnsq receives (and FINishes) on ``channel``: ``count`` of
    them (it stops soon after the last), or what came within ``seconds``."""
    result = subprocess.run(_peer_command(nsqd, topic, channel, count, seconds), capture_output=True, text=True,
                            timeout=seconds + 60)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


@contextlib.contextmanager
def consuming(nsqd, topic: str, channel: str, count: int, seconds: float = 30.0):
    """``consume`` in the background: enters once gnsq is subscribed and has
    given RDY (what is published in the block is delivered at once, however
    long gnsq took to start), and fills the yielded list with the bodies
    received once it has finished, at the block's end."""
    bodies: list[str] = []
    with tempfile.TemporaryFile("w+") as stderr:
        process = subprocess.Popen(_peer_command(nsqd, topic, channel, count, seconds), stdout=subprocess.PIPE,
                                   stderr=stderr, text=True)
        try:
            def ready():
                clients = channel_stats(nsqd, topic, channel)["clients"] or []
                return any(client["ready_count"] > 0 for client in clients) or process.poll() is not None
            wait_until(ready, timeout=60, interval=0.05)
            yield bodies
            out, _ = process.communicate(timeout=seconds + 60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        stderr.seek(0)
        assert process.returncode == 0, stderr.read()[-3000:]
    bodies.extend(json.loads(out))


def create(nsqd, topic: str, *channels: str) -> None:
    assert http("POST", f"{nsqd.http_url}/topic/create?topic={topic}")[0] == 200
    for channel in channels:
        assert http("POST", f"{nsqd.http_url}/channel/create?topic={topic}&channel={channel}")[0] == 200


def channel_stats(nsqd, topic: str, channel: str) -> dict:
    _, stats = http_json("GET", f"{nsqd.http_url}/stats?format=json&topic={topic}&channel={channel}")
    return stats["topics"][0]["channels"][0]
