"""The disk queue's file format and its behaviour across reopen, roll and corruption."""

import contextlib
import os
import struct
import subprocess
import sys

import pytest

from nsqpy.diskqueue import DiskQueue
from nsqpy.diskqueue.journal import Journal


def make(path, **kw) -> DiskQueue:
    options = dict(max_bytes_per_file=100, min_msg_size=1, max_msg_size=50, sync_every=1)
    options.update(kw)
    return DiskQueue("q", str(path), **options)


def test_fifo_across_files_and_reopen(tmp_path):
    q = make(tmp_path)
    records = [b"%02d" % i * 10 for i in range(20)]  # 20-byte records, 4 per 100-byte file
    for r in records[:10]:
        q.put(r)
    assert q.depth == 10
    assert [q.get() for _ in range(3)] == records[:3]
    q.close()
    assert sorted(os.listdir(tmp_path))[0] == "q.diskqueue.000000.dat"
    meta = (tmp_path / "q.diskqueue.meta.dat").read_text()
    assert meta == "7\n0,72\n2,48\n"

    q = make(tmp_path)
    for r in records[10:]:
        q.put(r)
    assert [q.get() for _ in range(17)] == records[3:]
    assert q.get() is None and q.depth == 0
    q.close()
    # fully read files are deleted
    assert [n for n in os.listdir(tmp_path) if n.endswith(".dat") and "meta" not in n] == \
        [f"q.diskqueue.{q.write_file_num:06d}.dat"]


def test_unread_records_are_those_written_before_and_outlive_the_files_read_past_meanwhile(tmp_path):
    q = make(tmp_path)
    records = [b"%02d" % i * 10 for i in range(12)]  # 20-byte records, 4 per 100-byte file
    for r in records[:10]:
        q.put(r)
    assert q.get() == records[0]
    unread = q.unread()
    q.put(records[10])  # written after: not in it
    assert [q.get() for _ in range(8)] == records[1:9]  # the first two files are read and deleted
    assert "q.diskqueue.000000.dat" not in os.listdir(tmp_path)
    assert list(unread) == records[1:10]
    q.put(records[11])
    assert q.get() == records[9] and list(q.unread()) == records[10:]
    q.close()


def test_record_format_is_length_prefixed(tmp_path):
    q = make(tmp_path)
    q.put(b"hello")
    q.close()
    assert (tmp_path / "q.diskqueue.000000.dat").read_bytes() == struct.pack(">i", 5) + b"hello"


def test_empty_moves_on_to_a_new_file(tmp_path):
    q = make(tmp_path)
    for _ in range(6):
        q.put(b"x" * 20)
    q.empty()
    assert q.depth == 0 and q.get() is None
    q.put(b"after")
    assert q.get() == b"after"
    q.close()


def test_corrupt_file_is_renamed_bad_and_reading_goes_on(tmp_path, caplog):
    q = make(tmp_path)
    for i in range(8):
        q.put(b"%d" % i * 20)  # two files of four
    q.close()
    first = tmp_path / "q.diskqueue.000000.dat"
    first.write_bytes(struct.pack(">i", 10**6) + first.read_bytes()[4:])
    q = make(tmp_path)
    got = []
    while (r := q.get()) is not None:
        got.append(r)
    assert got == [b"%d" % i * 20 for i in range(4, 8)]
    assert (tmp_path / "q.diskqueue.000000.dat.bad").exists()
    assert q.depth == 0
    assert "renamed it .bad" in caplog.text


def test_bytes_past_the_recorded_write_position_are_not_reused(tmp_path):
    q = make(tmp_path)
    q.put(b"kept")
    q.close()
    with open(tmp_path / "q.diskqueue.000000.dat", "ab") as f:
        f.write(b"\x00\x00\x00\x05torn")  # a write that was never acknowledged
    q = make(tmp_path)
    q.put(b"new")
    assert [q.get(), q.get(), q.get()] == [b"kept", b"new", None]
    q.close()


def test_refuses_records_outside_the_size_limits(tmp_path):
    q = make(tmp_path)
    with pytest.raises(ValueError):
        q.put(b"x" * 51)
    with pytest.raises(ValueError):
        q.put(b"")
    q.close()


