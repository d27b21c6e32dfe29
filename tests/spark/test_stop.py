"""Graceful stops right after a commit: every acknowledgement confirmed, every message once."""

import json

import pytest

from nsqpy.spark.archive import drain_file, start_archive, stop_gracefully
from tests.support.wire import wait_until

from .conftest import archived_bodies, channel_stats, committed_bodies, publish, source_options

# several JVM starts (or a standalone cluster) per test: minutes on a busy 2-core machine
pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

STOPS = 20


def _committed_position(query) -> int:
    """Messages the checkpoint counts as read, over every run so far."""
    ends = [p["sources"][0]["endOffset"] for p in query.recentProgress if p["numInputRows"]]
    return json.loads(ends[-1])["messages"] if isinstance(ends[-1], str) else ends[-1]["messages"]


def test_twenty_stops_right_after_a_commit_are_each_exactly_once(spark, start_nsqd, topic, tmp_path):
    """Each round starts the archive query, waits for one batch to commit and
    asks for a stop at once, while nsqd keeps pushing more messages (so the
    sockets hold unread data when the consumer closes, which resets the
    connection). A FIN nsqd had not applied before that reset would bring
    the message back; the stop waits for nsqd's CLOSE_WAIT, so after every
    round nothing is in flight and the channel holds exactly what was not
    archived."""
    # NSQ's default message timeout: what is asked here is that a stop confirms every FIN, not
    # that TOUCHes keep a short timeout (3 s, which a busy machine can starve the reader past)
    nsqd = start_nsqd("--msg-timeout=60s", "--max-rdy-count=20000")
    bodies = [f"{topic}-{i:06d}".encode() for i in range(STOPS * 1000 + 5000)]
    publish(nsqd, topic, bodies)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    options = source_options(nsqd, topic, max_messages_per_batch=500, batch_wait=0.05)
    for round_number in range(STOPS):
        query = start_archive(spark, options, out, checkpoint, trigger="0 seconds")
        try:
            wait_until(lambda: any(p["numInputRows"] for p in query.recentProgress) or not query.isActive,
                       timeout=60)
            drained = stop_gracefully(query, drain_file(checkpoint), timeout=60)
        finally:
            query.stop()
        assert query.exception() is None
        assert drained.confirmed and drained.unconfirmed == 0, (round_number, drained)
        archived = _committed_position(query)
        wait_until(lambda: channel_stats(nsqd, topic, "archive")["in_flight_count"] == 0, timeout=10)
        depth = channel_stats(nsqd, topic, "archive")["depth"]
        assert depth == len(bodies) - archived, f"stop {round_number}: {depth - len(bodies) + archived} came back"

    archived = archived_bodies(spark, out)
    assert len(archived) == len(set(archived)) == _committed_position(query)
    assert sorted(committed_bodies(out)) == sorted(archived)  # the session-free reader, past a compacted log
