"""The REPL codec and what a peer's shadow makes of an origin's records:
which channels each message is still owed to."""

import os
import struct
import time

import pytest

from nsqpy.nsqd.replication.shadow import Shadow
from nsqpy.nsqd.replication.shadowlog import ShadowLogs
from nsqpy.protocol.commands import encode_mpub_body
from nsqpy.protocol.replication import (CHANNEL, DELETED, EMPTIED, KEYS_PER_RECORD, PAUSED, RESET, UNPAUSED,
                                        ChannelEvent, Done, Keyed, Published, ReplicationError, BatchWriter,
                                        done_record, event_record, keys_record, keys_records, published_record,
                                        read_records)

ID_A, ID_B, ID_C = b"0" * 15 + b"a", b"0" * 15 + b"b", b"0" * 15 + b"c"


def pub(topic: str, message_id: bytes, body: bytes, channels: tuple[str, ...]) -> bytes:
    return published_record(topic, 1, 0, [message_id], encode_mpub_body([body]), channels)


def batch(*records: bytes) -> bytes:
    writer = BatchWriter()
    for record in records:
        writer.add(record)
    return b"".join(writer.take_parts()[0])


def test_records_read_back_as_written():
    payload = batch(published_record("t", 123, 0, [ID_A], encode_mpub_body([b"body"]), ()),
                    published_record("t", 456, 2500, [ID_B, ID_C], encode_mpub_body([b"b", b"c"]), ("ch1", "ch2")),
                    done_record("t", "ch1", [ID_A, ID_B]),
                    event_record(CHANNEL, "t", "ch3"), event_record(DELETED, "t", ""))
    assert list(read_records(payload)) == [
        Published("t", 123, 0, (), (ID_A,), encode_mpub_body([b"body"])),
        Published("t", 456, 2500, ("ch1", "ch2"), (ID_B, ID_C), encode_mpub_body([b"b", b"c"])),
        Done("t", "ch1", (ID_A, ID_B)),
        ChannelEvent(CHANNEL, "t", "ch3"),
        ChannelEvent(DELETED, "t", ""),
    ]


@pytest.mark.parametrize("payload", [
    b"P", b"P\x00\x01t" + b"x" * 10, b"Z\x00\x01t", b"F\x00\x01t\x00\x02ch\x00\x00\x00\x05",
    published_record("t", 1, 0, [ID_A, ID_B], encode_mpub_body([b"only one"]), ()),
    b"F\x00\x01t\x00\x02ch\xff\xff\xff\xff",  # four billion ids claimed: refused before anything is made
    published_record("t", 1, 0, [ID_A], b"\x00\x00\x00\x01\x00\x00\x10\x00short", ()),  # a body size past the end
])
def test_a_payload_that_does_not_parse_is_refused(payload):
    with pytest.raises(ReplicationError):
        list(read_records(payload))


def owed(shadow: Shadow, topic: str = "t") -> dict:
    return {message_id: channels for message_id, _, _, _, channels in shadow.topics[topic].owed()}


def test_a_message_is_owed_to_the_channels_the_origin_names_and_leaves_once_all_are_done():
    shadow = Shadow("n1:4150", 7)
    shadow.apply(read_records(batch(event_record(CHANNEL, "t", "a"), event_record(CHANNEL, "t", "b"),
                                    pub("t", ID_A, b"x", ("a", "b")))))
    shadow.apply(read_records(batch(event_record(CHANNEL, "t", "c"), pub("t", ID_B, b"y", ("a", "b", "c")))))
    assert owed(shadow) == {ID_A: {"a", "b"}, ID_B: {"a", "b", "c"}}
    shadow.apply(read_records(batch(done_record("t", "a", [ID_A, ID_B]), done_record("t", "b", [ID_A]))))
    assert owed(shadow) == {ID_B: {"b", "c"}}
    assert len(shadow) == 1