def segment_numbers(path) -> list[int]:
    return sorted(int(n.split(".")[2]) for n in os.listdir(path) if n.endswith(".dat") and n.split(".")[2].isdigit())


def test_unacknowledged_records_come_back_after_a_crash(tmp_path):
    q = make(tmp_path)  # sync_every=1: every write and ack is durable at once
    records = [b"%02d" % i * 10 for i in range(12)]  # 3 segments of 4
    for r in records:
        q.put(r)
    taken = [q.get_with_token() for _ in range(10)]
    for i in (0, 1, 3, 4, 5, 6, 7, 8):  # 2 and 9 stay unacknowledged
        q.ack(taken[i][1])
    assert q.unacked_count == 2
    assert segment_numbers(tmp_path) == [0, 1, 2]  # segment 0 still holds record 2
    # a crash: no close(); what the meta file says is what a restart sees
    again = make(tmp_path)
    assert again.depth == 4
    # the unacknowledged ones and the unread ones; 3-8, acknowledged out of order, not again
    assert drain(again) == [records[2], records[9], records[10], records[11]]
    again.close()


def drain(q: DiskQueue) -> list[bytes]:
    taken = []
    while (r := q.get()) is not None:
        taken.append(r)
    return taken


def records_from_read_position(path) -> tuple[int, int]:
    """What go-diskqueue sees: (the meta file's depth, the records actually
    between its read and write positions)."""
    depth, read, write = (path / "q.diskqueue.meta.dat").read_text().split("\n")[:3]
    (read_file, read_pos), (write_file, write_pos) = (tuple(map(int, line.split(","))) for line in (read, write))
    count = 0
    for number in range(read_file, write_file + 1):
        data = (path / f"q.diskqueue.{number:06d}.dat").read_bytes()
        pos = read_pos if number == read_file else 0
        end = write_pos if number == write_file else len(data)
        while pos < end:
            pos += 4 + struct.unpack_from(">i", data, pos)[0]
            count += 1
    return int(depth), count


def test_out_of_order_acks_survive_two_crashes_and_go_still_reads_the_meta(tmp_path):
    q = make(tmp_path)
    records = [b"%02d" % i * 10 for i in range(12)]
    for r in records:
        q.put(r)
    taken = [q.get_with_token() for _ in range(8)]
    for i in (1, 2, 4, 5, 6):  # 0, 3 and 7 stay outstanding
        q.ack(taken[i][1])
    depth, present = records_from_read_position(tmp_path)
    assert depth == present == 12
    # first crash; after it, 0 is read and kept outstanding, so 1 and 2 (passed
    # over) must stay listed behind it
    again = make(tmp_path)
    assert again.depth == 7
    first, token = again.get_with_token()
    assert first == records[0]
    assert again.get_with_token()[0] == records[3]
    assert records_from_read_position(tmp_path) == (12, 12)
    # second crash
    third = make(tmp_path)
    assert drain(third) == [records[0], records[3], records[7], *records[8:]]
    assert records_from_read_position(tmp_path) == (0, 0)
    third.close()


def test_a_meta_line_of_acks_that_does_not_fit_is_ignored(tmp_path):
    q = make(tmp_path)
    records = [b"%02d" % i * 10 for i in range(3)]
    for r in records:
        q.put(r)
    meta = tmp_path / "q.diskqueue.meta.dat"
    meta.write_text(meta.read_text() + "acked 0,24 7,0\n")  # 7,0 is past the write position
    again = make(tmp_path)
    assert drain(again) == records  # at least once: everything comes back
    again.close()


def test_acking_the_oldest_releases_fully_read_segments(tmp_path):
    q = make(tmp_path)
    for i in range(12):
        q.put(b"%02d" % i * 10)
    taken = [q.get_with_token() for _ in range(9)]
    for _, token in reversed(taken[1:]):
        q.ack(token)
    assert segment_numbers(tmp_path) == [0, 1, 2]
    q.ack(taken[0][1])
    assert segment_numbers(tmp_path) == [2]
    assert (tmp_path / "q.diskqueue.meta.dat").read_text() == "3\n2,24\n2,96\n"
    q.close()


def test_empty_voids_outstanding_tokens(tmp_path):
    q = make(tmp_path)
    q.put(b"before")
    _, token = q.get_with_token()
    q.empty()
    q.ack(token)  # from before the empty: ignored
    q.put(b"after")
    assert q.get() == b"after" and q.unacked_count == 0
    q.close()


