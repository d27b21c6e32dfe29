"""Helpers shared by the tests of nsqd's policies beyond NSQ (TTL, bounded
queues): set up topics over HTTP, read /stats, consume with gnsq."""

import json
import subprocess
import sys
from pathlib import Path

from tests.support.wire import http, http_json

COLLECT_PEER = Path(__file__).parent / "peers" / "gnsq_collect_peer.py"


def consume(nsqd, topic: str, channel: str, count: int, seconds: float = 3.0) -> list[str]:
    """The bodies gnsq receives (and FINishes) on ``channel``: ``count`` of
    them, or what came within ``seconds``."""
    result = subprocess.run([sys.executable, str(COLLECT_PEER), nsqd.tcp_address, topic, channel, str(count),
                             str(seconds)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def create(nsqd, topic: str, *channels: str) -> None:
    assert http("POST", f"{nsqd.http_url}/topic/create?topic={topic}")[0] == 200
    for channel in channels:
        assert http("POST", f"{nsqd.http_url}/channel/create?topic={topic}&channel={channel}")[0] == 200


def channel_stats(nsqd, topic: str, channel: str) -> dict:
    _, stats = http_json("GET", f"{nsqd.http_url}/stats?format=json&topic={topic}&channel={channel}")
    return stats["topics"][0]["channels"][0]
