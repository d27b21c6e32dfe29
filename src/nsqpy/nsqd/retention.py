"""Retained topics (beyond NSQ; NSQ's own design nsqio/nsq#625, never
finished): a topic that keeps every message it accepted in a log
(topiclog/), for replay into channels and for offset reads.

Off by default. ``--retention`` and ``--retention-bytes`` set it for every
topic; ``POST /topic/config?retention=...&retention_bytes=...`` per topic,
kept in nsqd.dat (``retention_ms``, ``retention_bytes``). Ephemeral topics
are never retained. Turning a topic's retention off over HTTP deletes its
log; a log found at start for a topic that is not retained (a restart
without the flag) is left on disk untouched, with a warning, so a
forgotten flag loses nothing, and one whose topic nsqd.dat does not list
while every topic is retained is made that topic again (``unlisted_logs``).

Points in the log (``from=``): ``earliest``, ``latest``, an offset
(digits), an RFC 3339 time, or Unix milliseconds written ``<digits>ms``.
"""

import asyncio
import os
import re
import time
from typing import TYPE_CHECKING, Final

from ..options import duration_in_range, int_in_range
from ..protocol.names import is_ephemeral, is_valid_topic_name

if TYPE_CHECKING:
    from ..topiclog import TopicLog

LOG_SUFFIX: Final = ".log"  # <data-path>/<topic>.log/ holds a retained topic's segments
MAX_RETENTION: Final = 10 * 365 * 24 * 3600.0  # ten years
MAX_RETENTION_BYTES: Final = 1 << 60
_UNIX_MS = re.compile(r"[0-9]{1,15}ms")
_OFFSET = re.compile(r"[0-9]{1,20}")


def log_directory(data_path: str, topic_name: str) -> str:
    return os.path.join(data_path, topic_name + LOG_SUFFIX)


def parse_retention(text: str) -> float:
    """A retention as given to the flag or over HTTP (Go duration; 0: off)."""
    return duration_in_range("retention", text, MAX_RETENTION, "87600h")


def parse_retention_bytes(text: str) -> int:
    return int_in_range("retention_bytes", text, MAX_RETENTION_BYTES)


class LogPoint:
    """Where ``from=`` points: resolved against a log (``offset_in``)."""

    __slots__ = ("kind", "value")

    def __init__(self, kind: str, value: int = 0):
        self.kind = kind  # "earliest", "latest", "offset" or "time" (Unix ns)
        self.value = value

    def offset_in(self, log) -> int:
        """The offset it names in ``log``; an offset before the earliest
        retained one is the earliest (retention removed the rest).
        ``ValueError`` for an offset past the log's end."""
        if self.kind == "earliest":
            return log.earliest
        if self.kind == "latest":
            return log.latest
        if self.kind == "time":
            return max(log.offset_at(self.value), log.earliest)
        if self.value > log.latest:
            raise ValueError(f"offset {self.value} is past the end of the log ({log.latest})")
        return max(self.value, log.earliest)


def parse_point(text: str, now_ns: int | None = None) -> LogPoint:
    """``earliest``, ``latest``, an offset, an RFC 3339 time or ``<unix ms>ms``;
    ``ValueError`` with one line otherwise, or for a time in the future."""
    if text in ("earliest", "latest"):
        return LogPoint(text)
    if _OFFSET.fullmatch(text):
        value = int(text)
        if value >= 1 << 63:
            raise ValueError(f"offset {text} is beyond int64")
        return LogPoint("offset", value)
    if _UNIX_MS.fullmatch(text):
        ns = int(text[:-2]) * 1_000_000
    else:
        import datetime  # only an HTTP read of a log asks for a time: never on the way to listening

        try:
            moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise ValueError(f"from {text!r} is not earliest, latest, an offset, an RFC 3339 time "
                             "or Unix milliseconds (<digits>ms)") from None
        if moment.tzinfo is None or "T" not in text.upper():
            raise ValueError(f"from {text!r} needs a date, a time and a zone (RFC 3339: 2026-11-28T09:00:00Z)")
        ns = round(moment.timestamp() * 1e6) * 1000
    if ns > (time.time_ns() if now_ns is None else now_ns):
        raise ValueError(f"from {text!r} is in the future")
    return LogPoint("time", ns)


def log_extent(topic_log) -> dict:
    """What a retained topic's log holds, for /topic/offsets and /stats."""
    return {
        "earliest_offset": topic_log.earliest,
        "latest_offset": topic_log.latest,
        "earliest_timestamp": topic_log.earliest_time,
        "latest_timestamp": topic_log.latest_time,
        "bytes": topic_log.bytes,
        "segments": len(topic_log.segments),
    }