def test_a_record_taken_with_a_token_is_durable_at_once(tmp_path):
    q = make(tmp_path)  # sync_every=1
    q.put(b"in flight")
    q.get_with_token()
    # crash now, before any other operation: the meta file must still hold it
    again = make(tmp_path)
    assert again.get() == b"in flight"
    again.close()


def test_any_number_of_acks_behind_one_held_record_survive_a_crash(tmp_path):
    q = make(tmp_path, max_bytes_per_file=1 << 20, sync_every=1000)
    records = [b"%05d" % i for i in range(30000)]
    q.put_many(records)
    taken = [q.get_with_token() for _ in range(30000)]
    for _, token in taken[1:]:  # 0 stays outstanding; every other one acknowledged behind it
        q.ack(token)
    q.sync()
    meta = (tmp_path / "q.diskqueue.meta.dat").read_text()
    assert len(meta) < 100  # the meta file stays go-diskqueue's three lines
    again = make(tmp_path, max_bytes_per_file=1 << 20)
    assert again.depth == 1
    assert drain(again) == [records[0]]
    again.close()


def test_a_held_record_keeps_the_journal_within_a_constant_factor_of_what_is_live(tmp_path, monkeypatch):
    monkeypatch.setattr("nsqpy.diskqueue.journal.COMPACT_SLACK", 100)
    q = make(tmp_path, max_bytes_per_file=1 << 20, sync_every=10)
    held = None
    for round_ in range(50):  # each round: one record marked, then acknowledged
        q.put_many([b"r%04d" % (round_ * 100 + i) for i in range(100)])
        for i in range(100):
            data, token = q.get_with_token()
            if held is None:
                held = token
                continue
            q.set_marks([(token, 1)])
            q.ack(token)
    journal = tmp_path / "q.diskqueue.journal.dat"
    live = 50 * 100 - 1  # acknowledged behind the held record
    assert journal.stat().st_size <= 16 * (2 * live + 100)
    q.sync()
    again = make(tmp_path, max_bytes_per_file=1 << 20)
    assert drain(again) == [b"r0000"]
    again.close()


def three_taken(path) -> tuple[DiskQueue, list]:
    """A queue of aa, bb and cc, each read and outstanding."""
    q = make(path)
    for r in (b"aa", b"bb", b"cc"):
        q.put(r)
    return q, [q.get_with_token() for _ in range(3)]


def test_marks_come_back_with_their_records_after_a_crash(tmp_path):
    q, taken = three_taken(tmp_path)
    q.set_marks([(taken[0][1], 3), (taken[2][1], 7)])
    q.set_marks([(taken[0][1], 4)])  # the last mark wins
    q.ack(taken[1][1])
    assert q.mark_of(taken[0][1]) == 4
    again = make(tmp_path)  # a crash: no close()
    first, second = again.get_with_token(), again.get_with_token()
    assert [first[0], second[0]] == [b"aa", b"cc"]
    assert [again.mark_of(first[1]), again.mark_of(second[1])] == [4, 7]
    again.close()  # neither acknowledged: the marks stay for the next start
    third = make(tmp_path)
    assert third.mark_of(third.get_with_token()[1]) == 4
    third.close()


def test_first_deliveries_cost_one_journal_entry_and_come_back_marked_after_a_crash(tmp_path):
    q = make(tmp_path, sync_every=1000)
    records = [b"r%d" % n for n in range(6)]
    for r in records:
        q.put(r)
    q.sync()
    taken = [q.get_with_token() for _ in range(6)]
    q.set_marks([(token, 1) for _, token in taken[:2]])
    q.set_marks([(token, 1) for _, token in taken[2:4]])  # r4 and r5 read, not handed out
    assert [q.mark_of(token) for _, token in taken] == [1, 1, 1, 1, 0, 0]
    q.flush()
    assert (tmp_path / "q.diskqueue.journal.dat").stat().st_size == 16  # one position for the four
    again = make(tmp_path, sync_every=1000)  # kill -9
    taken = [again.get_with_token() for _ in range(6)]
    assert [data for data, _ in taken] == records
    assert [again.mark_of(token) for _, token in taken] == [1, 1, 1, 1, 0, 0]


