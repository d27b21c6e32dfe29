"""Keyed publishes without sockets: the codec (protocol/keyed.py) and what a
topic remembers (nsqd/publish_keys.py), on a fake clock."""

import pytest

from nsqpy.protocol import keyed
from nsqpy.protocol.commands import v2_reader
from nsqpy.protocol.errors import ProtocolError
from nsqpy.nsqd.publish_keys import KeysRefused, PublishKeys, parse_key_window


class Clock:
    def __init__(self):
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def test_the_commands_read_back_as_they_were_written():
    reader = v2_reader(1024, 4096)
    stream = (keyed.kpub("t", b"k-1", b"body") + keyed.kdpub("t", 250, b"k-2", b"later") +
              keyed.kmpub("t", [b"a", b"b"], [b"one", b"two"]))
    first, second, third = reader.feed(stream)
    assert (first.params, first.body) == ([b"KPUB", b"t", b"k-1"], b"body")
    assert (second.params, second.body) == ([b"KDPUB", b"t", b"250", b"k-2"], b"later")
    assert keyed.parse_kmpub_body(third.body, 1024, 4096) == ([b"a", b"b"], [b"one", b"two"])


@pytest.mark.parametrize("body, error", [
    (b"", "E_BAD_BODY KMPUB failed to read message count"),
    (b"\x00\x00\x00\x00", "E_BAD_BODY KMPUB invalid message count 0"),
    (b"\x00\x00\x00\x01", "E_BAD_MESSAGE KMPUB failed to read message(0) key size"),
    (b"\x00\x00\x00\x01\x05ab", "E_BAD_MESSAGE KMPUB failed to read message(0) key and body size"),
    (b"\x00\x00\x00\x01\x01a\x00\x00\x00\x00", "E_BAD_MESSAGE KMPUB invalid message(0) body size 0"),
    (b"\x00\x00\x00\x01\x01a\x00\x00\x00\x05ab", "E_BAD_MESSAGE KMPUB failed to read message(0) body"),
    (b"\x00\x00\x00\x01\x01 \x00\x00\x00\x01x", "E_BAD_KEY KMPUB message(0) key has a byte outside printable "
                                                  "ASCII (! to ~, no spaces)"),
    (b"\x00\x00\x00\x01\x01a\x00\x00\x00\x01xtrailing", "E_BAD_BODY KMPUB body has 8 bytes after message(0)"),
])
def test_a_bad_kmpub_body_names_what_is_wrong(body, error):
    with pytest.raises(ProtocolError) as raised:
        keyed.parse_kmpub_body(body, 1024, 4096)
    assert str(raised.value) == error


def test_a_message_over_the_size_limit_is_refused():
    with pytest.raises(ProtocolError, match="KMPUB message too big 5 > 4"):
        keyed.parse_kmpub_body(keyed.encode_kmpub_body([b"k"], [b"12345"]), 4, 4096)


def test_keyed_lines_are_a_key_a_space_and_a_body():
    assert keyed.keyed_lines(b"a one\n\nb two words\n", 100) == ([b"a", b"b"], [b"one", b"two words"])
    with pytest.raises(ProtocolError, match="line 0 is not '<key> <body>'"):
        keyed.keyed_lines(b"lonely\n", 100)


def keys_in(tmp_path, clock, window=120.0, max_keys=1000) -> PublishKeys:
    return PublishKeys("t", str(tmp_path / "t.keys"), lambda: window, max_keys, sync=False, clock=clock)


def test_a_key_is_fresh_once_and_again_after_its_window(tmp_path):
    clock = Clock()
    keys = keys_in(tmp_path, clock, window=10.0)
    assert keys.fresh([b"a", b"b", b"a"]) == [0, 1]
    keys.remember([b"a", b"b"])
    assert keys.fresh([b"a", b"c"]) == [1]
    assert keys.repeats == 2
    clock.now += 9.9
    assert keys.fresh([b"a"]) == []
    clock.now += 0.2
    assert keys.fresh([b"a"]) == [0]
    assert len(keys) == 0


def test_keys_written_read_back_and_a_torn_line_is_skipped(tmp_path):
    clock = Clock()
    keys = keys_in(tmp_path, clock)
    keys.remember([b"a", b"b"])
    assert keys.waiting
    keys.flush()
    assert not keys.waiting
    with open(tmp_path / "t.keys", "ab") as f:
        f.write(b"1700000000000 c")  # a crash in the middle of a write: its publish was never answered
    again = keys_in(tmp_path, clock)
    assert again.fresh([b"a", b"b", b"c"]) == [2]
    again.remember([b"d"])  # written on a line of its own, not after the torn one
    again.flush()
    assert keys_in(tmp_path, clock).fresh([b"c", b"d"]) == [0]


def test_the_file_is_rewritten_with_the_live_keys_only(tmp_path):
    clock = Clock()
    keys = keys_in(tmp_path, clock, window=1.0, max_keys=100_000)
    for turn in range(3):
        keys.remember([b"t%d-%d" % (turn, index) for index in range(10_000)])
        keys.flush()
        clock.now += 2  # every earlier key leaves the window
    keys.remember([b"last"])
    keys.flush()
    lines = (tmp_path / "t.keys").read_bytes().splitlines()
    assert [line.split(b" ")[1] for line in lines] == [b"last"]


def test_keys_off_and_keys_full_are_refused(tmp_path):
    clock = Clock()
    with pytest.raises(KeysRefused, match="publish key window is 0"):
        keys_in(tmp_path, clock, window=0.0).fresh([b"a"])
    full = keys_in(tmp_path, clock, max_keys=2)
    full.remember([b"a", b"b"])
    assert full.fresh([b"a"]) == []  # a repeat is still answered
    with pytest.raises(KeysRefused) as raised:
        full.fresh([b"c"])
    assert raised.value.code == "KEYS_FULL"


@pytest.mark.parametrize("text, seconds", [("2m", 120.0), ("0", 0.0), ("168h", 604800.0)])
def test_a_window_is_a_go_duration_up_to_a_week(text, seconds):
    assert parse_key_window(text) == seconds


@pytest.mark.parametrize("text", ["-1s", "169h", "2 minutes", ""])
def test_a_bad_window_is_a_value_error(text):
    with pytest.raises(ValueError):
        parse_key_window(text)
