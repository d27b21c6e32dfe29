"""``nsqd.dat``: the topics and channels (and their paused flags) that exist,
in NSQ's JSON layout, so a data directory survives a restart and moves
between NSQ's nsqd and ours. Ephemeral topics and channels are never written.

A channel's dead-letter settings (dead_letter.py) and a topic's or a
channel's expiry and depth limit settings (expiry.py, bounds.py) are extra keys of their entries,
written only when set: Go's nsqd ignores keys it does not know, so
it still loads the file (and drops them when it rewrites it).
"""

import json
import os

from ..atomicfile import write_atomically
from ..protocol import NSQ_VERSION
from ..protocol.names import is_ephemeral, is_valid_channel_name, is_valid_topic_name
from .bounds import parse_full_policy, parse_max_depth
from .dead_letter import is_valid_dead_letter_topic, parse_max_attempts
from .expiry import parse_expire_action, parse_ttl_ms

FILE_NAME = "nsqd.dat"


def metadata_path(data_path: str) -> str:
    return os.path.join(data_path, FILE_NAME)


def encode(topics) -> bytes:
    """``topics``: Topic objects (name, paused, channels)."""
    entries = []
    for topic in topics:
        if topic.ephemeral:
            continue
        channels = [_channel_entry(channel) for channel in topic.channels.values() if not channel.ephemeral]
        entry = {"name": topic.name, "paused": topic.paused, "channels": channels or None}
        if topic.ttl_setting is not None:
            entry["ttl_ms"] = round(topic.ttl_setting * 1000)
        if topic.expire_action_setting is not None:
            entry["expire_action"] = topic.expire_action_setting
        entry.update(_limit_entry(topic.limit))
        entries.append(entry)
    return json.dumps({"topics": entries or None, "version": NSQ_VERSION}, separators=(",", ":")).encode()


def _channel_entry(channel) -> dict:
    entry = {"name": channel.name, "paused": channel.paused}
    if channel.max_attempts_setting is not None:
        entry["max_attempts"] = channel.max_attempts_setting
    if channel.dead_letter_topic_setting is not None:
        entry["dead_letter_topic"] = channel.dead_letter_topic_setting
    if channel.ttl_setting is not None:
        entry["ttl_ms"] = round(channel.ttl_setting * 1000)
    entry.update(_limit_entry(channel.limit))
    return entry


def _limit_entry(limit) -> dict:
    entry = {}
    if limit.max_depth_setting is not None:
        entry["max_depth"] = limit.max_depth_setting
    if limit.policy_setting is not None:
        entry["full_policy"] = limit.policy_setting
    return entry


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


def read(data_path: str, log) -> list[tuple]:
    """[(topic, paused, expiry settings, limit settings, [(channel, paused,
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
        result.append((name, bool(topic.get("paused")), expiry, _limit_settings(topic, name, log, path), channels))
    return result