def test_marks_after_a_restart_build_on_the_first_deliveries_before_it(tmp_path):
    """Handed out before a crash, handed out again after it: a mark of its
    own (2); the records after them are first deliveries again."""
    q = make(tmp_path, sync_every=1000)
    for r in (b"aa", b"bb", b"cc", b"dd"):
        q.put(r)
    q.sync()
    taken = [q.get_with_token() for _ in range(2)]
    q.set_marks([(token, 1) for _, token in taken])
    q.flush()
    again = make(tmp_path, sync_every=1000)
    taken = [again.get_with_token() for _ in range(3)]
    marks = [again.mark_of(token) for _, token in taken]
    assert marks == [1, 1, 0]
    again.set_marks([(token, mark + 1) for (_, token), mark in zip(taken, marks)])
    again.ack(taken[1][1])
    again.flush()
    third = make(tmp_path, sync_every=1000)
    taken = [third.get_with_token() for _ in range(3)]
    assert [data for data, _ in taken] == [b"aa", b"cc", b"dd"]
    assert [third.mark_of(token) for _, token in taken] == [2, 1, 0]


def test_a_compaction_keeps_how_far_first_deliveries_reached(tmp_path, monkeypatch):
    monkeypatch.setattr("nsqpy.diskqueue.journal.COMPACT_SLACK", 0)
    q = make(tmp_path, max_bytes_per_file=1 << 20, sync_every=1000)
    for n in range(10):
        q.put(b"r%d" % n)
    taken = [q.get_with_token() for _ in range(10)]
    q.set_marks([(token, 1) for _, token in taken[:8]])
    for i in range(1, 8):  # behind r0, each with an entry of its own
        q.ack(taken[i][1])
    q.sync()
    q.set_marks([(taken[0][1], 2)])  # then entries go stale: the next sync compacts
    q.ack(taken[7][1])
    q.sync()
    again = make(tmp_path, max_bytes_per_file=1 << 20)
    taken = [again.get_with_token() for _ in range(3)]
    assert [data for data, _ in taken] == [b"r0", b"r8", b"r9"]
    assert [again.mark_of(token) for _, token in taken] == [2, 0, 0]


def test_first_deliveries_past_the_end_after_a_power_loss_mark_nothing_written_later(tmp_path):
    q = big(tmp_path)
    q.sync()
    for n in range(5):
        q.put(b"old %d" % n)  # not fsynced (sync_every=1000)
    q.set_marks([(q.get_with_token()[1], 1) for _ in range(5)])
    q.flush()  # DELIVERED_TO written, no fsync
    os.truncate(q.file_name(0), 0)  # power loss: the segment's unsynced pages are lost
    q2 = big(tmp_path)
    for n in range(10):
        q2.put(b"new %d" % n)
    taken = [q2.get_with_token() for _ in range(10)]
    assert [q2.mark_of(token) for _, token in taken] == [0] * 10


def test_a_torn_journal_entry_is_cut_off(tmp_path):
    q, taken = three_taken(tmp_path)
    q.ack(taken[1][1])
    with open(tmp_path / "q.diskqueue.journal.dat", "ab") as f:
        f.write(b"\x00\x00\x00")  # a crash in the middle of an append
    again = make(tmp_path)
    assert drain(again) == [b"aa", b"cc"]
    again.close()


def test_an_acks_line_in_the_meta_file_is_read_into_the_journal(tmp_path):
    """A data dir from before the journal listed out-of-order acks in the meta file."""
    q = make(tmp_path)
    for r in (b"aa", b"bb", b"cc"):
        q.put(r)
    q.close()
    meta = tmp_path / "q.diskqueue.meta.dat"
    meta.write_text(meta.read_text() + "acked 0,6\n")  # bb: starts after aa's 4 + 2 bytes
    again = make(tmp_path)
    assert again.get_with_token()[0] == b"aa"  # held
    again.sync()
    assert "acked" not in meta.read_text()
    third = make(tmp_path)  # a crash after the line was dropped: the journal has it
    assert drain(third) == [b"aa", b"cc"]
    third.close()


