"""``nsqd.dat``: the topics and channels (and their paused flags) that exist,
in NSQ's JSON layout, so a data directory survives a restart and moves
between NSQ's nsqd and ours. Ephemeral topics and channels are never written.
"""

import json
import os

from ..atomicfile import write_atomically
from ..protocol import NSQ_VERSION
from ..protocol.names import is_ephemeral, is_valid_channel_name, is_valid_topic_name

FILE_NAME = "nsqd.dat"


def metadata_path(data_path: str) -> str:
    return os.path.join(data_path, FILE_NAME)


def encode(topics) -> bytes:
    """``topics``: Topic objects (name, paused, channels)."""
    entries = []
    for topic in topics:
        if topic.ephemeral:
            continue
        channels = [
            {"name": channel.name, "paused": channel.paused}
            for channel in topic.channels.values()
            if not channel.ephemeral
        ]
        entries.append({"name": topic.name, "paused": topic.paused, "channels": channels or None})
    return json.dumps({"topics": entries or None, "version": NSQ_VERSION}, separators=(",", ":")).encode()


def write(data_path: str, topics) -> None:
    write_atomically(metadata_path(data_path), encode(topics))


def read(data_path: str, log) -> list[tuple[str, bool, list[tuple[str, bool]]]]:
    """[(topic, paused, [(channel, paused)])]; invalid names are skipped with a warning."""
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
            channels.append((channel_name, bool(channel.get("paused"))))
        result.append((name, bool(topic.get("paused")), channels))
    return result