def test_messages_waiting_in_a_topic_go_to_the_channels_that_appear_first():
    shadow = Shadow("n1:4150", 7)
    shadow.apply(read_records(batch(pub("t", ID_A, b"x", ()))))
    assert owed(shadow) == {ID_A: None}
    # the origin hands its backlog to the channels made in one turn: one batch
    shadow.apply(read_records(batch(event_record(CHANNEL, "t", "a"), event_record(CHANNEL, "t", "b"))))
    shadow.apply(read_records(batch(event_record(CHANNEL, "t", "late"))))
    assert owed(shadow) == {ID_A: {"a", "b"}}


def test_messages_the_origin_says_wait_in_its_topic_wait_whatever_channels_there_are():
    shadow = Shadow("n1:4150", 7)
    shadow.apply(read_records(batch(event_record(CHANNEL, "t", "a"), pub("t", ID_A, b"x", ()))))
    assert owed(shadow) == {ID_A: None}


def test_deleted_and_emptied_channels_are_owed_nothing():
    shadow = Shadow("n1:4150", 7)
    shadow.apply(read_records(batch(event_record(CHANNEL, "t", "a"), event_record(CHANNEL, "t", "b"),
                                    pub("t", ID_A, b"x", ("a", "b")),
                                    pub("t", ID_B, b"y", ("b",)))))
    shadow.apply(read_records(batch(event_record(EMPTIED, "t", "a"))))
    assert owed(shadow) == {ID_A: {"b"}, ID_B: {"b"}}
    shadow.apply(read_records(batch(event_record(DELETED, "t", "b"))))
    assert owed(shadow) == {}
    shadow.apply(read_records(batch(pub("t", ID_C, b"z", ("a",)), event_record(DELETED, "t", ""))))
    assert shadow.topics == {}


def test_pauses_follow_the_origin_and_rebuild_from_the_shadows_records():
    shadow = Shadow("n1:4150", 7)
    shadow.apply(read_records(batch(event_record(CHANNEL, "t", "a"), event_record(CHANNEL, "t", "b"),
                                    event_record(PAUSED, "t", "a"), event_record(PAUSED, "t", ""),
                                    event_record(PAUSED, "t", "b"), event_record(UNPAUSED, "t", "b"),
                                    pub("t", ID_A, b"x", ("a", "b")))))
    assert shadow.topics["t"].paused == {"a", ""}
    rebuilt = Shadow("n1:4150", 7)
    rebuilt.apply(read_records(shadow.as_payload()))
    assert rebuilt.topics["t"].paused == {"a", ""} and owed(rebuilt) == {ID_A: {"a", "b"}}


def test_a_reset_forgets_everything_the_records_after_it_rebuild():
    shadow = Shadow("n1:4150", 7)
    shadow.apply(read_records(batch(event_record(CHANNEL, "t", "a"), pub("t", ID_A, b"x", ("a",)))))
    shadow.apply(read_records(batch(event_record(RESET, "", ""), event_record(CHANNEL, "t", "a"),
                                    pub("t", ID_B, b"y", ("a",)))))
    assert owed(shadow) == {ID_B: {"a"}}


def test_a_log_cut_by_a_crash_is_read_to_its_last_whole_frame_and_trimmed_there(tmp_path):
    logs = ShadowLogs(str(tmp_path), loop=None)
    whole = batch(pub("t", ID_A, b"x", ("a",)))
    os.makedirs(logs.directory)
    path = os.path.join(logs.directory, "127.0.0.1_4150.7.log")
    with open(path, "wb") as f:
        f.write(struct.pack(">I", len(whole)) + whole + struct.pack(">I", 100) + b"cut")
    assert logs.load() == [("127.0.0.1:4150", 7, [whole])]
    assert os.path.getsize(path) == 4 + len(whole)


def test_a_done_for_a_message_this_peer_never_held_changes_nothing():
    shadow = Shadow("n1:4150", 7)
    shadow.apply(read_records(batch(event_record(CHANNEL, "t", "a"), done_record("t", "a", [ID_A]))))
    assert len(shadow) == 0