def test_the_last_record_of_a_segment_in_flight_keeps_its_segment(tmp_path):
    """A consumer that finishes each message before the next is read: the
    record that ends a segment is outstanding while the reader moves on."""
    q = make(tmp_path)
    records = [b"%02d" % i * 10 for i in range(6)]  # 4 per segment
    for r in records:
        q.put(r)
    for _ in range(3):
        q.ack(q.get_with_token()[1])
    last, _ = q.get_with_token()
    assert last == records[3] and 0 in segment_numbers(tmp_path)
    again = make(tmp_path)  # a crash while it is in flight
    assert drain(again) == records[3:]
    again.close()


def test_put_many_writes_each_segments_share_at_once_and_rolls_between(tmp_path):
    q = make(tmp_path)
    records = [b"%02d" % i * 10 for i in range(10)]  # 24 bytes with its length: 4 per 100-byte file
    q.put_many(records)
    assert (q.depth, q.write_file_num, q.write_pos) == (10, 2, 48)
    with pytest.raises(ValueError, match="invalid record size 51"):
        q.put_many([b"ok", b"x" * 51])  # refused whole: nothing of it is queued
    assert q.depth == 10
    q.close()
    q = make(tmp_path)
    assert [q.get() for _ in range(10)] == records and q.get() is None


def test_a_reader_that_caught_up_follows_the_writer_into_the_next_segment(tmp_path):
    q = make(tmp_path, max_bytes_per_file=20)
    q.put(b"A" * 10)
    first = q.get_with_token()  # read from the segment still being written
    q.put(b"B" * 10)  # does not fit: the writer rolls
    second = q.get_with_token()
    assert (first[0], second[0]) == (b"A" * 10, b"B" * 10)
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".bad")]
    q.close()  # neither acknowledged: both come back
    q = make(tmp_path, max_bytes_per_file=20)
    assert [q.get(), q.get(), q.get()] == [b"A" * 10, b"B" * 10, None]


SHORT_WRITE = """
import os, resource, signal, sys
from nsqpy.diskqueue import DiskQueue
from nsqpy.diskqueue.journal import Journal
make = lambda: DiskQueue("q", sys.argv[1], max_bytes_per_file=1 << 20, min_msg_size=1, max_msg_size=100,
                         sync_every=2500)
q = make()
q.put_many([b"a" * 40] * 10)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (3000, resource.RLIM_INFINITY))  # the kernel writes what fits
try:
    q.put_many([b"b" * 40] * 100)
except OSError:
    pass
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
print(q.depth, os.path.getsize(q.file_name(0)))
q.close()
q = make()
print(sum(1 for _ in iter(q.get, None)))
"""


