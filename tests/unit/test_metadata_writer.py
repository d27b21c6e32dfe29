"""nsqd.dat: the encoder gives json.dumps's bytes, and the writer coalesces
concurrent changes into few whole-file writes without answering early."""

import asyncio
import json
import logging
import os
from types import SimpleNamespace

from nsqpy.nsqd import metadata

LOG = logging.getLogger("test_metadata_writer")


def _limit(max_depth=None, policy=None):
    return SimpleNamespace(max_depth_setting=max_depth, policy_setting=policy)


def _channel(name, paused=False, ephemeral=False, **settings):
    values = dict(max_attempts_setting=None, dead_letter_topic_setting=None, ttl_setting=None, limit=_limit())
    values.update(settings)
    return SimpleNamespace(name=name, paused=paused, ephemeral=ephemeral, **values)


def _topic(name, channels=(), paused=False, ephemeral=False, **settings):
    values = dict(ttl_setting=None, expire_action_setting=None, retention_setting=None,
                  retention_bytes_setting=None, publish_key_window_setting=None, limit=_limit())
    values.update(settings)
    return SimpleNamespace(name=name, paused=paused, ephemeral=ephemeral,
                           channels={channel.name: channel for channel in channels}, **values)


def _as_dicts(topics) -> bytes:
    """The layout written with dicts and json.dumps: what the encoder must equal."""
    def extra(entry, pairs):
        entry.update((key, value) for key, value in pairs if value is not None)
        return entry

    entries = []
    for topic in topics:
        if topic.ephemeral:
            continue
        channels = [extra({"name": c.name, "paused": c.paused}, [
            ("max_attempts", c.max_attempts_setting), ("dead_letter_topic", c.dead_letter_topic_setting),
            ("ttl_ms", None if c.ttl_setting is None else round(c.ttl_setting * 1000)),
            ("max_depth", c.limit.max_depth_setting), ("full_policy", c.limit.policy_setting)])
            for c in topic.channels.values() if not c.ephemeral]
        entries.append(extra({"name": topic.name, "paused": topic.paused, "channels": channels or None}, [
            ("ttl_ms", None if topic.ttl_setting is None else round(topic.ttl_setting * 1000)),
            ("expire_action", topic.expire_action_setting),
            ("retention_ms", None if topic.retention_setting is None else round(topic.retention_setting * 1000)),
            ("retention_bytes", topic.retention_bytes_setting),
            ("publish_key_window_ms", None if topic.publish_key_window_setting is None
             else round(topic.publish_key_window_setting * 1000)),
            ("max_depth", topic.limit.max_depth_setting), ("full_policy", topic.limit.policy_setting)]))
    return json.dumps({"topics": entries or None, "version": "1.3.0"}, separators=(",", ":")).encode()


def test_the_encoder_writes_what_json_dumps_would():
    topics = [
        _topic("plain", [_channel("a"), _channel("b", paused=True), _channel("gone#ephemeral", ephemeral=True)]),
        _topic("bare", paused=True),
        _topic("scratch#ephemeral", [_channel("x")], ephemeral=True),
        _topic("policed", [_channel("c", max_attempts_setting=3, dead_letter_topic_setting="dl", ttl_setting=1.5,
                                    limit=_limit(10, "drop-oldest"))],
               ttl_setting=2.0, expire_action_setting="dead-letter", limit=_limit(5, "reject")),
        _topic("kept", retention_setting=86400.0, retention_bytes_setting=1 << 30),
        _topic("not-kept", retention_setting=0.0),
        _topic("keyed", publish_key_window_setting=600.0), _topic("unkeyed", publish_key_window_setting=0.0),
    ]
    assert metadata.encode(topics) == _as_dicts(topics)
    assert metadata.encode([]) == _as_dicts([]) == b'{"topics":null,"version":"1.3.0"}'