def test_the_messages_of_one_mpub_are_owed_one_by_one_with_their_bodies():
    shadow = Shadow("n1:4150", 7)
    shadow.apply(read_records(batch(event_record(CHANNEL, "t", "a"), event_record(CHANNEL, "t", "b"),
                                    published_record("t", 5, 0, [ID_A, ID_B, ID_C],
                                                     encode_mpub_body([b"x", b"yy", b"zzz"]), ("a", "b")))))
    shadow.apply(read_records(batch(done_record("t", "a", [ID_B]), done_record("t", "b", [ID_B, ID_C]))))
    assert [(i, body, channels) for i, body, _, _, channels in shadow.topics["t"].owed()] == [
        (ID_A, b"x", {"a", "b"}), (ID_C, b"zzz", {"a"})]


def test_a_whole_shadow_goes_in_slices_that_each_fit_a_batch_and_rebuild_it_exactly():
    """A record none of whose messages is done goes on as it came; slices
    are cut by message count and by bytes, so a hand-over of big messages
    never makes a batch a peer refuses."""
    from nsqpy.nsqd.replication.shadow import SLICE, SLICE_BYTES

    shadow = Shadow("n1:4150", 7)
    big = b"x" * (1024 * 1024)
    ids = [b"%016d" % n for n in range(24)]
    shadow.apply(read_records(batch(event_record(CHANNEL, "t", "ch"),
                                    published_record("t", 1, 0, ids[:12], encode_mpub_body([big] * 12), ("ch",)),
                                    published_record("t", 2, 0, ids[12:], encode_mpub_body([big] * 12), ("ch",)),
                                    done_record("t", "ch", [ids[0]]))))
    slices = list(shadow.payload_slices())
    assert len(slices) >= 2 and all(len(part) < 2 * SLICE_BYTES for part in slices)
    rebuilt = Shadow("n1:4150", 7)
    for part in slices:
        rebuilt.apply(read_records(part))
    assert owed(rebuilt) == owed(shadow) and len(rebuilt) == 23
    small = Shadow("n1:4150", 8)
    small.apply(read_records(batch(event_record(CHANNEL, "t", "ch"), *(
        published_record("t", 1, 0, [b"%016d" % n], encode_mpub_body([b"m"]), ("ch",)) for n in range(SLICE + 1)))))
    assert len(list(small.payload_slices())) == 2


def _message(number: int, body: bytes, timestamp: int = 5):
    from nsqpy.nsqd.message import Message

    return Message(b"%016d" % number, body, timestamp)


def _snapshot(*sources):
    from nsqpy.nsqd.replication.snapshot import Snapshot

    return Snapshot(list(sources), clock=lambda: 100.0)


def test_a_snapshot_of_a_big_backlog_is_cut_into_records_that_each_fit_a_batch():
    from nsqpy.nsqd.replication.shadow import SLICE, SLICE_BYTES
    from nsqpy.nsqd.replication.snapshot import Source

    waiting = [(_message(n, b"x" * 1000), 0.0) for n in range(3 * SLICE)]
    slices = list(_snapshot(Source("t", None, waiting, iter(()))).slices())
    assert [[count for _, count in part] for part in slices] == [[SLICE]] * 3
    big = [(_message(n, b"x" * (1024 * 1024)), 0.0) for n in range(20)]
    records = [record for part in _snapshot(Source("t", "ch", big, iter(()))).slices() for record in part]
    assert sum(count for _, count in records) == 20 and all(len(r) <= SLICE_BYTES + 2 ** 20 for r, _ in records)
    messages = [m for record, _ in records for p in read_records(record) for m in p.ids]
    assert messages == [m.id for m, _ in big]
    assert list(_snapshot(Source("t", None, [], iter(()))).slices()) == []