def channel_log_position(channel) -> dict:
    """How far behind the log's end a channel of a retained topic is: what
    it has queued, plus what its replay has not reached yet (its depth)."""
    replay = channel.replay
    return {"log_lag": channel.depth, "replay_offset": None if replay is None else replay.offset}


# --- the logs of a running nsqd ----------------------------------------------------

RETENTION_CHECK_INTERVAL: Final = 1.0  # seconds between looks at every log's oldest segment


def open_topic_log(nsqd, topic_name: str) -> "TopicLog":
    """The log of a topic that is retained; its records wait for the end of
    the loop's turn with the disk queues' acknowledgements. The log's code
    loads with the first retained topic: an nsqd without one never needs it."""
    from ..topiclog import TopicLog

    options = nsqd.options
    topic_log = TopicLog(log_directory(nsqd.data_path, topic_name), segment_bytes=options.max_bytes_per_file,
                         sync_every=options.sync_every, logger=nsqd.log)
    topic_log.on_pending = nsqd.dirty.mark
    topic_log.sync_hold = nsqd.sync_hold
    return topic_log


def open_cursor(nsqd, topic, channel_name: str, side):
    """The cursor over ``topic``'s log that ``channel_name`` reads in durable
    mode, with its disk queue ``side`` beside it. A new one begins at the
    log's end, or where the channel's replay was (nsqd restarted into
    durable mode), which it takes over."""
    from ..topiclog.cursor import CursorQueue
    from .replay_position import CURSOR_SUFFIX as REPLAY_SUFFIX, read_cursor

    topic_log = topic.topic_log
    start = live_from = topic_log.latest
    replay_file = os.path.join(topic_log.directory, channel_name + REPLAY_SUFFIX)
    try:
        start, live_from = read_cursor(replay_file)
    except FileNotFoundError:
        replay_file = ""
    except (OSError, ValueError) as error:  # left in place for the operator, as Replay.resume leaves it
        nsqd.log.error("CHANNEL(%s): cannot read its replay cursor: %s", channel_name, error)
        replay_file = ""
    cursor = CursorQueue(f"{topic.name}:{channel_name}", topic_log, channel_name, side, start=start,
                         live_from=live_from, sync_every=nsqd.options.sync_every, logger=nsqd.log)
    cursor.on_dirty = nsqd.dirty.mark
    if replay_file:
        os.remove(replay_file)
    return cursor


def unlisted_logs(nsqd) -> list[str]:
    """The topics whose log is on disk though nsqd.dat does not list them,
    when every topic is retained: a publish or a SUB made the topic and
    nsqd stopped (kill -9, a full disk refusing the file's new copy) before
    nsqd.dat listed it. Their acknowledged records are in the log, so
    nsqd makes them topics again at start."""
    options = nsqd.options
    if not (options.retention or options.retention_bytes):
        return []
    try:
        names = os.listdir(nsqd.data_path)
    except OSError:
        return []
    topics = (name[:-len(LOG_SUFFIX)] for name in names if name.endswith(LOG_SUFFIX))
    return sorted(topic for topic in topics
                  if topic not in nsqd.topics and is_valid_topic_name(topic) and not is_ephemeral(topic))


def warn_of_unretained_logs(nsqd) -> None:
    """A log on disk whose topic is not retained now (a restart without
    --retention) is kept as it is; the operator hears of it once."""
    try:
        names = os.listdir(nsqd.data_path)
    except OSError:
        return
    for name in names:
        topic_name = name[:-len(LOG_SUFFIX)]
        topic = nsqd.topics.get(topic_name)
        if name.endswith(LOG_SUFFIX) and (topic is None or topic.topic_log is None):
            nsqd.log.warning("LOG(%s): kept but not written or served: topic %s is not retained "
                             "(--retention, or POST /topic/config?retention=...)", name, topic_name)


async def retention_loop(nsqd) -> None:
    """Remove what each retained topic no longer keeps, every second."""
    while True:
        await asyncio.sleep(RETENTION_CHECK_INTERVAL)
        now = time.time_ns()
        for topic in list(nsqd.topics.values()):
            topic_log = topic.topic_log
            if topic_log is None:
                continue
            try:
                removed = topic_log.retain(now, topic.retention, topic.retention_bytes, topic.log_owed_from())
            except OSError as error:
                nsqd.log.error("LOG(%s): retention failed: %s", topic_log.name, error)
                continue
            if removed:
                nsqd.log.info("LOG(%s): removed %d segments; earliest offset now %d", topic_log.name,
                              removed, topic_log.earliest)
