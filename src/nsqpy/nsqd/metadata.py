"""``nsqd.dat``: the topics and channels (and their paused flags) that exist,
in NSQ's JSON layout, so a data directory survives a restart and moves
between NSQ's nsqd and ours. Ephemeral topics and channels are never written.

A channel's dead-letter settings (dead_letter.py), a topic's retention
(retention.py) and a topic's or a channel's expiry and depth limit
settings (expiry.py, bounds.py) are extra keys of their entries,
written only when set: Go's nsqd ignores keys it does not know, so
it still loads the file (and drops them when it rewrites it).
"""

import asyncio
import json
import os
from json.encoder import encode_basestring_ascii as _quote

from ..atomicfile import write_atomically
from ..options import int_in_range
from ..protocol import NSQ_VERSION
from ..protocol.names import is_ephemeral, is_valid_channel_name, is_valid_topic_name
from .bounds import parse_full_policy, parse_max_depth
from .dead_letter import is_valid_dead_letter_topic, parse_max_attempts
from .expiry import parse_expire_action, parse_ttl_ms
from .publish_keys import MAX_WINDOW as MAX_KEY_WINDOW, parse_key_window
from .retention import MAX_RETENTION, parse_retention, parse_retention_bytes

FILE_NAME = "nsqd.dat"
_compact = json.JSONEncoder(separators=(",", ":")).encode


def metadata_path(data_path: str) -> str:
    return os.path.join(data_path, FILE_NAME)


def encode(topics) -> bytes:
    """``topics``: Topic objects (name, paused, channels). The bytes
    ``json.dumps`` would give, built by formatting strings: the whole file is
    rewritten on every change, so this runs often, and formatting takes a
    third of the time of building dicts to dump."""
    return _document([entry for entry in map(topic_entry, topics) if entry is not None])


def topic_entry(topic) -> str | None:
    """The topic's entry in the file, its channels included; None for an ephemeral topic."""
    if topic.ephemeral:
        return None
    channels = [_object(channel.name, channel.paused, _channel_settings(channel))
                for channel in topic.channels.values() if not channel.ephemeral]
    return _object(topic.name, topic.paused, _topic_settings(topic),
                   f"[{','.join(channels)}]" if channels else "null")


def _document(entries: list[str]) -> bytes:
    listed = f"[{','.join(entries)}]" if entries else "null"
    return f'{{"topics":{listed},"version":{_quote(NSQ_VERSION)}}}'.encode()


def _object(name: str, paused: bool, settings: dict, channels: str | None = None) -> str:
    """One entry: NSQ's keys first, then the settings that are set (usually none)."""
    text = f'{{"name":{_quote(name)},"paused":{"true" if paused else "false"}'
    if channels is not None:
        text += f',"channels":{channels}'
    if settings:
        text += "," + _compact(settings)[1:-1]
    return text + "}"


def _topic_settings(topic) -> dict:
    settings = {}
    if topic.ttl_setting is not None:
        settings["ttl_ms"] = round(topic.ttl_setting * 1000)
    if topic.expire_action_setting is not None:
        settings["expire_action"] = topic.expire_action_setting
    if topic.retention_setting is not None:
        settings["retention_ms"] = round(topic.retention_setting * 1000)
    if topic.retention_bytes_setting is not None:
        settings["retention_bytes"] = topic.retention_bytes_setting
    if topic.publish_key_window_setting is not None:
        settings["publish_key_window_ms"] = round(topic.publish_key_window_setting * 1000)
    return _with_limit(settings, topic.limit)


def _channel_settings(channel) -> dict:
    settings = {}
    if channel.max_attempts_setting is not None:
        settings["max_attempts"] = channel.max_attempts_setting
    if channel.dead_letter_topic_setting is not None:
        settings["dead_letter_topic"] = channel.dead_letter_topic_setting
    if channel.ttl_setting is not None:
        settings["ttl_ms"] = round(channel.ttl_setting * 1000)
    return _with_limit(settings, channel.limit)


def _with_limit(settings: dict, limit) -> dict:
    if limit.max_depth_setting is not None:
        settings["max_depth"] = limit.max_depth_setting
    if limit.policy_setting is not None:
        settings["full_policy"] = limit.policy_setting
    return settings


def _limit_settings(entry: dict, where: str, log, path: str) -> tuple[int | None, str | None]:
    """``DepthLimit.configure`` arguments."""
    return (_setting(entry, "max_depth", parse_max_depth, where, log, path),
            _setting(entry, "full_policy", parse_full_policy, where, log, path))


def _setting(entry: dict, key: str, parse, where: str, log, path: str):
    """``entry[key]`` parsed, or None when absent or invalid (with a warning)."""
    if key not in entry:
        return None
    try:
        return parse(str(entry[key]))
    except ValueError:
        log.warning("skipping invalid %s %r of %s in %s", key, entry[key], where, path)
        return None


def _ttl_seconds(text: str) -> float:
    return parse_ttl_ms(text) / 1000


def _retention_seconds(text: str) -> float:
    return parse_retention(f"{int_in_range('retention_ms', text, round(MAX_RETENTION * 1000))}ms")


def _key_window_seconds(text: str) -> float:
    return parse_key_window(f"{int_in_range('publish_key_window_ms', text, round(MAX_KEY_WINDOW * 1000))}ms")