def test_a_snapshot_keeps_timestamps_and_delays_and_reads_the_disk_as_it_goes():
    """One record per run of messages with one timestamp (an MPUB's); a
    deferred message alone, with what is left of its delay; the disk's
    messages after those in memory, decoded only when their slice is made."""
    from nsqpy.nsqd.replication.snapshot import Source

    read = []

    def disk():
        for n in (5, 6):
            read.append(n)
            yield _message(n, b"d", timestamp=9).encode()

    held = [(_message(1, b"a"), 0.0), (_message(2, b"b"), 0.0), (_message(3, b"c", 7), 0.0),
            (_message(4, b"late", 8), 102.5)]
    snapshot = _snapshot(Source("t", "ch", held, disk()))
    assert read == []
    found = [p for part in snapshot.slices() for record, _ in part for p in read_records(record)]
    assert [(p.timestamp, p.defer_ms, len(p.ids), p.channels) for p in found] == [
        (5, 0, 2, ("ch",)), (7, 0, 1, ("ch",)), (8, 2500, 1, ("ch",)), (9, 0, 2, ("ch",))]
    assert read == [5, 6]


def test_what_a_snapshot_has_not_sent_of_a_channel_deleted_meanwhile_is_left_out():
    from nsqpy.nsqd.replication.shadow import SLICE
    from nsqpy.nsqd.replication.snapshot import Source

    held = [(_message(n, b"x", timestamp=n), 0.0) for n in range(3 * SLICE)]
    snapshot = _snapshot(Source("t", "gone", held, iter(())), Source("t", "kept", held[:10], iter(())),
                         Source("u", None, held[:10], iter(())))
    slices = snapshot.slices()
    first = next(slices)
    snapshot.forget("t", "gone")
    snapshot.forget("u", None, whole_topic=True)
    rest = [p for part in slices for record, _ in part for p in read_records(record)]
    assert sum(count for _, count in first) == SLICE
    assert {(p.topic, p.channels) for p in rest} == {("t", ("kept",))} and len(rest) == 10


def test_a_message_sent_once_per_channel_that_holds_it_is_owed_to_each():
    shadow = Shadow("n1:4150", 7)
    shadow.apply(read_records(batch(event_record(CHANNEL, "t", "a"), event_record(CHANNEL, "t", "b"),
                                    event_record(CHANNEL, "t", "c"),
                                    published_record("t", 5, 0, [ID_A, ID_B], encode_mpub_body([b"x", b"y"]), ("a",)),
                                    published_record("t", 5, 0, [ID_B, ID_C], encode_mpub_body([b"y", b"z"]), ("b",)),
                                    pub("t", ID_B, b"y", ("c",)))))
    assert [(i, body, channels) for i, body, _, _, channels in shadow.topics["t"].owed()] == [
        (ID_A, b"x", {"a"}), (ID_B, b"y", {"a", "b", "c"}), (ID_C, b"z", {"b"})]
    shadow.apply(read_records(batch(done_record("t", "a", [ID_A, ID_B]), done_record("t", "b", [ID_B]))))
    assert owed(shadow) == {ID_B: {"c"}, ID_C: {"b"}}


def _spilling_shadow(tmp_path, memory_messages: int) -> Shadow:
    shadow = Shadow("n1:4150", 7, str(tmp_path / "spill"), memory_messages)
    shadow.apply(read_records(batch(event_record(CHANNEL, "t", "a"), event_record(CHANNEL, "t", "b"))))
    return shadow


def _spill_files(tmp_path) -> list[str]:
    return sorted(os.listdir(tmp_path / "spill")) if (tmp_path / "spill").exists() else []


