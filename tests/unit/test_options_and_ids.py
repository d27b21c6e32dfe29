import pytest

from nsqpy.cli.flags import parse_options
from nsqpy.nsqd.guid import EPOCH, GuidFactory
from nsqpy.nsqd.options import NsqdOptions
from nsqpy.options import format_duration, parse_duration, parse_int


@pytest.mark.parametrize("text,seconds", [
    ("250ms", 0.25), ("60s", 60), ("1m0s", 60), ("1h30m", 5400), ("1.5s", 1.5), ("0", 0),
    ("100us", 1e-4), ("-2s", -2), ("15m", 900),
])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "1x", "s", "1s2"])
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize("text", ["1_0s", "\u0663s", " 1s", "1s ", "2562048h", "-2562048h", "9" * 5000 + "s"])
def test_parse_duration_refuses_what_go_refuses(text):
    with pytest.raises(ValueError):
        parse_duration(text)
    assert parse_duration("+1s") == 1.0
    assert parse_duration("2562047h47m16.854775807s") == pytest.approx(9223372036.854775807)


@pytest.mark.parametrize("text", ["1_000", "+5", " 5", "5\n", "\u0663", "-5", "-0", "", "1" * 5000, "11"])
def test_parse_int_takes_ascii_digits_in_range_only(text):
    with pytest.raises(ValueError):
        parse_int(text, 0, 10)
    assert parse_int("-5", -10, 10) == -5 and parse_int("007", 0, 10) == 7


def test_format_duration_is_go_like():
    assert [format_duration(s) for s in (0.25, 60, 3600, 5400, 2)] == ["250ms", "1m0s", "1h0m0s", "1h30m0s", "2s"]


def test_flag_styles_and_defaults():
    options, show_version = parse_options("nsqd", NsqdOptions, [
        "-mem-queue-size", "5", "--sync-every=7", "--snappy=false", "--deflate",
        "--lookupd-tcp-address=a:1", "-lookupd-tcp-address", "b:2", "--e2e-processing-latency-percentile=1.0,0.5",
    ])
    assert not show_version
    assert (options.mem_queue_size, options.sync_every, options.snappy, options.deflate) == (5, 7, False, True)
    assert options.nsqlookupd_tcp_addresses == ["a:1", "b:2"]
    assert options.e2e_processing_latency_percentiles == [1.0, 0.5]
    defaults = NsqdOptions()
    assert (defaults.tcp_address, defaults.http_address, defaults.mem_queue_size, defaults.max_rdy_count,
            defaults.msg_timeout, defaults.max_req_timeout) == ("0.0.0.0:4150", "0.0.0.0:4151", 10000, 2500, 60, 3600)


def test_ids_are_unique_increasing_hex_even_past_the_sequence_space():
    guid = GuidFactory(node_id=1023)
    ids = guid.new_ids(10000) + guid.new_ids(5000)
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)
    assert all(len(i) == 16 and int(i, 16) >= 0 for i in ids)
    assert (int(ids[0], 16) >> 12) & 0x3FF == 1023


@pytest.mark.parametrize("make", [lambda guid: guid.new_ids(4), lambda guid: [guid.new_id() for _ in range(4)]],
                         ids=["batch", "one at a time"])
def test_an_id_is_nsqs_layout_in_sixteen_hex_digits(make):
    guid = GuidFactory(node_id=617)
    guid.last_ts = ts = 1 << 45  # the clock is behind it: this time unit is used
    guid.sequence = 4093
    expected = [b"%016x" % (((ts - EPOCH) << 22) | (617 << 12) | sequence) for sequence in (4094, 4095)]
    expected += [b"%016x" % (((ts + 1 - EPOCH) << 22) | (617 << 12) | sequence) for sequence in (0, 1)]
    assert make(guid) == expected


@pytest.mark.parametrize("make", [lambda guid: guid.new_ids(2), lambda guid: [guid.new_id(), guid.new_id()]],
                         ids=["batch", "one at a time"])
def test_ids_after_a_time_unit_ran_out_start_the_next_one(make):
    guid = GuidFactory(node_id=3)
    guid.last_ts = ts = 1 << 45  # the clock is behind it
    guid.sequence = 4095  # this time unit's last id is taken
    assert make(guid) == [b"%016x" % (((ts + 1 - EPOCH) << 22) | (3 << 12) | sequence) for sequence in (0, 1)]


def test_single_ids_and_batches_interleaved_stay_unique_and_increasing():
    guid = GuidFactory(node_id=5)
    guid.last_ts = 1 << 45  # the clock is behind: every id borrows from this time unit on
    ids: list[bytes] = []
    for round_ in range(3000):
        ids.append(guid.new_id())
        ids += guid.new_ids(1 + round_ % 7)
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)