def test_a_refused_put_many_leaves_nothing_of_itself_on_disk(tmp_path):
    """A full disk writes part of a batch and then fails: the part is cut off,
    so the refused records do not come back after a restart."""
    result = subprocess.run([sys.executable, "-c", SHORT_WRITE, str(tmp_path)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["10", "440", "10"]


class Killed(BaseException):
    """kill -9 at the moment the meta file would be replaced."""


@pytest.fixture
def kill_at_meta(monkeypatch):
    """A context: the queue's meta file writes inside it die; after it, what
    is on disk is what a restart sees."""
    @contextlib.contextmanager
    def killed_at_meta():
        def killed(path, data):
            raise Killed()
        monkeypatch.setattr("nsqpy.diskqueue.queue.write_atomically", killed)
        with pytest.raises(Killed):
            yield
        monkeypatch.undo()
    return killed_at_meta


def test_acks_behind_a_held_record_outlive_a_crash_before_the_meta_file_moves(tmp_path, kill_at_meta):
    q = make(tmp_path)
    q.put(b"aa")
    q.put(b"bb")
    held, behind = q.get_with_token(), q.get_with_token()
    q.ack(behind[1])
    with kill_at_meta():
        q.ack(held[1])  # the journal must still guard bb while the meta file says aa is next
    again = DiskQueue("q", str(tmp_path), max_bytes_per_file=100, min_msg_size=1, max_msg_size=50, sync_every=1)
    assert drain(again) == [b"aa"]


def test_a_move_acknowledged_behind_a_held_record_is_settled_once_after_a_crash(tmp_path, kill_at_meta):
    """A dead-letter move whose acknowledgement reached the journal but not the meta file."""
    q = make(tmp_path)
    for r in (b"aa", b"bb", b"cc"):
        q.put(r)
    q.get_with_token()
    _, moved = q.get_with_token()
    q.begin_move(moved)
    with kill_at_meta():
        q.ack(moved)
    again = DiskQueue("q", str(tmp_path), max_bytes_per_file=100, min_msg_size=1, max_msg_size=50, sync_every=1)
    assert again.moving is None  # nothing to settle: the acknowledgement is durable
    again.settle_move(True)
    assert drain(again) == [b"aa", b"cc"]


def test_a_failed_compaction_keeps_what_it_had_to_write(tmp_path, monkeypatch):
    monkeypatch.setattr("nsqpy.diskqueue.journal.COMPACT_SLACK", 0)
    q = make(tmp_path, sync_every=1000)
    for r in (b"aa", b"bb", b"cc", b"dd"):
        q.put(r)
    taken = [q.get_with_token() for _ in range(4)]
    q.set_marks([(taken[0][1], 2), (taken[1][1], 2)])  # redeliveries: an entry each
    q.sync()
    for i in (0, 1, 3):  # aa and bb in order (their marks go stale), dd behind cc
        q.ack(taken[i][1])

    def no_space(path, data):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr("nsqpy.diskqueue.journal.write_atomically", no_space)
    with pytest.raises(OSError):
        q.sync()  # the compaction fails after dd's acknowledgement is on disk
    monkeypatch.undo()
    again = make(tmp_path)
    assert drain(again) == [b"cc"]


def test_a_journal_without_its_meta_file_says_nothing_of_new_records(tmp_path):
    """A queue deleted by something that knows no journal (NSQ's nsqd after
    --export-for-go), then written anew at the same positions."""
    q, taken = three_taken(tmp_path)
    q.ack(taken[1][1])  # bb acknowledged behind aa
    for name in os.listdir(tmp_path):
        if "journal" not in name:
            os.remove(tmp_path / name)
    fresh = make(tmp_path)
    for r in (b"xx", b"yy", b"zz"):
        fresh.put(r)
    again = make(tmp_path)  # a crash, then a restart: yy sits where bb was
    assert drain(again) == [b"xx", b"yy", b"zz"]
    again.close()



class KilledAt(BaseException):
    """kill -9 at a chosen step of a requeue."""


def crash_at(monkeypatch, step: str) -> None:
    """The next rewrite dies at ``step``: with the journal's move pair
    written but not the copy (``copy``); with the copy written, at the
    first fsync after it (``release``); or while the meta file is
    replaced (``meta``)."""
    def killed(*args, **kwargs):
        raise KilledAt(step)
    if step == "copy":
        write_move = Journal.write_move

        def pair_then_killed(self, *args, **kwargs):
            write_move(self, *args, **kwargs)
            killed()
        monkeypatch.setattr(Journal, "write_move", pair_then_killed)
    elif step == "release":
        fsync = os.fsync
        calls = []

        def second_killed(fd):  # the first fsyncs the pair (sync_every=1), the second the copy
            calls.append(fd)
            if len(calls) == 2:
                killed()
            fsync(fd)
        monkeypatch.setattr(os, "fsync", second_killed)
    else:
        monkeypatch.setattr("nsqpy.diskqueue.queue.write_atomically", killed)


@pytest.mark.parametrize("held_before", [False, True])
@pytest.mark.parametrize("step", ["copy", "release", "meta"])
def test_a_rewrite_cut_short_anywhere_leaves_exactly_one_record_of_it(tmp_path, monkeypatch, step, held_before):
    """nsqd's requeue while memory is full: a crash between writing the copy
    and releasing the original used to leave both (two deliveries, and with
    attempts kept, two dead letters)."""
    q = make(tmp_path, max_bytes_per_file=20)  # aa and bb fill a segment: the copy starts the next
    for r in (b"aa", b"bb"):
        q.put(r)
    first = q.get_with_token()
    second = q.get_with_token()
    requeued = second if held_before else first  # behind a held record, or the oldest one
    crash_at(monkeypatch, step)
    with pytest.raises(KilledAt):
        q.rewrite(requeued[1], requeued[0].upper())
    monkeypatch.undo()
    again = make(tmp_path, max_bytes_per_file=20)
    records = drain(again)
    assert sorted(r.lower() for r in records) == [b"aa", b"bb"], records
    assert (requeued[0].upper() in records) == (step != "copy")


def test_a_copy_never_written_is_not_mistaken_for_a_record_written_in_its_place(tmp_path):
    """The journal names a copy that was then refused (here: too large); a
    later record written where the copy would have been is not it."""
    q = make(tmp_path)
    for r in (b"aa", b"bb"):
        q.put(r)
    q.get_with_token()
    _, token = q.get_with_token()
    with pytest.raises(ValueError):
        q.rewrite(token, b"B" * 60)
    q.put(b"cc")  # where the copy would have gone
    again = make(tmp_path)  # a crash: bb was never released
    assert drain(again) == [b"aa", b"bb", b"cc"]


def test_half_a_move_pair_is_cut_off(tmp_path):
    q, taken = three_taken(tmp_path)
    q.ack(taken[1][1])
    journal = tmp_path / "q.diskqueue.journal.dat"
    size = os.path.getsize(journal)
    with open(journal, "ab") as f:
        f.write(struct.pack(">iqi", 0, 0, -2))  # a crash inside the pair's write
    again = make(tmp_path)
    assert drain(again) == [b"aa", b"cc"]
    assert os.path.getsize(journal) == size
    again.close()


def test_acknowledgements_flushed_without_a_sync_outlive_a_crash_of_the_process(tmp_path):
    """--sync-every and --sync-timeout bound what a power loss may take back;
    a flush (nsqd: once per loop turn) keeps every acknowledgement through
    kill -9 in between, in order or not, across segments."""
    q = make(tmp_path, sync_every=1000)
    records = [b"%02d" % i * 10 for i in range(12)]  # 3 segments of 4
    for r in records:
        q.put(r)
    q.sync()
    taken = [q.get_with_token() for _ in range(9)]
    for i in (0, 1, 2, 3, 4, 5, 7):  # 6 held, 7 acknowledged behind it
        q.ack(taken[i][1])
    q.set_marks([(taken[6][1], 3)])
    q.flush()
    again = make(tmp_path)  # kill -9: no sync since the puts
    first = again.get_with_token()
    assert again.mark_of(first[1]) == 3
    again.ack(first[1])
    assert [first[0], *drain(again)] == [records[6], records[8], records[9], records[10], records[11]]
    assert again.depth == 0
    again.sync()
    assert segment_numbers(tmp_path) == [2]  # the segments read before the crash go at the first sync


def test_what_was_not_flushed_comes_back_after_a_crash(tmp_path):
    q = make(tmp_path, sync_every=1000)
    for r in (b"aa", b"bb", b"cc"):
        q.put(r)
    q.sync()
    q.ack(q.get_with_token()[1])
    q.flush()
    q.ack(q.get_with_token()[1])  # acknowledged, not flushed yet
    again = make(tmp_path)
    assert drain(again) == [b"bb", b"cc"]


def test_acknowledgements_whose_gap_closed_before_the_flush_cost_no_journal_entry(tmp_path):
    """A FIN behind an outstanding record needs an entry only while the gap
    stays open: one closed by the flush is passed by the read position, and
    so is the mark of a record acknowledged since."""
    q = make(tmp_path, sync_every=1000)
    for r in (b"aa", b"bb", b"cc", b"dd", b"ee"):
        q.put(r)
    q.sync()
    taken = [q.get_with_token() for _ in range(5)]
    q.set_marks([(token, 1) for _, token in taken])
    for i in (1, 2, 3, 0):  # three behind aa, then aa: all in order by the flush
        q.ack(taken[i][1])
    q.flush()
    journal = (tmp_path / "q.diskqueue.journal.dat").read_bytes()
    assert len(journal) == 2 * 16  # how far first deliveries reached (ee), and the read position (ee)
    again = make(tmp_path)  # kill -9
    first = again.get_with_token()
    assert first[0] == b"ee" and again.mark_of(first[1]) == 1


def test_acknowledgements_since_the_last_flush_outlive_a_crash_inside_a_sync(tmp_path, kill_at_meta):
    """Acknowledged out of order, then in order once the gap closed, then a
    sync cut short before the meta file moved: the journal entry that no
    longer names them names the read position instead."""
    q = make(tmp_path, sync_every=1000)
    for r in (b"aa", b"bb", b"cc", b"dd"):
        q.put(r)
    q.sync()
    taken = [q.get_with_token() for _ in range(3)]
    for i in (1, 2, 0):
        q.ack(taken[i][1])
    with kill_at_meta():
        q.sync()
    assert drain(make(tmp_path)) == [b"dd"]


def test_a_queue_says_once_when_it_has_something_to_flush(tmp_path):
    q = make(tmp_path, sync_every=1000)
    dirty = []
    q.on_dirty = dirty.append
    for r in (b"aa", b"bb"):
        q.put(r)
    assert dirty == []  # writes are in the file already
    for _ in range(2):
        q.ack(q.get_with_token()[1])
    assert dirty == [q]
    q.flush()
    q.put(b"cc")
    q.ack(q.get_with_token()[1])
    assert dirty == [q, q]


def big(path) -> DiskQueue:
    return make(path, max_bytes_per_file=1 << 20, max_msg_size=1 << 16, sync_every=1000)


def test_a_read_to_past_the_end_after_a_power_loss_is_dropped_not_applied_later(tmp_path):
    q = big(tmp_path)
    q.sync()  # meta: write position (0, 0)
    for n in range(5):
        q.put(b"old %d" % n)  # not fsynced (sync_every=1000)
    assert drain(q) == [b"old %d" % n for n in range(5)]
    q.flush()  # READ_TO (0, 45) written, no fsync
    # power loss: the segment's unsynced pages are lost, the journal's survived
    os.truncate(q.file_name(0), 0)
    q2 = big(tmp_path)  # READ_TO past the write position
    assert q2.depth == 0
    for n in range(10):
        q2.put(b"new %d" % n)
    q2.sync()  # all ten fsynced, meta says depth 10
    # kill -9 (no close), restart
    q3 = big(tmp_path)
    assert drain(q3) == [b"new %d" % n for n in range(10)]


def test_a_read_to_past_the_end_does_not_outlive_a_clean_close(tmp_path):
    q = big(tmp_path)
    q.sync()
    for n in range(5):
        q.put(b"old %d" % n)
    drain(q)
    q.flush()
    os.truncate(q.file_name(0), 0)  # power loss as above
    q2 = big(tmp_path)
    for n in range(10):
        q2.put(b"new %d" % n)
    data, token = q2.get_with_token()
    q2.set_marks([(token, 1)])  # delivered once, in flight at shutdown: a live journal entry
    q2.close()  # clean stop
    q3 = big(tmp_path)
    assert drain(q3) == [b"new %d" % n for n in range(10)]


def test_the_read_to_of_a_journal_that_does_not_fit_is_not_applied(tmp_path):
    """Go's nsqd deleted the topic (segments and meta, not the journal) and
    wrote it again: the READ_TO does not land where one of its records starts."""
    q = big(tmp_path)
    for n in range(5):
        q.put(b"old %d" % n)
    drain(q)
    q.flush()  # journal: READ_TO (0, 45); only in-order FINs, so nothing else
    for name in os.listdir(tmp_path):
        if not name.endswith("journal.dat"):
            os.remove(tmp_path / name)
    other = tmp_path / "go"
    other.mkdir()
    g = big(other)  # stands in for Go's nsqd writing the recreated queue
    for n in range(10):
        g.put(b"new %02d" % n)
    g.sync()
    for name in os.listdir(other):
        os.replace(other / name, tmp_path / name)
    q3 = big(tmp_path)
    assert drain(q3) == [b"new %02d" % n for n in range(10)]


def test_acknowledgements_flushed_before_a_new_queues_first_sync_outlive_a_crash(tmp_path):
    """A queue created, written, read and acknowledged within one sync interval
    (nsqd at --sync-every's default, killed seconds after a topic appeared):
    what the flushes said is kept, none of it read again."""
    q = make(tmp_path, sync_every=1000)
    for r in (b"aa", b"bb", b"cc", b"dd"):
        q.put(r)
    taken = [q.get_with_token() for _ in range(3)]
    q.ack(taken[0][1])
    q.ack(taken[2][1])  # behind bb, still held
    q.flush()
    again = make(tmp_path)  # kill -9: never synced
    first = again.get_with_token()
    assert first[0] == b"bb" and again.mark_of(first[1]) == 0
    again.ack(first[1])
    assert drain(again) == [b"dd"]