def test_bodies_past_memory_go_to_disk_and_come_back_as_they_were(tmp_path):
    shadow = _spilling_shadow(tmp_path, memory_messages=2)
    ids = [b"%016d" % n for n in range(6)]
    shadow.apply(read_records(batch(
        published_record("t", 1, 0, ids[:3], encode_mpub_body([b"m0", b"m1", b"m2"]), ("a", "b")),
        published_record("t", 2, 0, ids[3:5], encode_mpub_body([b"m3", b"m4"]), ("a", "b")),
        pub("t", ids[5], b"m5", ("a", "b")))))
    assert shadow.spilled_bytes == len(encode_mpub_body([b"m0", b"m1", b"m2"])) + len(encode_mpub_body([b"m3", b"m4"]))
    shadow.apply(read_records(batch(done_record("t", "a", [ids[0], ids[3]]), done_record("t", "b", [ids[3]]))))
    assert [(i, body, channels) for i, body, _, _, channels in shadow.topics["t"].owed()] == [
        (ids[0], b"m0", {"b"}), (ids[1], b"m1", {"a", "b"}), (ids[2], b"m2", {"a", "b"}),
        (ids[4], b"m4", {"a", "b"}), (ids[5], b"m5", {"a", "b"})]
    rebuilt = Shadow("n1:4150", 7)
    for part in shadow.payload_slices():
        rebuilt.apply(read_records(part))
    assert list(rebuilt.topics["t"].owed()) == list(shadow.topics["t"].owed())
    assert _spill_files(tmp_path)
    shadow.close()
    assert _spill_files(tmp_path) == []


def test_a_spilled_segment_goes_once_nothing_in_it_is_owed(tmp_path, monkeypatch):
    from nsqpy.nsqd.replication import shadowspill

    monkeypatch.setattr(shadowspill, "SEGMENT_BYTES", 100)
    shadow = _spilling_shadow(tmp_path, memory_messages=0)
    ids = [b"%016d" % n for n in range(4)]
    for message_id in ids:  # 100-byte bodies: a segment each
        shadow.apply(read_records(batch(pub("t", message_id, b"x" * 100, ("a",)))))
    assert len(_spill_files(tmp_path)) == 4
    shadow.apply(read_records(batch(done_record("t", "a", ids[:2]))))
    shadow.apply(read_records(batch(pub("t", b"%016d" % 9, b"y" * 100, ("a",)))))
    assert len(_spill_files(tmp_path)) == 3  # the first two went; the third is still owed, the fourth is written
    assert [body for _, body, _, _, _ in shadow.topics["t"].owed()] == [b"x" * 100, b"x" * 100, b"y" * 100]


def test_a_disk_that_refuses_the_bodies_leaves_them_in_memory(tmp_path):
    (tmp_path / "spill").write_text("not a directory")
    shadow = Shadow("n1:4150", 7, str(tmp_path / "spill"), 0)
    shadow.apply(read_records(batch(event_record(CHANNEL, "t", "a"), pub("t", ID_A, b"kept", ("a",)))))
    assert isinstance(shadow.spill_failure, OSError)
    assert owed(shadow) == {ID_A: {"a"}} and [b for _, b, _, _, _ in shadow.topics["t"].owed()] == [b"kept"]


def test_keys_read_back_and_a_shadow_keeps_them_for_the_origins_window():
    now_ms = int(time.time() * 1000)
    record = keys_record("t", 60_000, [(now_ms - 120_000, b"old"), (now_ms - 1000, b"k1"), (now_ms, b"k2")])
    assert list(read_records(record)) == [Keyed("t", 60_000, ((now_ms - 120_000, b"old"), (now_ms - 1000, b"k1"),
                                                              (now_ms, b"k2")))]
    shadow = Shadow("origin:4150", 7)
    shadow.apply(read_records(record))
    assert (len(shadow), shadow.keys_held()) == (0, 2)  # keys alone are worth a takeover
    rebuilt = Shadow("origin:4150", 7)
    rebuilt.apply(read_records(shadow.as_payload()))
    assert rebuilt.topics["t"].live_keys() == [(now_ms - 1000, b"k1"), (now_ms, b"k2")]


def test_held_keys_are_cut_into_records_that_each_fit_a_batch():
    keys = [(1, b"key-%06d" % n) for n in range(KEYS_PER_RECORD * 2 + 3)]
    records = keys_records("t", 1000, keys)
    assert [len(list(read_records(r))[0].keys) for r in records] == [KEYS_PER_RECORD, KEYS_PER_RECORD, 3]


def test_a_keys_record_cut_short_is_refused():
    with pytest.raises(ReplicationError):
        list(read_records(keys_record("t", 1000, [(1, b"abc")])[:-2]))