def _dead_letter_settings(entry: dict, topic_name: str, log, path: str) -> dict:
    """The channel's dead-letter keys, as ``Channel.configure_dead_letter``
    arguments; a bad value is skipped with a warning, like a bad name."""
    where = f"{topic_name}:{entry.get('name')}"
    settings = {"max_attempts": _setting(entry, "max_attempts", parse_max_attempts, where, log, path),
                "dead_letter_topic": None}
    name = entry.get("dead_letter_topic")
    if name is not None:
        if isinstance(name, str) and is_valid_dead_letter_topic(name, topic_name):
            settings["dead_letter_topic"] = name
        else:
            log.warning("skipping invalid dead_letter_topic %r of %s:%s in %s", name, topic_name,
                        entry.get("name"), path)
    return settings


def write(data_path: str, topics) -> None:
    write_atomically(metadata_path(data_path), encode(topics))


class MetadataWriter:
    """Rewrites nsqd.dat after changes, once for as many changes as arrive
    while a write runs: a create is answered only once the file holding it
    is on disk, yet 5,000 concurrent creates cost a handful of writes, not
    5,000 (each one the whole file). The file is encoded on the event loop,
    from a consistent view of the topics, and written and fsynced in a
    thread, so the loop keeps serving meanwhile.

    Each write re-encodes only the topics named as changed since the last
    one and reuses the others' entries: with 10,000 topics, formatting them
    all for every create would make creating them quadratic."""

    def __init__(self, data_path: str, topics, log):
        """``topics``: a callable giving the current Topic objects."""
        self.data_path = data_path
        self.topics = topics
        self.log = log
        self._next: asyncio.Future | None = None  # resolved by the write that has not started yet
        self._writer: asyncio.Task | None = None
        self._entries: dict[str, tuple] = {}  # topic name -> (Topic, its entry) as last written
        self._changed: set[str] | None = set()  # topics changed since; None: any may have

    def request(self, changed=None) -> asyncio.Future:
        """A write that starts after this call; the future resolves to True
        once it is durable, False if it failed (logged). ``changed``: the
        Topic whose entry (or channels) changed; None re-encodes them all."""
        if changed is None:
            self._changed = None
        elif self._changed is not None:
            self._changed.add(changed.name)
        loop = asyncio.get_running_loop()
        if self._next is None:
            self._next = loop.create_future()
        if self._writer is None:
            self._writer = loop.create_task(self._write_while_requested())
        return self._next

    async def _write_while_requested(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._next is not None:
                done, self._next = self._next, None
                written = False
                try:
                    data = self._encode_changes()
                    await loop.run_in_executor(None, write_atomically, metadata_path(self.data_path), data)
                    written = True
                except OSError as error:
                    self.log.error("failed to persist metadata: %s", error)
                finally:
                    done.set_result(written)
        finally:
            self._writer = None

    def _encode_changes(self) -> bytes:
        changed, self._changed = self._changed, set()
        previous = {} if changed is None else self._entries
        self._entries = entries = {}
        for topic in self.topics():
            known = previous.get(topic.name)
            if known is None or known[0] is not topic or topic.name in changed:
                known = (topic, topic_entry(topic))
            entries[topic.name] = known
        return _document([entry for _, entry in entries.values() if entry is not None])

    async def close(self) -> None:
        """Wait for the writes under way, so that a last synchronous write is
        not overtaken by an older one finishing in its thread."""
        while self._writer is not None:
            await asyncio.wait([self._writer])


def read(data_path: str, log) -> list[tuple]:
    """[(topic, paused, expiry settings, retention settings, limit settings, publish key window, [(channel, paused,
    dead-letter settings, TTL, limit settings)])]; invalid names and values
    are skipped with a warning."""
    path = metadata_path(data_path)
    try:
        with open(path, "rb") as f:
            data = json.load(f)
    except FileNotFoundError:
        return []
    except ValueError as error:
        raise ValueError(f"failed to parse metadata {path}: {error}") from None
    result = []
    for topic in data.get("topics") or []:
        name = topic.get("name", "")
        if not is_valid_topic_name(name) or is_ephemeral(name):
            log.warning("skipping creation of invalid topic %r from %s", name, path)
            continue
        channels = []
        for channel in topic.get("channels") or []:
            channel_name = channel.get("name", "")
            if not is_valid_channel_name(channel_name) or is_ephemeral(channel_name):
                log.warning("skipping creation of invalid channel %r from %s", channel_name, path)
                continue
            channels.append((channel_name, bool(channel.get("paused")),
                             _dead_letter_settings(channel, name, log, path),
                             _setting(channel, "ttl_ms", _ttl_seconds, f"{name}:{channel_name}", log, path),
                             _limit_settings(channel, f"{name}:{channel_name}", log, path)))
        expiry = {"ttl": _setting(topic, "ttl_ms", _ttl_seconds, name, log, path),
                  "expire_action": _setting(topic, "expire_action", parse_expire_action, name, log, path)}
        retention = {"seconds": _setting(topic, "retention_ms", _retention_seconds, name, log, path),
                     "max_bytes": _setting(topic, "retention_bytes", parse_retention_bytes, name, log, path)}
        key_window = _setting(topic, "publish_key_window_ms", _key_window_seconds, name, log, path)
        result.append((name, bool(topic.get("paused")), expiry, retention, _limit_settings(topic, name, log, path),
                       key_window, channels))
    return result