def test_what_is_written_reads_back(tmp_path):
    topics = [_topic("t1", [_channel("c1", paused=True, max_attempts_setting=4)], ttl_setting=0.25), _topic("t2"),
              _topic("t3", retention_setting=3600.0, retention_bytes_setting=0),
              _topic("t4", publish_key_window_setting=30.0)]
    metadata.write(str(tmp_path), topics)
    unset = {"seconds": None, "max_bytes": None}
    assert metadata.read(str(tmp_path), LOG) == [
        ("t1", False, {"ttl": 0.25, "expire_action": None}, unset, (None, None), None,
         [("c1", True, {"max_attempts": 4, "dead_letter_topic": None}, None, (None, None))]),
        ("t2", False, {"ttl": None, "expire_action": None}, unset, (None, None), None, []),
        ("t3", False, {"ttl": None, "expire_action": None}, {"seconds": 3600.0, "max_bytes": 0}, (None, None),
         None, []),
        ("t4", False, {"ttl": None, "expire_action": None}, unset, (None, None), 30.0, []),
    ]


class CountingTopics:
    """The writer's view of the registry, counting how often it is encoded."""

    def __init__(self):
        self.topics: list = []
        self.encoded = 0

    def __call__(self):
        self.encoded += 1
        return list(self.topics)


def _saved_names(data_path) -> list[str]:
    with open(os.path.join(data_path, metadata.FILE_NAME), "rb") as f:
        return [entry["name"] for entry in json.load(f)["topics"] or []]


def test_concurrent_changes_share_one_write_and_wait_for_it(tmp_path):
    async def scenario():
        registry = CountingTopics()
        writer = metadata.MetadataWriter(str(tmp_path), registry, LOG)
        waits = []
        for index in range(50):
            registry.topics.append(_topic(f"t{index}"))
            waits.append(writer.request())
        assert len(set(map(id, waits))) == 1  # all fifty wait for the same write
        assert all(await asyncio.gather(*waits))
        assert _saved_names(tmp_path) == [f"t{index}" for index in range(50)]
        await writer.close()
        return registry.encoded

    assert asyncio.run(scenario()) == 1


def test_a_change_made_while_a_write_runs_waits_for_the_next_one(tmp_path):
    async def scenario():
        registry = CountingTopics()
        writer = metadata.MetadataWriter(str(tmp_path), registry, LOG)
        registry.topics.append(_topic("first"))
        first = writer.request()
        while registry.encoded == 0:  # the first write has taken its snapshot
            await asyncio.sleep(0)
        registry.topics.append(_topic("second"))
        second = writer.request()
        assert second is not first
        assert await first
        assert await second
        assert _saved_names(tmp_path) == ["first", "second"]
        await writer.close()
        return registry.encoded

    assert asyncio.run(scenario()) == 2


def test_a_failed_write_is_reported_to_the_waiters_and_logged(tmp_path, caplog):
    async def scenario():
        writer = metadata.MetadataWriter(str(tmp_path / "missing"), CountingTopics(), LOG)
        written = await writer.request()
        await writer.close()
        return written

    with caplog.at_level(logging.ERROR):
        assert asyncio.run(scenario()) is False
    assert "failed to persist metadata" in caplog.text


def _saved_entries(data_path) -> dict:
    with open(os.path.join(data_path, metadata.FILE_NAME), "rb") as f:
        return {entry["name"]: entry["paused"] for entry in json.load(f)["topics"] or []}


def test_a_write_reencodes_the_topics_named_as_changed_and_reuses_the_others(tmp_path):
    async def scenario():
        registry = CountingTopics()
        kept, changed = _topic("kept"), _topic("changed")
        registry.topics = [kept, changed]
        writer = metadata.MetadataWriter(str(tmp_path), registry, LOG)
        assert await writer.request()
        assert _saved_entries(tmp_path) == {"kept": False, "changed": False}

        changed.paused = True
        assert await writer.request(changed)
        assert _saved_entries(tmp_path) == {"kept": False, "changed": True}

        kept.paused = True  # not named: its entry as last written is reused...
        assert await writer.request(changed)
        assert _saved_entries(tmp_path) == {"kept": False, "changed": True}
        assert await writer.request()  # ...until a write re-encodes everything
        assert _saved_entries(tmp_path) == {"kept": True, "changed": True}

        registry.topics = [_topic("changed"), _topic("added")]  # deleted, re-created, added
        assert await writer.request(registry.topics[1])
        assert _saved_entries(tmp_path) == {"changed": False, "added": False}
        await writer.close()

    asyncio.run(scenario())
